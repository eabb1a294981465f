// ProcessGroup::all_reduce_sum_float16's default: Gloo's float16 ring all-reduce emulated over the
// group's all_gather, for groups with no float16 collective of their own (the in-process ring).
#include <algorithm>
#include <vector>

#include "engine/float16.h"
#include "engine/process_groups/process_group.h"

namespace dpv {

// Gloo's float16 all-reduce (gloo::allreduce, what torch 1.13's ProcessGroupGloo calls for a
// float16 tensor) is a ring: the buffer is cut into 2 * world segments of ceil(n / (2 * world))
// elements, rank c owning segments 2c and 2c + 1, and an element of rank c's chunk is summed
// starting at rank c - 1, down around the ring (c - 2, ..., c + 1), rank c's own value last, each
// partial sum rounded to float16 (gloo::float16's operator+ adds as float32). Found by probing
// torch 1.13's Gloo with 3 and 4 ranks, and checked against the Gloo group's own float16
// all-reduce (tests/dist/gloo_float16_all_reduce_test.cpp).
CollectiveReport ProcessGroup::all_reduce_sum_float16(uint16_t* halves, int64_t n) {
  const int world = size();
  Tensor mine = Tensor::empty({n}, DType::Float32);  // [n] this rank's float16 values, exact in float32
  float* m = mine.data<float>();
  for (int64_t i = 0; i < n; ++i) m[i] = float_from_float16_bits(halves[i]);
  Tensor gathered = Tensor::empty({world * n}, DType::Float32);  // [world, n] every rank's values
  CollectiveReport report = all_gather(mine, gathered);
  report.op = CollectiveOp::AllReduce;
  report.bytes = static_cast<size_t>(n) * 2;
  finish_report(report);
  const float* all = gathered.data<float>();
  const int64_t chunk = std::max<int64_t>(2, 2 * ((n + 2 * world - 1) / (2 * world)));  // two segments per rank
  for (int64_t i = 0; i < n; ++i) {
    const int owner = static_cast<int>(i / chunk);
    float sum = all[static_cast<int64_t>((owner + world - 1) % world) * n + i];
    for (int k = 2; k <= world; ++k)
      sum = round_to_float16(sum + all[static_cast<int64_t>((owner + world - k) % world) * n + i]);
    halves[i] = float16_bits_from_float(sum);
  }
  return report;
}

}  // namespace dpv
