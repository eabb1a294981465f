#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "engine/error.h"

namespace dpv {
namespace {

std::string system_reason(int err) { return std::strerror(err); }

// A name no other writer (thread or process) picks: pid, a per-process counter and randomness.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  static thread_local std::mt19937_64 gen{std::random_device{}() ^
                                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  const uint64_t salt = gen() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%012llx", static_cast<unsigned long long>(salt & 0xFFFFFFFFFFFFull));
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + suffix;
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

void write_file_atomic(const std::string& path, const std::string& bytes) {
  check(!path.empty(), "cannot write a file with an empty name");
  const std::string temp = temp_name_for(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot write '" + path + "': " + system_reason(err) + " (creating the temporary file '" + temp + "')");
  }
  // From here on every failure removes the temporary file, so the old file (if any) stays intact.
  auto fail = [&](const char* step, int err) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw Error("cannot write '" + path + "': " + system_reason(err) + " (" + step + ")");
  };
  if (!write_all(fd, bytes.data(), bytes.size())) fail("writing the data", errno);
  if (::fsync(fd) != 0) fail("flushing to disk", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw Error("cannot write '" + path + "': " + system_reason(err) + " (closing the file)");
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw Error("cannot write '" + path + "': " + system_reason(err) + " (renaming the temporary file into place)");
  }
  // Make the rename itself durable; failing here does not lose data already in place, so it is best effort.
  const int dir = ::open(parent_folder(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot read '" + path + "': " + system_reason(err));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot read '" + path + "': " + system_reason(err));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    throw Error("cannot read '" + path + "': it is a folder, not a file");
  }
  std::string bytes;
  if (S_ISREG(info.st_mode) && info.st_size > 0) bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error("cannot read '" + path + "': " + system_reason(err));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace dpv
