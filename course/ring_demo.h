#pragma once
// What the app's Ring page draws, all taken from the engine: one real DDP bucket all-reduced by the
// in-process ring, every step with each rank's buffer as the ring left it (the partial sums of the
// reduce-scatter, the copies of the all-gather), which chunk moved from which rank to which, its
// bytes and time; and for contrast DataParallel's reduce of the same parameters' gradients onto
// device 0 (ReduceAddCoalesced) on the same model, seed and global batch. The batch is the one the
// Iteration page trains on for the same run (course::program_data), so the ring's starting values
// are that page's iteration-1 gradients under DDP.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/collectives.h"
#include "engine/run/run_spec.h"

namespace dpv::course {

// The demo's defaults: SimpleModel (a small model: every step copies the bucket's values) on
// cpu:4, a global batch of 32 (DDP's ranks get DistributedSampler shards of it).
RunSpec default_ring_run();

struct RingDemoConfig {
  // run.devices is cpu:K, the world in-process ranks (2 to 8); the model (a preset), global batch,
  // seed, optimizer and DDP settings are those of both the DDP and the DataParallel iteration;
  // run.strategy is not read.
  RunSpec run = default_ring_run();
};

// One chunk going round the ring in one step, as the sending rank reported it.
struct RingMove {
  int from = 0;
  int to = 0;
  int chunk = 0;
  size_t bytes = 0;
  double seconds = 0;  // the step's time on the sending rank
};

// The ring after one step (frame 0: before the first step).
struct RingFrame {
  std::string phase;  // "start", "reduce-scatter", "all-gather"
  int step = -1;      // 0 .. world-2 within the phase; -1 at the start
  std::vector<RingMove> moves;              // one per rank (empty at the start)
  std::vector<std::vector<double>> values;  // [rank][element]: the bucket on each rank after the step
  // [rank][chunk]: the ranks whose gradients the chunk holds, from the moves the engine reported
  // (a reduce-scatter step adds the sender's set to the receiver's; an all-gather step copies it).
  std::vector<std::vector<std::vector<int>>> contributors;
};

// DataParallel's reduce onto device 0 of the same parameters (the bucket's), for contrast.
struct DpReduceDemo {
  int replicas = 0;
  std::vector<int64_t> chunks;  // rows per replica (torch.chunk)
  std::string param;            // the parameter whose first values are shown
  std::vector<std::vector<double>> replica_grads;  // [device]: its first values before the reduce
  std::vector<double> reduced;  // device 0's after ReduceGrads
  size_t bytes_to_device0 = 0;  // every other replica's gradients, all parameters
  double seconds = 0;           // the ReduceGrads stage
  std::string transport;        // the collectives' transport ("host threads", "NCCL", ...)
};

struct RingDemo {
  RingDemoConfig config;
  int world_size = 0;
  int bucket = 0;                    // the bucket shown (DDP's first all-reduce)
  std::vector<std::string> params;   // its parameters, in bucket order
  int64_t numel = 0;
  size_t bytes = 0;                  // the bucket's size
  std::vector<int64_t> chunk_offsets;   // chunk c is [chunk_offsets[c], chunk_offsets[c+1])
  std::vector<int64_t> shards;          // rows per rank (DistributedSampler)
  std::vector<RingFrame> frames;        // 1 + 2(world-1)
  size_t bytes_sent_per_rank = 0;       // the engine's step bytes, summed, on rank 0
  double formula_bytes = 0;             // 2(world-1)/world * bytes: what the ring's cost formula says
  double seconds = 0;                   // the all-reduce as rank 0 measured it
  double busbw = 0, algbw = 0;          // GB/s, nccl-tests definitions (the engine's report)
  DpReduceDemo dp;
};

// Runs one DDP iteration on cpu:K in-process ranks with the ring recording its values, and one
// DataParallel iteration on another cpu:K set, same model, seed and global batch (program_data). Throws dpv::Error
// on bad settings (an unknown preset, fewer than 2 ranks, a batch smaller than the ranks).
RingDemo run_ring_demo(const RingDemoConfig& config);

}  // namespace dpv::course
