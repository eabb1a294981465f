#pragma once
// Gloo process groups with their ranks as threads of this test, meeting through a TCP store on
// 127.0.0.1 (the store server and every connection end with the call).
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/gloo_group.h"
#include "engine/process_groups/multiprocess/tcp_store.h"

namespace dpv::dist::testing {

// Runs body(rank, group) on `world` threads; returns each rank's error text ("" when none).
inline std::vector<std::string> with_ranks(int world, const std::function<void(int, ProcessGroup&)>& body,
                                           std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  TcpStoreServer server("127.0.0.1", 0, world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        TcpStore store("127.0.0.1", server.port(), world, timeout);
        GlooOptions o;
        o.timeout = timeout;
        std::unique_ptr<ProcessGroup> group = make_gloo_group(store, r, world, o);
        body(r, *group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace dpv::dist::testing
