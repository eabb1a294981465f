#include "engine/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "engine/error.h"
#include "engine/io/atomic_file.h"

namespace dpv {
namespace {

// Closes the descriptor on every path out, including the throws.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

Error too_large(const std::string& path, uint64_t size, const InputKind& kind) {
  return Error("'" + path + "' is " + std::to_string(size) + " bytes, over the " + describe_bytes(kind.max_bytes) +
                   " limit for a " + kind.name + " (is it the right file?)",
               ErrorClass::ValueError);
}

}  // namespace

std::string describe_bytes(uint64_t bytes) {
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::string describe_file_type(unsigned mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

std::string read_file(const std::string& path, const InputKind& kind) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw file_error(errno, path);
  FdCloser closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw file_error(errno, path);
  if (S_ISDIR(info.st_mode)) throw file_error(EISDIR, path);
  if (!S_ISREG(info.st_mode))
    throw Error("'" + path + "' is " + describe_file_type(info.st_mode) + ", not a regular file; a " + kind.name +
                    " is read only from a regular file (copy it to one first)",
                ErrorClass::OSError);
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size > kind.max_bytes) throw too_large(path, size, kind);
  // A regular file never blocks; back to ordinary reads so a slow disk cannot return EAGAIN.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) throw file_error(errno, path);
  std::string bytes;
  bytes.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw file_error(errno, path);
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
    // The file may grow while it is read: the limit holds for what is read, not only for fstat's size.
    if (bytes.size() > kind.max_bytes) throw too_large(path, bytes.size(), kind);
  }
  return bytes;
}

}  // namespace dpv
