#pragma once
// Collectives over the devices of a set: one interface, one implementation per transport
// (host threads for simulated devices; NCCL and peer copies in the CUDA backend).
// Each call reports bytes, time, algbw and busbw with the nccl-tests definitions:
//   algbw = bytes / time;  busbw = algbw * factor, factor = 1 (broadcast, reduce),
//   2(n-1)/n (all-reduce), (n-1)/n (all-gather; bytes = the whole gathered size).
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dpv {

class DeviceSet;

struct CollectiveReport {
  std::string op;      // "broadcast", "reduce_add", "all_reduce", "all_gather"
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

// The host-thread implementation: every rank's work runs on its own device worker thread.
std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices);
// CUDA sets: NCCL when every device is a distinct GPU, peer copies + a reduction kernel for virtual
// devices sharing a GPU. Defined by the CUDA backend (the no-CUDA stub throws).
std::unique_ptr<Collectives> make_cuda_collectives(std::shared_ptr<DeviceSet> devices);
// Picks the right implementation for a set (host threads for CPU devices; CUDA ones when built).
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);

}  // namespace dpv
