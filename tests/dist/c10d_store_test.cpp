// The client of PyTorch's TCPStore against a scripted stand-in for its daemon on 127.0.0.1: every
// request framed as PyTorch 1.13 frames it (bytes checked), keys under the worker prefix, and the
// failure paths: no store, a store that never answers, a truncated answer, a huge length, a bad
// status byte. Each fails within the timeout with a message naming the store and the key.
// (c10d_store_pytorch_test.cpp runs the client against PyTorch's real TCPStore.)
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/c10d_store.h"
#include "engine/process_groups/multiprocess/socket.h"
#include "engine/error.h"
#include "tests/support/errors.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;
using dpv::testing::error_of;


// Reading and answering in the daemon's framing: u64 lengths, native integers.
Clock::time_point soon() { return Clock::now() + std::chrono::seconds(5); }
template <typename T>
T read_value(Socket& s) {
  T v{};
  s.recv_all(&v, sizeof(T), soon(), "the client");
  return v;
}
std::string read_text(Socket& s) {
  const uint64_t n = read_value<uint64_t>(s);
  std::string text(n, '\0');
  if (n) s.recv_all(text.data(), n, soon(), "the client");
  return text;
}
template <typename T>
void answer_value(Socket& s, T v) {
  s.send_all(&v, sizeof(T), soon(), "the client");
}
void answer_bytes(Socket& s, const std::string& bytes) {
  answer_value<uint64_t>(s, bytes.size());
  s.send_all(bytes.data(), bytes.size(), soon(), "the client");
}

// One request as text ("ADD init/ 1", "WAIT a b", ...), parsed as PyTorch 1.13's daemon parses it.
std::string read_request(Socket& s) {
  switch (read_value<uint8_t>(s)) {
    case 0: {
      std::string key = read_text(s);
      return "SET " + key + " " + read_text(s);
    }
    case 2:
      return "GET " + read_text(s);
    case 3: {
      std::string key = read_text(s);
      return "ADD " + key + " " + std::to_string(read_value<int64_t>(s));
    }
    case 4:
    case 5: {
      std::string text = "?";
      const uint64_t n = read_value<uint64_t>(s);
      for (uint64_t i = 0; i < n; ++i) text.append(" ").append(read_text(s));
      return text;
    }
    default:
      return "UNKNOWN";
  }
}

// A stand-in for the store's daemon: runs script(connection index, socket) for each client that
// connects, one after the other, until destroyed.
class FakeStore {
 public:
  explicit FakeStore(std::function<void(int, Socket&)> script)
      : listener_(listen_tcp("127.0.0.1", 0)), port_(bound_port(listener_)), script_(std::move(script)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeStore() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void serve() {
    for (int index = 0; !stop_;) {
      Socket client = accept_tcp(listener_, milliseconds(50));
      if (!client.valid()) continue;
      try {
        script_(index++, client);
      } catch (const std::exception&) {
        // the client hung up: the next one may come
      }
    }
  }
  Socket listener_;
  int port_;
  std::function<void(int, Socket&)> script_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Answers ADD, SET and GET as a healthy store would (ADD: delta + 6; GET: "v\0x"), logging each.
void healthy(Socket& s, std::vector<std::string>& log, std::mutex& mu) {
  for (;;) {
    uint8_t query = 0;
    if (!s.recv_all_or_eof(&query, 1, Clock::now() + std::chrono::seconds(30), "the client")) return;
    if (query != 0 && query != 2 && query != 3) return;
    const std::string key = read_text(s);
    std::lock_guard<std::mutex> lock(mu);
    if (query == 3) {
      const int64_t delta = read_value<int64_t>(s);
      log.push_back("ADD " + key + " " + std::to_string(delta));
      answer_value<int64_t>(s, delta + 6);
    } else if (query == 0) {
      log.push_back("SET " + key + " " + read_text(s));
    } else {
      log.push_back("GET " + key);
      answer_bytes(s, std::string("v\0x", 3));
    }
  }
}

TEST(C10dStore, TheJoinIsPyTorchsExactBytes) {
  std::vector<char> got(22);
  {
    FakeStore fake([&](int, Socket& s) {
      s.recv_all(got.data(), got.size(), soon(), "the client");
      answer_value<int64_t>(s, 1);
    });
    C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(5000), "/worker/attempt_0");
  }
  // What PyTorch 1.13's TCPStore client sends on connecting: ADD, "init/" (u64 length 5), delta 1.
  const std::string want("\x03\x05\0\0\0\0\0\0\0init/\x01\0\0\0\0\0\0\0", 22);
  EXPECT_EQ(std::string(got.data(), got.size()), want);
}

TEST(C10dStore, EveryRequestFramedWithItsKeyUnderTheWorkerPrefix) {
  std::vector<std::string> log;
  std::mutex mu;
  FakeStore fake([&](int, Socket& s) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(read_request(s));
    answer_value<int64_t>(s, 1);  // init/
    log.push_back(read_request(s));  // SET, no answer
    log.push_back(read_request(s));  // ADD
    answer_value<int64_t>(s, 12);
    log.push_back(read_request(s));  // CHECK
    answer_value<uint8_t>(s, 1);     // not ready
    log.push_back(read_request(s));  // WAIT before GET
    answer_value<uint8_t>(s, 0);
    log.push_back(read_request(s));  // GET
    answer_bytes(s, std::string("\0\xff", 2));
    log.push_back(read_request(s));  // WAIT for two keys
    answer_value<uint8_t>(s, 0);
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(5000), torchelastic_worker_prefix(3));
  EXPECT_EQ(store.wire_key("dpv/done"), "//worker/attempt_3/dpv/done");
  store.set("k", to_bytes("value"));
  EXPECT_EQ(store.add("n", 5), 12);
  EXPECT_FALSE(store.check("k"));
  EXPECT_EQ(store.get("g"), (Bytes{'\0', '\xff'}));
  store.wait({"a", "b"}, milliseconds(2000));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(log, (std::vector<std::string>{"ADD init/ 1", "SET //worker/attempt_3/k value",
                                           "ADD //worker/attempt_3/n 5", "? //worker/attempt_3/k",
                                           "? //worker/attempt_3/g", "GET //worker/attempt_3/g",
                                           "? //worker/attempt_3/a //worker/attempt_3/b"}));
}

TEST(C10dStore, NoStoreListeningFailsWithinTheTimeout) {
  int port = 0;
  {
    Socket probe = listen_tcp("127.0.0.1", 0);  // a port that was free a moment ago
    port = bound_port(probe);
  }
  const auto start = Clock::now();
  std::string e = error_of([&] { C10dStoreClient store("127.0.0.1", port, milliseconds(400), ""); });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_NE(e.find("could not connect to torchrun's agent store at 127.0.0.1:" + std::to_string(port) +
                   " within 0.4 s"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("is torchrun running there"), std::string::npos) << e;
}

// A key nobody sets: the store never answers the WAIT, the client gives up at its deadline, names
// the key and the store, and its next call works on a new connection.
TEST(C10dStore, AMissingKeyTimesOutNamingItAndTheNextCallReconnects) {
  std::vector<std::string> log;
  std::mutex mu;
  FakeStore fake([&](int index, Socket& s) {
    if (index == 0) {
      read_request(s);
      answer_value<int64_t>(s, 1);
      read_request(s);  // the WAIT, never answered: wait for the client to hang up
      char c;
      s.recv_all_or_eof(&c, 1, soon(), "the client");
      return;
    }
    healthy(s, log, mu);
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(300), torchelastic_worker_prefix(0));
  const auto start = Clock::now();
  std::string e = error_of([&] { store.get("never/set"); });
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(e, "timed out after 0.3 s waiting for key 'never/set' (stored as '//worker/attempt_0/never/set') in "
               "torchrun's agent store at 127.0.0.1:" +
                   std::to_string(fake.port()) +
                   " (a rank did not arrive: did it fail or start late? raise DPV_TIMEOUT if the job is just slow)");
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(store.add("n", 1), 7);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(log, std::vector<std::string>{"ADD //worker/attempt_0/n 1"});  // no second join
}

// Answers the join and the WAIT, then runs `bad` on the GET.
FakeStore store_with_bad_get(const std::function<void(Socket&)>& bad) {
  return FakeStore([bad](int, Socket& s) {
    read_request(s);
    answer_value<int64_t>(s, 1);
    read_request(s);
    answer_value<uint8_t>(s, 0);
    read_request(s);
    bad(s);
  });
}

TEST(C10dStore, ATruncatedAnswerIsALostConnectionNamingTheKey) {
  FakeStore fake = store_with_bad_get([](Socket& s) { s.send_all("\x05\0\0", 3, soon(), "the client"); });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(2000), "");
  std::string e = error_of([&] { store.get("k"); });
  EXPECT_NE(e.find("lost the connection to torchrun's agent store at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("mid-message (getting key 'k')"), std::string::npos) << e;
}

TEST(C10dStore, AHugeLengthIsRefusedBeforeAllocating) {
  FakeStore fake = store_with_bad_get([](Socket& s) {
    answer_value<uint64_t>(s, uint64_t{1} << 40);
    char c;
    s.recv_all_or_eof(&c, 1, soon(), "the client");
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(2000), "");
  std::string e = error_of([&] { store.get("k"); });
  EXPECT_NE(e.find("malformed answer from torchrun's agent store at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("(getting key 'k'): a value of 1099511627776 bytes, over the limit of 67108864"),
            std::string::npos)
      << e;
}

TEST(C10dStore, AnAnswerThatNeverComesTimesOut) {
  FakeStore fake([](int, Socket& s) {
    read_request(s);
    answer_value<int64_t>(s, 1);
    read_request(s);  // the ADD, never answered
    char c;
    s.recv_all_or_eof(&c, 1, soon(), "the client");
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(300), "");
  const auto start = Clock::now();
  std::string e = error_of([&] { store.add("dpv/done", 1); });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_NE(e.find("timed out waiting for a reply from torchrun's agent store at 127.0.0.1:"), std::string::npos)
      << e;
  EXPECT_NE(e.find("(adding to key 'dpv/done')"), std::string::npos) << e;
}

TEST(C10dStore, AStatusByteOutsideTheProtocolIsMalformed) {
  FakeStore fake([](int, Socket& s) {
    read_request(s);
    answer_value<int64_t>(s, 1);
    read_request(s);
    answer_value<uint8_t>(s, 7);
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(2000), "");
  std::string e = error_of([&] { store.check("k"); });
  EXPECT_NE(e.find("(checking key 'k'): status 7, expected 0 (ready) or 1 (not ready)"), std::string::npos) << e;
}

TEST(C10dStore, AStoreThatWentAwayIsALostConnection) {
  FakeStore fake([](int index, Socket& s) {
    if (index > 0) return;  // reconnections are closed at once
    read_request(s);
    answer_value<int64_t>(s, 1);
  });
  C10dStoreClient store("127.0.0.1", fake.port(), milliseconds(2000), "");
  std::string e = error_of([&] { store.add("k", 1); });
  EXPECT_NE(e.find("lost the connection to torchrun's agent store at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("(adding to key 'k')"), std::string::npos) << e;
}

}  // namespace
}  // namespace dpv::dist
