#pragma once
// The engine's one error type. Messages use the words PyTorch users know; `kind` is the Python
// exception class PyTorch would raise (ValueError, RuntimeError, TypeError, ...), so front ends
// can print "ValueError: Expected more than 1 value per channel ..." exactly as PyTorch does.
#include <stdexcept>
#include <string>

namespace dpv {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, std::string kind = "RuntimeError")
      : std::runtime_error(std::move(message)), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }
  // "ValueError: message", the way a Python traceback ends.
  std::string full() const { return kind_ + ": " + what(); }

 private:
  std::string kind_;
};

// Throws dpv::Error when `ok` is false. For checks whose message is cheap to build.
inline void check(bool ok, const std::string& message, const char* kind = "RuntimeError") {
  if (!ok) throw Error(message, kind);
}

}  // namespace dpv
