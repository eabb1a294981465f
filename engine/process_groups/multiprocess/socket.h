#pragma once
// TCP sockets for the store and the launcher: blocking sockets driven by poll() with deadlines, so
// no call waits forever, and error texts that name the address and the system's reason.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dpv::dist {

using Clock = std::chrono::steady_clock;

// Seconds as the duration type the timeouts use; "30 s" in messages.
std::chrono::milliseconds seconds_to_ms(double seconds);
std::string describe_seconds(std::chrono::milliseconds timeout);

// An owned file descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();
  // Wakes a thread blocked on this socket (recv returns 0) without closing the descriptor.
  void shutdown_both();

  // Sends or receives exactly `size` bytes before `deadline`; throws dpv::Error naming `what`
  // ("the store at 127.0.0.1:29500") on timeout, a closed connection or a system error.
  void send_all(const void* data, size_t size, Clock::time_point deadline, const std::string& what);
  void recv_all(void* data, size_t size, Clock::time_point deadline, const std::string& what);
  // As recv_all, but returns false (instead of throwing) when the peer closed the connection
  // before the first byte: how a server sees a client leave.
  bool recv_all_or_eof(void* data, size_t size, Clock::time_point deadline, const std::string& what);
  // True once there is something to read (or the peer closed), false when the deadline passed first:
  // how a client tells "no answer yet" from a broken connection.
  bool readable_before(Clock::time_point deadline) const;

 private:
  int fd_ = -1;
};

// "host:port" for messages; IPv6 hosts in brackets.
std::string endpoint_text(const std::string& host, int port);

// A listening socket bound to host:port (port 0: the system picks one; see bound_port).
// Throws dpv::Error for an address that is not this machine's or a port in use, saying what to do.
Socket listen_tcp(const std::string& host, int port, int backlog = 128);
int bound_port(const Socket& listener);
// Waits up to `timeout` for a connection; returns an invalid Socket on timeout.
Socket accept_tcp(const Socket& listener, std::chrono::milliseconds timeout);

// Connects to host:port, retrying refused connections (the server may not be up yet) until
// `timeout` has passed; throws dpv::Error naming the address, the time waited and the last reason.
// `peer` is what the message calls the server ("the store at host:port" when empty) and `advice`
// what it suggests (by default: is rank 0 running there, are MASTER_ADDR / MASTER_PORT the same).
Socket connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout, const std::string& peer = "",
                   const std::string& advice = "");

// The local address this machine would use to reach `host` (no packet is sent): the address a
// rank advertises to its peers when no network interface is named.
std::string local_address_towards(const std::string& host);

}  // namespace dpv::dist
