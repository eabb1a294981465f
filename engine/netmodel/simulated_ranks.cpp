#include "engine/netmodel/simulated_ranks.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/error.h"
#include "engine/netmodel/simulated_link_group.h"
#include "engine/process_groups/in_process_group.h"

namespace dpv::netmodel {

void run_simulated_ranks(int world, const Link& link, const std::function<void(ProcessGroup&)>& rank) {
  check(world >= 1, "a simulated link needs at least one rank, got " + std::to_string(world), ErrorClass::ValueError);
  auto group = simulate_link(make_in_process_group(world), link);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::mutex mutex;
  int first_failed = -1;  // the rank whose own error stopped the run (the others then see the abort)
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        rank(*group[static_cast<size_t>(r)]);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        errors[static_cast<size_t>(r)] = std::current_exception();
        if (first_failed >= 0) return;
        first_failed = r;
        for (auto& endpoint : group) {
          abort_in_process_group(static_cast<SimulatedLinkGroup&>(*endpoint).inner(), "rank " + std::to_string(r) + " failed");
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first_failed >= 0) std::rethrow_exception(errors[static_cast<size_t>(first_failed)]);
}

}  // namespace dpv::netmodel
