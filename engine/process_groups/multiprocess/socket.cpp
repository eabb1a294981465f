#include "engine/process_groups/multiprocess/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

#include "engine/error.h"

namespace dpv::dist {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left);
}

// Waits until fd is readable (events = POLLIN) or writable (POLLOUT); false on timeout.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) throw Error("poll failed: " + errno_text(errno));
  }
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    throw Error("cannot resolve the address '" + host + "': " + gai_strerror(rc) +
                " (check MASTER_ADDR: a host name or IP address of the node with node rank 0)").about_settings({"MASTER_ADDR"});
  }
  return AddrInfoPtr(result);
}

void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

std::string describe_seconds(std::chrono::milliseconds timeout) {
  std::ostringstream s;
  s << static_cast<double>(timeout.count()) / 1000.0 << " s";
  return s.str();
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown_both() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::send_all(const void* data, size_t size, Clock::time_point deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!wait_ready(fd_, POLLOUT, deadline)) throw Error("timed out sending to " + what);
    ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error("lost the connection to " + what + ": " + errno_text(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

bool Socket::recv_all_or_eof(void* data, size_t size, Clock::time_point deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    if (!wait_ready(fd_, POLLIN, deadline)) throw Error("timed out waiting for a reply from " + what);
    ssize_t n = ::recv(fd_, p + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error("lost the connection to " + what + ": " + errno_text(errno));
    }
    if (n == 0) {
      if (got == 0) return false;
      throw Error("lost the connection to " + what + ": it closed the connection mid-message");
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool Socket::readable_before(Clock::time_point deadline) const { return wait_ready(fd_, POLLIN, deadline); }

void Socket::recv_all(void* data, size_t size, Clock::time_point deadline, const std::string& what) {
  if (!recv_all_or_eof(data, size, deadline, what))
    throw Error("lost the connection to " + what + ": it closed the connection (did that process stop?)");
}

std::string endpoint_text(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Socket listen_tcp(const std::string& host, int port, int backlog) {
  AddrInfoPtr addrs = resolve(host, port, true);
  std::string last_error = "no address";
  int last_errno = 0;
  for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      last_errno = errno;
      last_error = errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.fd(), backlog) != 0) {
      last_errno = errno;
      last_error = errno_text(errno);
      continue;
    }
    return s;
  }
  std::string where = endpoint_text(host, port);
  if (last_errno == EADDRINUSE) {
    throw Error("cannot host the store on " + where + ": the port is in use (another job, or one that is still "
                "stopping?); pick another MASTER_PORT").about_settings({"MASTER_PORT"});
  }
  if (last_errno == EADDRNOTAVAIL) {
    throw Error("cannot host the store on " + where + ": " + last_error +
                " (MASTER_ADDR must be an address of the node with node rank 0)").about_settings({"MASTER_ADDR"});
  }
  throw Error("cannot host the store on " + where + ": " + last_error);
}

int bound_port(const Socket& listener) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error("getsockname failed: " + errno_text(errno));
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

Socket accept_tcp(const Socket& listener, std::chrono::milliseconds timeout) {
  if (!wait_ready(listener.fd(), POLLIN, Clock::now() + timeout)) return Socket();
  int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  set_no_delay(fd);
  return Socket(fd);
}

Socket connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout, const std::string& peer,
                   const std::string& advice) {
  const Clock::time_point deadline = Clock::now() + timeout;
  AddrInfoPtr addrs = resolve(host, port, false);
  std::string last_error = "no address";
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!s.valid()) {
        last_error = errno_text(errno);
        continue;
      }
      int rc = ::connect(s.fd(), a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        if (!wait_ready(s.fd(), POLLOUT, deadline)) {
          last_error = "no answer";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc != 0) {
        last_error = errno_text(errno);
        continue;
      }
      // Back to blocking mode: every later call goes through poll() with a deadline anyway.
      int flags = ::fcntl(s.fd(), F_GETFL);
      ::fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
      set_no_delay(s.fd());
      return s;
    }
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  throw Error("could not connect to " + (peer.empty() ? "the store at " + endpoint_text(host, port) : peer) +
              " within " + describe_seconds(timeout) + " (last attempt: " + last_error + "); " +
              (advice.empty() ? "is rank 0 running there, and are MASTER_ADDR / MASTER_PORT the same on every node?"
                              : advice))
      .about_settings({"MASTER_ADDR", "MASTER_PORT"});
}

std::string local_address_towards(const std::string& host) {
  AddrInfoPtr addrs = resolve(host, 9, false);
  for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
    Socket s(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid() || ::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* src = local.ss_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (::inet_ntop(local.ss_family, src, text, sizeof(text))) return text;
  }
  throw Error("no route from this machine to '" + host + "' (check MASTER_ADDR, or name the network "
              "interface with GLOO_SOCKET_IFNAME)").about_settings({"MASTER_ADDR", "GLOO_SOCKET_IFNAME"});
}

}  // namespace dpv::dist
