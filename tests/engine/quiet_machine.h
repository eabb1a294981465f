#pragma once
// Tests that assert which thread runs which job, or that unobserved DDP ranks run through on their
// own threads, hold this: the engine then sees a quiet machine with a free core for every thread,
// whatever else runs beside the test (FreeCores would otherwise put independent jobs on fewer
// threads while ctest runs other tests on the same cores).
#include <thread>

#include "engine/free_cores.h"

namespace dpv::testing {

class QuietMachine {
 public:
  explicit QuietMachine(unsigned cores = 64) {
    // Unreadable load: every usable CPU counts as free.
    FreeCores::set_reader_for_testing([cores] { return CoreSample{cores, 0, 0, 0, false}; });
  }
  ~QuietMachine() { FreeCores::set_reader_for_testing(nullptr); }
  QuietMachine(const QuietMachine&) = delete;
  QuietMachine& operator=(const QuietMachine&) = delete;
};

}  // namespace dpv::testing
