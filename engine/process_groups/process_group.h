#pragma once
// One rank's view of a group of world ranks: the seam between the DDP plan and the transport.
// Three implementations:
//   - in-process ranks (threads of one process, one simulated device each): a ring all-reduce
//     whose every step (which chunk moves from which rank to which, bytes, time) is reported, and
//     its two phases on their own as reduce_scatter_sum and all_gather;
//   - Gloo over TCP for launched CPU processes (`dpv launch --backend gloo`);
//   - NCCL for launched GPU processes (`dpv launch --backend nccl`).
// The DDP plan is written once against this interface and runs unchanged on each.
//
// Calls are blocking and collective: every rank of the group must make the same calls in the same
// order (as with torch.distributed). Overlap of communication with the backward comes from the
// caller issuing them on a communication thread of its own, never from this interface.
// Every call returns a CollectiveReport with bytes, time, algbw and busbw (nccl-tests definitions).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/collectives.h"
#include "engine/tensor.h"

namespace dpv {

// One step of a ring collective as this rank saw it: what it sent to whom and what it received.
struct RingStep {
  std::string phase;   // "reduce-scatter" or "all-gather"
  int step = 0;        // 0 .. world-2 within the phase
  int send_to = -1;    // rank this rank sent to (rank + 1 mod world)
  int recv_from = -1;  // rank this rank received from (rank - 1 mod world)
  int send_chunk = -1; // index of the chunk (0 .. world-1) of the buffer that was sent
  int recv_chunk = -1; // index of the chunk received (and, in reduce-scatter, added)
  size_t bytes = 0;    // bytes sent in this step
  double seconds = 0;  // time of this step on this rank
  // Only when the group records values (record_ring_values, in-process ring): this rank's buffer
  // (its first elements, up to the recorder's limit) before and after the step, as doubles, so a view can show the partial sums the ring
  // really made. Empty otherwise (a copy of the buffer per step costs as much as the step).
  std::vector<double> before;
  std::vector<double> after;
};

// A collective started without waiting for it (c10d's Work): the caller waits when it needs the
// result. Only the in-process group makes these (see ProcessGroup::start_all_reduce_sum).
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished; rethrows its error (an aborted group's, say).
  virtual void wait() = 0;
  virtual bool completed() const = 0;
  // After wait(): this rank's report, its ring steps, and when the collective ran.
  virtual const CollectiveReport& report() const = 0;
  virtual const std::vector<RingStep>& ring() const = 0;
  virtual std::chrono::steady_clock::time_point started() const = 0;
  virtual std::chrono::steady_clock::time_point finished() const = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "in-process ring", "gloo", "nccl"

  // buf (contiguous, on this rank's device) becomes the elementwise sum over all ranks.
  // `steps`, when not null, receives the ring steps this rank took (in-process ring only; other
  // backends leave it empty because their library does not expose them).
  virtual CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps = nullptr) = 0;
  // Every rank's buf becomes root's.
  virtual CollectiveReport broadcast(Tensor& buf, int root) = 0;
  // The two halves of an all-reduce, as the sharded strategies (ZeRO, FSDP) call them.
  // reduce_scatter_sum: `in` ([world * numel(out)] elements, same dtype as out, on this rank's
  // device) is summed over the ranks and this rank keeps chunk `rank` of the sum in `out`
  // (torch.distributed.reduce_scatter_tensor: rank r gets chunk r). The caller pads `in` to a
  // multiple of world. Reported bytes are the whole input's (nccl-tests).
  // all_gather: out ([world * numel(in)] elements, same dtype) = every rank's `in` concatenated in
  // rank order.
  // `steps`: as for all_reduce_sum (the in-process ring's reduce-scatter or all-gather phase).
  virtual CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps = nullptr) = 0;
  virtual CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps = nullptr) = 0;
  virtual void barrier() = 0;
  // halves ([n] float16 bit patterns, float16_bits_from_float's, in host memory) become the
  // elementwise float16 SUM over all ranks, as torch 1.13's Gloo all-reduces a float16 tensor: a
  // ring whose each partial sum is rounded to float16. The report is the float16 all-reduce's
  // (op AllReduce, 2 * n bytes, its time).
  // The default emulates it with the group's all_gather: every rank's values gathered in float32
  // words (4 * world * n bytes, which only a group without a wire, the in-process ring, can afford)
  // and summed in Gloo's ring order, which gives Gloo's bits (float16_all_reduce.cpp says the
  // order). The Gloo group overrides it with Gloo's own float16 all-reduce: 2 bytes per element on
  // the wire.
  virtual CollectiveReport all_reduce_sum_float16(uint16_t* halves, int64_t n);
  // Several broadcasts issued together and waited for together (PyTorch's
  // dist.broadcast(..., async_op=True) calls followed by their waits, as ZeroRedundancyOptimizer's
  // _sync_params makes them): bufs[i] becomes roots[i]'s on every rank; every rank passes the same
  // list. One report per buffer. The default runs them one after another; the in-process group
  // meets its ranks twice for the whole group.
  virtual std::vector<CollectiveReport> broadcast_each(const std::vector<Tensor*>& bufs, const std::vector<int>& roots) {
    std::vector<CollectiveReport> reports;
    for (size_t i = 0; i < bufs.size() && i < roots.size(); ++i) reports.push_back(broadcast(*bufs[i], roots[i]));
    return reports;
  }

  // Starts a SUM all-reduce of buf (contiguous, on `device`'s memory) and returns at once, when the
  // group has a communication thread of its own for such buffers: the in-process group on host
  // memory, where the last rank to start the n-th all-reduce hands the whole ring (every rank's
  // steps, unchanged) to the group's one communication thread, so no rank thread waits in a
  // barrier and the all-reduce still overlaps the ranks' work. Every rank must start the same
  // all-reduces in the same order; buf must not be touched until the Work completed.
  // nullptr: the group cannot (Gloo, NCCL, device memory); the caller runs all_reduce_sum on a
  // communication thread of its own instead. `premultiply` (NCCL's PreMulSum): every rank's values
  // are multiplied by it before they are summed, in the same pass as the ring's first touch of them,
  // with the bits of a separate multiplication first (DDP's 1/world without its own pass over the bucket).
  virtual std::shared_ptr<Work> start_all_reduce_sum(Tensor& buf, double premultiply = 1.0) {
    (void)buf;
    (void)premultiply;
    return nullptr;
  }
  // True when start_all_reduce_sum takes buffers of this kind of memory: then the started
  // all-reduces are independent of the blocking collectives, which the ranks may call straight from
  // their own threads (all ranks at once) without a communication thread to keep them in order.
  virtual bool starts_all_reduce_on_host() const { return false; }
};

}  // namespace dpv
