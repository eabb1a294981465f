#pragma once
// A launched rank's float32 GEMM library per product shape, agreed with rank 0's through the job's
// store (engine/core_backends.h, RankZeroGemmSharing): every rank of a job multiplies each shape
// with the same library, so a job's numbers do not depend on which rank's timing was noisier, and
// its checkpoint (rank 0's table) is what every rank ran.
#include "engine/core_backends.h"
#include "engine/process_groups/multiprocess/init_process_group.h"

namespace dpv::cli {

// Installed for this object's lifetime; it must not outlive `session`.
class LaunchedGemmChoices {
 public:
  explicit LaunchedGemmChoices(dist::DistSession& session);
  ~LaunchedGemmChoices();
  LaunchedGemmChoices(const LaunchedGemmChoices&) = delete;
  LaunchedGemmChoices& operator=(const LaunchedGemmChoices&) = delete;

 private:
  RankZeroGemmSharing sharing_;
};

}  // namespace dpv::cli
