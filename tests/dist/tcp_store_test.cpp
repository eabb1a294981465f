// The rendezvous store: concurrent clients, blocking get, timeouts that name the key, the
// world-size check on joining, a port in use and a master nobody listens on.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/tcp_store.h"
#include "engine/error.h"
#include "tests/support/errors.h"
#include "tests/support/wait.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;
using dpv::testing::error_of;


TEST(TcpStore, SetGetAndCheck) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore store("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_FALSE(store.check("a"));
  store.set("a", to_bytes("hello"));
  EXPECT_TRUE(store.check("a"));
  EXPECT_EQ(to_string(store.get("a")), "hello");
  store.set("a", Bytes{});  // empty values are values too
  EXPECT_TRUE(store.get("a").empty());
}

TEST(TcpStore, ConcurrentClientsAddWithoutLosingUpdates) {
  constexpr int kClients = 8, kAdds = 200;
  TcpStoreServer server("127.0.0.1", 0, kClients);
  std::vector<std::thread> threads;
  std::atomic<int64_t> max_seen{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      TcpStore store("127.0.0.1", server.port(), kClients, milliseconds(10000));
      for (int i = 0; i < kAdds; ++i) {
        int64_t v = store.add("counter", 1);
        int64_t m = max_seen.load();
        while (v > m && !max_seen.compare_exchange_weak(m, v)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  TcpStore store("127.0.0.1", server.port(), kClients, milliseconds(5000));
  EXPECT_EQ(store.add("counter", 0), kClients * kAdds);
  EXPECT_EQ(max_seen.load(), kClients * kAdds);
}

TEST(TcpStore, GetWaitsForAnotherClientsSet) {
  TcpStoreServer server("127.0.0.1", 0, 2);
  std::thread writer([&] {
    TcpStore store("127.0.0.1", server.port(), 2, milliseconds(5000));
    // Set only once the reader is blocked in its get, so the get is the one that waits.
    EXPECT_TRUE(dpv::testing::wait_until([&] { return server.waiting() == 1; }, milliseconds(4000)));
    store.set("late", to_bytes("value"));
  });
  TcpStore reader("127.0.0.1", server.port(), 2, milliseconds(5000));
  EXPECT_EQ(to_string(reader.get("late")), "value");
  writer.join();
}

TEST(TcpStore, WaitTimesOutNamingTheKey) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore store("127.0.0.1", server.port(), 1, milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  std::string e = error_of([&] { store.get("never/set"); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("timed out after 0.3 s waiting for key 'never/set' in the store at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 5.0);
  // The connection is still usable after a timeout.
  store.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(store.get("k")), "v");
  e = error_of([&] { store.wait({"k", "missing"}, milliseconds(100)); });
  EXPECT_NE(e.find("keys 'k', 'missing'"), std::string::npos) << e;
}

TEST(TcpStore, WorldSizeMismatchIsRefused) {
  TcpStoreServer server("127.0.0.1", 0, 2);
  std::string e = error_of([&] { TcpStore store("127.0.0.1", server.port(), 3, milliseconds(2000)); });
  EXPECT_NE(e.find("world size mismatch: this rank was started with WORLD_SIZE=3 but rank 0 hosting the store has "
                   "WORLD_SIZE=2"),
            std::string::npos)
      << e;
}

// A refused rank means the job cannot form: a rank already waiting in the store is told at once
// (not after its whole timeout), and so is every later wait.
TEST(TcpStore, WorldSizeMismatchFailsEveryWaitingRankAtOnce) {
  TcpStoreServer server("127.0.0.1", 0, 2);
  TcpStore waiting("127.0.0.1", server.port(), 2, milliseconds(60000));
  std::string waited_error;
  std::thread waiter([&] { waited_error = error_of([&] { waiting.get("gloo/rank1/address"); }); });
  ASSERT_TRUE(dpv::testing::wait_until([&] { return server.waiting() == 1; }, milliseconds(10000)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { TcpStore other("127.0.0.1", server.port(), 4, milliseconds(2000)); }).find("world size mismatch"),
            std::string::npos);
  waiter.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0)
      << "the waiting rank must not sit out its 60 s timeout";
  EXPECT_NE(waited_error.find("the job cannot form: a rank joined with WORLD_SIZE=4 but rank 0 hosting the store has "
                              "WORLD_SIZE=2"),
            std::string::npos)
      << waited_error;
  EXPECT_NE(error_of([&] { waiting.wait({"x"}, milliseconds(60000)); }).find("the job cannot form"), std::string::npos);
}

// A value someone set is no counter: an add to it is refused with a message, and the connection
// (and the store) go on serving.
TEST(TcpStore, AddToAValueThatIsNoIntegerIsRefused) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore store("127.0.0.1", server.port(), 1, milliseconds(5000));
  store.set("dpv/done", to_bytes("stranger"));
  EXPECT_NE(error_of([&] { store.add("dpv/done", 1); }).find("cannot add to key 'dpv/done': its value is not an integer"),
            std::string::npos);
  EXPECT_EQ(store.add("counter", 2), 2);
}

TEST(TcpStore, PortInUseIsAClearError) {
  TcpStoreServer first("127.0.0.1", 0, 1);
  std::string e = error_of([&] { TcpStoreServer second("127.0.0.1", first.port(), 1); });
  EXPECT_NE(e.find("the port is in use"), std::string::npos) << e;
  // The engine names the variable it reads; `dpv launch`'s flag for it is the CLI's to add.
  EXPECT_NE(e.find("pick another MASTER_PORT"), std::string::npos) << e;
  EXPECT_EQ(e.find("--master-port"), std::string::npos) << e;
}

TEST(TcpStore, NoMasterListeningTimesOut) {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0, 1);  // a port that was free a moment ago
    port = probe.port();
  }
  auto start = std::chrono::steady_clock::now();
  std::string e = error_of([&] { TcpStore store("127.0.0.1", port, 1, milliseconds(400)); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("could not connect to the store at 127.0.0.1:" + std::to_string(port) + " within 0.4 s"),
            std::string::npos)
      << e;
  EXPECT_LT(waited, 5.0);
}

TEST(TcpStore, UnresolvableMasterAddress) {
  std::string e = error_of([&] { TcpStore store("no-such-host.invalid", 29500, 1, milliseconds(400)); });
  EXPECT_NE(e.find("cannot resolve the address 'no-such-host.invalid'"), std::string::npos) << e;
}

TEST(TcpStore, AddressOfAnotherMachineCannotHostTheStore) {
  std::string e = error_of([&] { TcpStoreServer server("192.0.2.1", 0, 1); });  // TEST-NET-1, never local
  EXPECT_NE(e.find("must be an address of the node with node rank 0"), std::string::npos) << e;
}

}  // namespace
}  // namespace dpv::dist
