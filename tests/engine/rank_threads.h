#pragma once
// In-process ranks in tests: a function run on one thread per rank of a group, as the ranks'
// processes would run it, with each rank's error kept instead of ending the test.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/error.h"
#include "engine/process_groups/process_group.h"

namespace dpv::testing {

// Runs fn(rank's group) on W threads, one per rank; returns each rank's error message ("" when none).
inline std::vector<std::string> on_ranks(std::vector<std::unique_ptr<ProcessGroup>>& group,
                                         const std::function<void(ProcessGroup&)>& fn) {
  std::vector<std::string> errors(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        fn(*group[r]);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace dpv::testing
