#pragma once
// world ProcessGroup endpoints over one shared hub, for ranks that are threads of this process (one
// simulated or real device each). The all-reduce is a ring, as NCCL and Gloo run it: a
// reduce-scatter of world-1 steps (rank r sends chunk (r - s) mod world to rank r+1, which adds it to its
// own copy of that chunk) then an all-gather of world-1 steps (the completed chunks travel on around
// the ring). Every step is reported as a RingStep so the app can animate which chunk moves where.
// reduce_scatter_sum and all_gather are those two phases on their own, with PyTorch's chunk
// assignment (rank r completes chunk r: RingSchedule::RankOwnsItsChunk in ring_steps.h).
//
// Ranks read their neighbour's buffer directly (shared memory stands in for the link) and meet at
// a barrier after every step, so no chunk is read while it is being written. If one rank fails
// (an exception in its forward, say), the driver calls abort(): every rank waiting in a collective
// of this hub then throws instead of waiting for ever.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/process_groups/process_group.h"

namespace dpv {

class InProcessHub;

// Makes the world endpoints of one group; endpoint r is rank r. The hub lives as long as any endpoint.
std::vector<std::unique_ptr<ProcessGroup>> make_in_process_group(int world_size);

// Wakes every rank waiting in a collective of `group`'s hub and makes it (and every later
// collective) throw dpv::Error naming `reason`. `group` must come from make_in_process_group.
void abort_in_process_group(ProcessGroup& group, const std::string& reason);

// From now on, `group`'s all_reduce_sum (and reduce_scatter_sum, all_gather) fills RingStep::before
// and ::after with the first `max_values` elements of this rank's buffer (reduce_scatter_sum: its
// copy of the input; all_gather: the output) (SIZE_MAX: all of it; 0: off, the default). For the
// app's ring view, a teaching run rather than a timed one. Per endpoint: set it on every rank whose
// steps are wanted. `group` must come from make_in_process_group.
void record_ring_values(ProcessGroup& group, size_t max_values);

// The chunk boundaries of a ring over `numel` elements and world ranks: chunk c is
// [offsets[c], offsets[c+1]); the first numel % world chunks hold one element more.
std::vector<int64_t> ring_chunk_offsets(int64_t numel, int world_size);

}  // namespace dpv
