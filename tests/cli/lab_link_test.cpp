// The lab's shaped link (cli/lab_netns.h) carries the rate asked for: a TCP transfer from node A's
// namespace to node B's for about 1.5 s, counted at the receiver, within 20% of the tbf rate (TCP's
// headers take about 5%). Where the kernel has netem, the delay too: a TCP connect takes a round
// trip, at least twice the one-way delay. Every wait is bounded. Skips, saying why, without root.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli/lab_netns.h"
#include "cli/lab_process.h"

namespace dpv::testing {
namespace {

using Clock = std::chrono::steady_clock;

#define DPV_LAB_SKIP_OR_FAIL(why)                                                  \
  do {                                                                             \
    if (std::getenv("DPV_REQUIRE_NETNS")) FAIL() << "DPV_REQUIRE_NETNS: " << (why); \
    GTEST_SKIP() << (why);                                                         \
  } while (0)

// Moves the calling thread into namespace `ns` (setns changes only this thread's network).
bool enter_namespace(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

sockaddr_in address(const std::string& ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

struct Transfer {
  double bits_per_s = 0;   // at the receiver, after the first 0.25 s (slow start and tbf's burst)
  double connect_s = 0;    // the sender's connect(): one round trip
  std::string error;
};

// Node A sends to node B for `seconds`; B counts. Both sides give up after 20 s.
Transfer transfer(const cli::LabNames& n, double seconds) {
  Transfer t;
  std::atomic<int> listening{0};  // 1 listening, -1 failed
  std::thread receiver([&] {
    const int s = enter_namespace(n.ns_b) ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    const int one = 1;
    if (s >= 0) ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in a = address(n.addr_b, 5201);
    if (s < 0 || ::bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 1) != 0) {
      listening = -1;
      if (s >= 0) ::close(s);
      return;
    }
    listening = 1;
    pollfd p{s, POLLIN, 0};
    const int c = ::poll(&p, 1, 20000) == 1 ? ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    ::close(s);
    if (c < 0) return;
    std::vector<char> buf(1 << 16);
    Clock::time_point first{}, mark{}, last{};
    size_t after_mark = 0;
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    for (pollfd q{c, POLLIN, 0}; Clock::now() < give_up && ::poll(&q, 1, 1000) == 1;) {
      const ssize_t got = ::read(c, buf.data(), buf.size());
      if (got <= 0) break;
      const auto now = Clock::now();
      if (first == Clock::time_point{}) first = now, mark = now + std::chrono::milliseconds(250);
      if (now >= mark) after_mark += static_cast<size_t>(got), last = now;
    }
    ::close(c);
    const double span = std::chrono::duration<double>(last - mark).count();
    if (span > 0) t.bits_per_s = 8.0 * static_cast<double>(after_mark) / span;
  });
  std::thread sender([&] {
    const auto wait_until = Clock::now() + std::chrono::seconds(10);
    while (listening == 0 && Clock::now() < wait_until) std::this_thread::yield();
    const int s = listening == 1 && enter_namespace(n.ns_a) ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    if (s < 0) {
      t.error = "could not set up the transfer (namespace, socket or listen failed)";
      return;
    }
    const int sndbuf = 128 * 1024;  // bounds what drains after the sender stops
    ::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    const sockaddr_in a = address(n.addr_b, 5201);
    const auto c0 = Clock::now();
    if (::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      t.error = "connect to node B failed";
      ::close(s);
      return;
    }
    t.connect_s = std::chrono::duration<double>(Clock::now() - c0).count();
    const std::vector<char> data(1 << 16, 'x');
    const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < stop) {
      if (::send(s, data.data(), data.size(), MSG_NOSIGNAL) <= 0) break;
    }
    ::close(s);
  });
  sender.join();
  receiver.join();
  return t;
}

TEST(LabLink, ShapedLinkCarriesTheRateAskedFor) {
  if (const auto why = cli::why_no_shaping()) DPV_LAB_SKIP_OR_FAIL("lab link test skipped: " + *why);
  std::string ns_a;
  {
    std::unique_ptr<cli::LabNetwork> net;
    try {
      net = std::make_unique<cli::LabNetwork>();
    } catch (const std::exception& e) {
      DPV_LAB_SKIP_OR_FAIL(std::string("lab link test skipped: cannot make the namespaces: ") + e.what());
    }
    ns_a = net->names().ns_a;
    EXPECT_TRUE(cli::network_namespace_exists(ns_a));
    for (double rate : {20e6, 40e6}) {
      net->shape({rate, 0, 0});
      const Transfer t = transfer(net->names(), 1.5);
      ASSERT_EQ(t.error, "");
      EXPECT_GT(t.bits_per_s, 0.8 * rate) << "shaped at " << rate << " bit/s";
      EXPECT_LT(t.bits_per_s, 1.2 * rate) << "shaped at " << rate << " bit/s";
    }
    if (net->has_netem()) {
      net->shape({40e6, 0.02, 0});
      const Transfer t = transfer(net->names(), 0.5);
      ASSERT_EQ(t.error, "");
      EXPECT_GE(t.connect_s, 0.04) << "a connect crosses the 20 ms link twice";
    } else {
      // Without netem a delay is refused with the reason, never half applied.
      try {
        net->shape({40e6, 0.02, 0});
        ADD_FAILURE() << "a delay without netem must be refused";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("netem"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_FALSE(cli::network_namespace_exists(ns_a)) << "the namespaces go with the LabNetwork";
}

}  // namespace
}  // namespace dpv::testing
