#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <climits>
#include <cstring>
#include <random>

#include "engine/error.h"
#include "engine/io/input_file.h"
#include "engine/io/temp_file_cleanup.h"

namespace dpv {
namespace {

// A name no other writer (thread or process) picks: pid, a per-process counter and randomness.
// Short and hidden, in the target's folder (rename works only within one file system): a suffix on
// the target's own name would push a legal 233-255 character name over NAME_MAX.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  static thread_local std::mt19937_64 gen{std::random_device{}() ^
                                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  const uint64_t salt = gen() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%012llx", static_cast<unsigned long long>(salt & 0xFFFFFFFFFFFFull));
  const auto slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  return folder + ".dpv-tmp-" + std::to_string(::getpid()) + "-" + suffix;
}

// Writes everything, retrying short writes and interrupted calls.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string parent_folder(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Error file_error(int err, const std::string& path, const std::string& context) {
  ErrorClass kind = ErrorClass::OSError;
  if (err == ENOENT) kind = ErrorClass::FileNotFoundError;
  else if (err == EACCES || err == EPERM) kind = ErrorClass::PermissionError;
  else if (err == EISDIR) kind = ErrorClass::IsADirectoryError;
  else if (err == ENOTDIR) kind = ErrorClass::NotADirectoryError;
  return Error("[Errno " + std::to_string(err) + "] " + std::strerror(err) + ": '" + path + "'" +
                   (context.empty() ? "" : " (" + context + ")"),
               kind);
}

std::string write_target(const std::string& path) {
  std::string target = path;
  for (int hops = 0; hops < 40; ++hops) {  // 40: the kernel's own limit on links followed
    struct stat info {};
    if (::lstat(target.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return target;
    std::string link(PATH_MAX, '\0');
    const ssize_t n = ::readlink(target.c_str(), link.data(), link.size());
    if (n <= 0) return target;
    link.resize(static_cast<size_t>(n));
    target = (link.front() == '/' || target.find('/') == std::string::npos) ? link : parent_folder(target) + "/" + link;
  }
  throw file_error(ELOOP, path);
}

std::string checked_write_target(const std::string& path) {
  check(!path.empty(), "cannot write a file with an empty name", ErrorClass::FileNotFoundError);
  const std::string target = write_target(path);
  struct stat info {};
  if (::stat(target.c_str(), &info) != 0) return target;  // a new file
  if (S_ISDIR(info.st_mode)) throw file_error(EISDIR, path);
  // The rename would replace a device or FIFO (as root, /dev/null itself) with a regular file.
  if (!S_ISREG(info.st_mode))
    throw Error("'" + path + "' is " + describe_file_type(info.st_mode) +
                    ", not a regular file; outputs are written only to regular files (choose another path)",
                ErrorClass::OSError);
  return target;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string target = checked_write_target(path);
  const std::string temp = temp_name_for(target);
  // Registered before it exists, so no moment is left where a signal could strand it.
  TempFileGuard guard(temp);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    throw file_error(err, path, "creating the temporary file '" + temp + "'");
  }
  // From here on every failure removes the temporary file, so the old file (if any) stays intact.
  auto fail = [&](const char* step, int err) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw file_error(err, path, step);
  };
  if (!write_all(fd, bytes.data(), bytes.size())) fail("writing the data", errno);
  if (::fsync(fd) != 0) fail("flushing to disk", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw file_error(err, path, "closing the file");
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw file_error(err, path, "renaming the temporary file into place");
  }
  // Make the rename itself durable; failing here does not lose data already in place, so it is best effort.
  const int dir = ::open(parent_folder(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace dpv
