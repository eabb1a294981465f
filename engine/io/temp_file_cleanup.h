#pragma once
// Temporary files that a signal must not leave behind. write_file_atomic registers its temporary
// file while it writes; if SIGINT, SIGTERM or SIGHUP arrives meanwhile, the handler unlinks every
// registered file and then lets the signal do what it would have done (the handler that was
// installed before, or the default action: the process ends by that signal, as before).
#include <string>

namespace dpv {

// Registers `path` (installing the handlers on first use). Returns a slot to pass to
// forget_temp_file, or -1 when every slot is taken (then the file is simply not cleaned up on a
// signal; the write itself goes on). Thread-safe.
int remember_temp_file(const std::string& path);
// The file was renamed into place or removed: a signal must no longer touch it.
void forget_temp_file(int slot);

// RAII form: remembers on construction, forgets on destruction.
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path) : slot_(remember_temp_file(path)) {}
  ~TempFileGuard() { forget_temp_file(slot_); }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_;
};

}  // namespace dpv
