#pragma once
// The engine's one error type. The message uses the words PyTorch users know, and `error_class`
// is the Python exception class PyTorch would raise, so front ends can print "ValueError:
// Expected more than 1 value per channel ..." exactly as PyTorch does. Beside the text, an error
// carries what a front end may decide on: a typed reason and where it happened (replica, rank,
// device, stage). Nothing outside the engine reads meaning out of the message.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

namespace dpv {

// The Python exception classes PyTorch raises for the errors the engine reproduces.
enum class ErrorClass : uint8_t {
  RuntimeError,
  ValueError,
  TypeError,
  IndexError,
  KeyError,
  OSError,
  FileNotFoundError,
  PermissionError,
  IsADirectoryError,
  NotADirectoryError,
  UnicodeDecodeError,
  OutOfMemoryError,  // torch.OutOfMemoryError (torch.cuda.OutOfMemoryError)
};

// The class's name as Python prints it ("ValueError").
inline const char* error_class_name(ErrorClass error_class) {
  switch (error_class) {
    case ErrorClass::RuntimeError: return "RuntimeError";
    case ErrorClass::ValueError: return "ValueError";
    case ErrorClass::TypeError: return "TypeError";
    case ErrorClass::IndexError: return "IndexError";
    case ErrorClass::KeyError: return "KeyError";
    case ErrorClass::OSError: return "OSError";
    case ErrorClass::FileNotFoundError: return "FileNotFoundError";
    case ErrorClass::PermissionError: return "PermissionError";
    case ErrorClass::IsADirectoryError: return "IsADirectoryError";
    case ErrorClass::NotADirectoryError: return "NotADirectoryError";
    case ErrorClass::UnicodeDecodeError: return "UnicodeDecodeError";
    case ErrorClass::OutOfMemoryError: return "OutOfMemoryError";
  }
  return "RuntimeError";
}

// Why it failed, where a front end or the engine itself acts on the cause.
enum class ErrorReason : uint8_t {
  Unspecified,
  // BatchNorm in training got one value per channel (a one-sample chunk without spatial size).
  BatchNormSingleValue,
  // A device ran out of memory.
  OutOfMemory,
  // A collective gave up because another rank failed first; that rank's error is the cause.
  GroupAborted,
};

// Where the error happened; -1 where it does not apply or is not known.
struct ErrorSite {
  int replica = -1;  // nn.DataParallel's replica (parallel_apply's "in replica j")
  int rank = -1;     // the DDP rank
  int device = -1;   // the index of the device in the run's device list
  int stage = -1;    // the index of the stage in the iteration's plan
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, ErrorClass error_class = ErrorClass::RuntimeError,
                 ErrorReason reason = ErrorReason::Unspecified, ErrorSite site = {})
      : std::runtime_error(std::move(message)), class_(error_class), reason_(reason), site_(site) {}

  ErrorClass error_class() const { return class_; }
  // The Python class's name ("ValueError").
  std::string kind() const { return error_class_name(class_); }
  ErrorReason reason() const { return reason_; }
  const ErrorSite& site() const { return site_; }
  // "ValueError: message", the way a Python traceback ends.
  std::string full() const { return kind() + ": " + what(); }

  // The same error (class, reason, site) with other words: a prefix that says where it was
  // found, as "layer 3: ..." or "--out: ...".
  Error reworded(std::string message) const {
    Error same(std::move(message), class_, reason_, site_);
    same.settings_ = settings_;
    return same;
  }
  // The configuration the error is about, by the names the engine read it under (environment
  // variables: "MASTER_PORT"), so a front end can name the option of its own that set them.
  const std::vector<std::string>& settings() const { return settings_; }
  Error& about_settings(std::vector<std::string> names) {
    settings_ = std::move(names);
    return *this;
  }
  // Setters for the site, for the layer that knows it while the error passes through.
  Error& at_replica(int replica, int device) {
    site_.replica = replica;
    site_.device = device;
    return *this;
  }
  Error& at_rank(int rank) {
    site_.rank = rank;
    if (site_.device < 0) site_.device = rank;
    return *this;
  }
  Error& at_stage(int stage) {
    if (site_.stage < 0) site_.stage = stage;
    return *this;
  }

 private:
  ErrorClass class_;
  ErrorReason reason_;
  ErrorSite site_;
  std::vector<std::string> settings_;
};

// Throws dpv::Error when `ok` is false. For checks whose message is cheap to build.
inline void check(bool ok, const std::string& message, ErrorClass error_class = ErrorClass::RuntimeError) {
  if (!ok) throw Error(message, error_class);
}

}  // namespace dpv
