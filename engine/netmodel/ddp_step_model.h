#pragma once
// One DDP step predicted from its measured compute and the link's alpha-beta cost
// (engine/netmodel/link_model.h): the forward, then the backward layer by layer (last layer
// first); a bucket becomes ready at the end of the backward of the layer that produced its last
// gradient, and the buckets go out in index order, one at a time on the link (the Reducer launches
// bucket i+1 only after bucket i, and one communication thread runs them), so bucket i starts at
// max(its ready time, the end of bucket i-1). What the backward does not hide is exposed:
// max(0, end of the last bucket - end of the backward). The step is then forward + backward +
// exposed + what follows (copying the averaged gradients back, the optimizer step).
#include <cstddef>
#include <vector>

#include "engine/netmodel/link_model.h"

namespace dpv::netmodel {

struct BucketFacts {
  size_t bytes = 0;     // the bucket's flat buffer (what its all-reduce moves, nccl-tests' size)
  int ready_layer = 0;  // the layer whose backward completes the bucket
};

struct DdpStepFacts {
  double forward_s = 0;                   // from the start of the step to the start of the backward
  std::vector<double> backward_s;         // [L] per layer index; the backward runs L-1 down to 0
  double after_backward_s = 0;            // finalize's copy back and the optimizer step, without waiting
  std::vector<BucketFacts> buckets;       // in launch order
  int world = 1;
  CollectiveKind collective = CollectiveKind::AllReduce;  // what each bucket runs
};

struct BucketTiming {
  double ready = 0, start = 0, end = 0;  // seconds from the start of the step
};

struct DdpStepPrediction {
  std::vector<BucketTiming> buckets;  // in launch order
  double backward_end = 0;            // seconds from the start of the step
  double exposed_s = 0;               // communication the backward did not hide
  double step_s = 0;
  size_t bytes_per_step = 0;          // the buckets' bytes summed
};

// Throws dpv::Error (ValueError) for a bucket whose ready layer is not a layer of backward_s, a
// negative time, or world < 1.
DdpStepPrediction predict_ddp_step(const DdpStepFacts& facts, const Link& link);

}  // namespace dpv::netmodel
