#pragma once
// Collectives over the devices of a set: one interface, one implementation per transport
// (host threads for simulated devices; NCCL and peer copies in the CUDA backend).
// Each call reports bytes, time, algbw and busbw with the nccl-tests definitions:
//   algbw = bytes / time;  busbw = algbw * factor, factor = 1 (broadcast, reduce),
//   2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter; bytes = the whole gathered
//   output, the whole scattered input: n x the per-rank piece).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dpv {

class DeviceSet;

// The collective operations the engine runs and reports.
enum class CollectiveOp : uint8_t {
  Broadcast,  // parameters and buffers from one rank to all (Replicate, DDP's buffer broadcast)
  ReduceAdd,  // gradients summed onto one device (DataParallel's ReduceGrads)
  AllReduce,  // every rank gets the sum (DDP's buckets, SyncBatchNorm)
  AllGather,  // every rank gets every rank's piece
  ReduceScatter,  // every rank gets its own piece of the sum (the sharded strategies' gradients)
  Barrier,    // no data: every rank waits for all (process groups)
};

// The name PyTorch and nccl-tests use ("all_reduce"), as reports, traces and tables print it.
inline const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::ReduceAdd: return "reduce_add";
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::Barrier: return "barrier";
  }
  return "collective";
}

struct CollectiveReport {
  CollectiveOp op = CollectiveOp::Broadcast;
  int ranks = 0;
  size_t bytes = 0;    // the nccl-tests "size" of the operation
  double seconds = 0;
  double algbw = 0;    // GB/s (1e9 bytes per second)
  double busbw = 0;    // GB/s
};

// Fills algbw and busbw from op, ranks, bytes and seconds.
void finish_report(CollectiveReport& r);

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual std::string transport() const = 0;  // "host threads", "NCCL", "peer copies"
  // bufs[i] lives on device i; after the call every buffer holds bufs[root]'s values.
  virtual CollectiveReport broadcast(std::vector<Tensor>& bufs, int root) = 0;
  // bufs[root] = bufs[root] + bufs[j] for j in device order, skipping the root (a left fold,
  // as torch.cuda.comm.reduce_add does without NCCL). Other buffers are unchanged.
  virtual CollectiveReport reduce_add(std::vector<Tensor>& bufs, int root) = 0;
  // every bufs[i] = the sum over all ranks (rank order).
  virtual CollectiveReport all_reduce(std::vector<Tensor>& bufs) = 0;
  // out[i] (on device i, shape [ranks * numel(in[0])]) = concatenation of in[0..ranks) in rank order.
  virtual CollectiveReport all_gather(const std::vector<Tensor>& in, std::vector<Tensor>& out) = 0;
};

// Implementations are made by engine/backend_registry.h (make_collectives picks one for a set).

}  // namespace dpv
