// The store against clients that come and go or lie: 1100 connect/close cycles used to leave 1110
// descriptors open in rank 0, and a Set claiming a 2^30-byte value made it allocate 1 GiB before a
// byte of the value arrived.
#include <malloc.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/socket.h"
#include "engine/process_groups/multiprocess/tcp_store.h"
#include "tests/support/wait.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// The process's peak address space (VmPeak): an allocation counts whether or not its pages were
// touched (a zero-filled gigabyte may never be).
long peak_address_space_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmPeak:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

TEST(TcpStoreLimits, ClosedConnectionsAreReleased) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore keep("127.0.0.1", server.port(), 1, milliseconds(5000));  // one client stays
  ASSERT_TRUE(testing::wait_until([&] { return server.open_connections() == 1; }));
  const size_t before = open_descriptors();
  for (int i = 0; i < 300; ++i) {
    TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
    client.set("k", to_bytes(std::to_string(i)));
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.open_connections() == 1; })) << server.open_connections();
  // Each cycle used to keep the server's end of the connection open.
  EXPECT_LE(open_descriptors(), before + 2);
  EXPECT_EQ(to_string(keep.get("k")), "299");
}

TEST(TcpStoreLimits, AClaimedValueLengthIsNotAllocatedBeforeItsBytesArrive) {
  // One malloc arena: each new thread's arena reserves 64-128 MiB of address space, and two of them
  // made under load were enough to pass the bound below without any allocation of the store's.
  mallopt(M_ARENA_MAX, 1);
  TcpStoreServer server("127.0.0.1", 0, 1);
  const long peak_before = peak_address_space_kib();
  {
    // A Set of one key "k" claiming a 2^30-byte value, then 16 bytes of it and a hang-up.
    Socket s = connect_tcp("127.0.0.1", server.port(), milliseconds(5000));
    std::string request(1, '\2');  // kSet
    auto put = [&request](const void* p, size_t n) { request.append(static_cast<const char*>(p), n); };
    const uint32_t keys = 1, key_length = 1;
    const uint64_t claimed = uint64_t{1} << 30;
    put(&keys, 4);
    put(&key_length, 4);
    request += "k";
    put(&claimed, 8);
    request += std::string(16, 'v');
    s.send_all(request.data(), request.size(), Clock::now() + std::chrono::seconds(5), "the store");
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.open_connections() == 0; }));
  // Growing with the bytes received, the server used about a megabyte, not the gigabyte claimed.
  ASSERT_GT(peak_before, 0);
  EXPECT_LT(peak_address_space_kib() - peak_before, 256 * 1024) << peak_before << " KiB before";
  TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_FALSE(client.check("k"));  // the partial value was never stored
}

}  // namespace
}  // namespace dpv::dist
