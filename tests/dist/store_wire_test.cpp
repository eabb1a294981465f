// The store's wire format decoded apart from the socket (decode_request), and the server against
// clients that send what no dpv client sends: a key over the cap, an unknown command, a wait of
// INT64_MIN milliseconds (an overflowing deadline), an add past INT64_MAX, and 2000 connections
// that come and go without a word or mid-request.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/socket.h"
#include "engine/process_groups/multiprocess/store_request.h"
#include "engine/process_groups/multiprocess/tcp_store.h"
#include "tests/support/errors.h"
#include "tests/support/wait.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;
using dpv::testing::error_of;
using Outcome = DecodedRequest::Outcome;

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// The header of a one-key request whose value claims `value_size` bytes (none of them sent).
Bytes header_claiming(uint8_t command, uint32_t key_length, uint64_t value_size) {
  Bytes b = encode_request(StoreRequest{command, {std::string(std::min(key_length, kMaxStoreKeyBytes), 'k')}, {}, 0});
  b.resize(b.size() - 16);  // drop the empty value's length and the number
  std::memcpy(b.data() + 5, &key_length, 4);
  b.insert(b.end(), reinterpret_cast<const char*>(&value_size), reinterpret_cast<const char*>(&value_size) + 8);
  return b;
}

TEST(StoreWire, EveryPrefixNeedsMoreAndNeverAsksPastTheRequest) {
  const StoreRequest sent{kStoreWait, {"dpv/rank/0", "", "dpv/rank/1"}, to_bytes("value"), -42};
  Bytes wire = encode_request(sent);
  for (size_t n = 0; n < wire.size(); ++n) {
    const DecodedRequest d = decode_request(wire.data(), n);
    ASSERT_EQ(d.outcome, Outcome::kNeedMore) << n;
    EXPECT_GE(d.missing, 1u) << n;
    EXPECT_LE(d.missing, wire.size() - n) << n;  // never waits for a byte of the next request
  }
  const size_t length = wire.size();
  wire.push_back('\x03');  // the next request's first byte stays where it is
  const DecodedRequest d = decode_request(wire.data(), wire.size());
  ASSERT_EQ(d.outcome, Outcome::kRequest);
  EXPECT_EQ(d.consumed, length);
  EXPECT_EQ(d.request.command, sent.command);
  EXPECT_EQ(d.request.keys, sent.keys);
  EXPECT_EQ(d.request.value, sent.value);
  EXPECT_EQ(d.request.number, sent.number);
}

TEST(StoreWire, LengthsOverTheirLimitsAreMalformedBeforeTheirBytesArrive) {
  // A claimed gigabyte is within the limit: the decoder asks for it (the server receives it in
  // steps); one byte more is refused at once.
  Bytes claim = header_claiming(kStoreSet, 1, kMaxStoreValueBytes);
  DecodedRequest d = decode_request(claim.data(), claim.size());
  ASSERT_EQ(d.outcome, Outcome::kNeedMore);
  EXPECT_EQ(d.missing, kMaxStoreValueBytes + 8);
  claim = header_claiming(kStoreSet, 1, kMaxStoreValueBytes + 1);
  d = decode_request(claim.data(), claim.size());
  ASSERT_EQ(d.outcome, Outcome::kMalformed);
  EXPECT_EQ(d.problem, "a value of 1073741825 bytes, over the limit of 1073741824");
  // The key's length is refused before its bytes.
  claim = header_claiming(kStoreSet, kMaxStoreKeyBytes + 1, 0);
  d = decode_request(claim.data(), 9);
  ASSERT_EQ(d.outcome, Outcome::kMalformed);
  EXPECT_EQ(d.problem, "a key of 65537 bytes, over the limit of 65536");
  const char unknown[] = {'\x7f'};
  d = decode_request(unknown, 1);
  ASSERT_EQ(d.outcome, Outcome::kMalformed);
  EXPECT_EQ(d.problem, "unknown command 127 (not dpv's store protocol)");
}

TEST(StoreWire, TheClientRefusesAKeyOverTheCapNamingTheLimit) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
  const std::string msg = error_of([&] { client.set(std::string(kMaxStoreKeyBytes + 1, 'k'), to_bytes("v")); });
  EXPECT_NE(msg.find("is 65537 bytes, over the store's limit of 65536 bytes for a key"), std::string::npos) << msg;
  client.set(std::string(kMaxStoreKeyBytes, 'k'), to_bytes("v"));  // the cap itself is a key; the connection is fine
  EXPECT_TRUE(client.check(std::string(kMaxStoreKeyBytes, 'k')));
}

TEST(StoreWire, TheServerDropsAClientSendingAKeyOverTheCapAndServesTheOthers) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  Socket s = connect_tcp("127.0.0.1", server.port(), milliseconds(5000));
  const Bytes claim = header_claiming(kStoreSet, kMaxStoreKeyBytes + 1, 0);
  s.send_all(claim.data(), 9, Clock::now() + std::chrono::seconds(5), "the store");
  char byte = 0;  // the server closes the connection without reading the key
  EXPECT_FALSE(s.recv_all_or_eof(&byte, 1, Clock::now() + std::chrono::seconds(20), "the store"));
  TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_FALSE(client.check("k"));
}

// Sends one request over a raw connection and returns the reply's status byte.
uint8_t raw_status(const TcpStoreServer& server, const StoreRequest& request) {
  Socket s = connect_tcp("127.0.0.1", server.port(), milliseconds(5000));
  const Bytes wire = encode_request(request);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  s.send_all(wire.data(), wire.size(), deadline, "the store");
  uint8_t status = 0xff;
  s.recv_all(&status, 1, deadline, "the store");
  return status;
}

TEST(StoreWire, HostileNumbersNeitherOverflowNorStick) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  // A wait of INT64_MIN ms: now() + that overflowed; it is a wait of nothing, answered "timed out" (1).
  EXPECT_EQ(raw_status(server, {kStoreWait, {"never"}, {}, std::numeric_limits<int64_t>::min()}), 1);
  // A counter pushed past INT64_MAX: the add is refused (its connection dropped), the value kept.
  TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_EQ(client.add("c", std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  EXPECT_NE(error_of([&] { client.add("c", 1); }), testing::kNoError);
  TcpStore again("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_EQ(again.add("c", 0), std::numeric_limits<int64_t>::max());
}

TEST(StoreWire, TwoThousandConnectionsThatLeaveSilentlyOrMidRequestLeaveNoDescriptor) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  const size_t before = open_descriptors();
  const Bytes half = header_claiming(kStoreSet, 1, 1 << 20);
  for (int i = 0; i < 2000; ++i) {
    Socket s = connect_tcp("127.0.0.1", server.port(), milliseconds(5000));
    if (i % 2) s.send_all(half.data(), half.size(), Clock::now() + std::chrono::seconds(5), "the store");
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.open_connections() == 0; })) << server.open_connections();
  EXPECT_LE(open_descriptors(), before + 2);
  TcpStore client("127.0.0.1", server.port(), 1, milliseconds(5000));
  EXPECT_FALSE(client.check("k"));
}

}  // namespace
}  // namespace dpv::dist
