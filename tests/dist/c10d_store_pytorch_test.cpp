// The client of PyTorch's TCPStore against the real one: tests/fixtures/pytorch_store_peer.py hosts
// torch.distributed.TCPStore on 127.0.0.1 (as torchrun's agent does) and writes and reads keys
// through PrefixStore("/worker/attempt_0"), PyTorch's workers' own view; this side reads what
// Python wrote (binary values, a counter) and writes what Python checks. Skipped where the system
// Python cannot import torch.distributed.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "engine/process_groups/multiprocess/c10d_store.h"
#include "engine/error.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;

// One line of the peer's stdout without its newline ("" at the end of its output).
std::string read_line(FILE* from) {
  char line[256] = {};
  if (!std::fgets(line, sizeof(line), from)) return "";
  std::string text(line);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST(C10dStorePyTorch, ReadsWhatPyTorchWroteAndWritesWhatItReads) {
#ifndef DPV_SYSTEM_PYTHON
  GTEST_SKIP() << "no system python3 was found when configuring";
#else
  const std::string command = std::string(DPV_SYSTEM_PYTHON) + " " + DPV_TEST_DATA_DIR + "/pytorch_store_peer.py";
  FILE* peer = ::popen(command.c_str(), "r");
  ASSERT_NE(peer, nullptr);
  const std::string first = read_line(peer);
  if (first.rfind("skipped", 0) == 0 || first.empty()) {
    ::pclose(peer);
    GTEST_SKIP() << "PyTorch's TCPStore is not available: " << first;
  }
  std::string failure;
  try {
    C10dStoreClient store("127.0.0.1", std::stoi(first), milliseconds(20000), torchelastic_worker_prefix(0),
                          "PyTorch's TCPStore");
    Bytes every_byte(256);
    for (int i = 0; i < 256; ++i) every_byte[i] = static_cast<char>(i);
    EXPECT_EQ(store.get("from/python"), every_byte);
    EXPECT_TRUE(store.check("from/python"));
    EXPECT_FALSE(store.check("nobody/set/this"));
    EXPECT_EQ(store.add("counter", 7), 12);
    // A key nobody sets times out on the real store too, and the client goes on afterwards.
    try {
      store.wait({"nobody/set/this"}, milliseconds(200));
      ADD_FAILURE() << "waiting for a key nobody sets returned";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("timed out after 0.2 s waiting for key 'nobody/set/this' (stored as "
                                           "'//worker/attempt_0/nobody/set/this') in PyTorch's TCPStore at "
                                           "127.0.0.1:" + first),
                std::string::npos)
          << e.what();
    }
    store.set("from/dpv", Bytes{'\0', 'd', 'p', 'v', '\xff'});
    store.wait({"python/done"});
    store.set("dpv/bye", to_bytes("1"));
  } catch (const Error& e) {
    failure = e.what();
  }
  const std::string verdict = read_line(peer);
  const int status = ::pclose(peer);
  EXPECT_EQ(failure, "");
  EXPECT_EQ(verdict, "ok");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer status " << status;
#endif
}

}  // namespace
}  // namespace dpv::dist
