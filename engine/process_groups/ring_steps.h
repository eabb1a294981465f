#pragma once
// The arithmetic of one ring all-reduce step, shared by the in-process group's two ways of running
// it (each rank on its own thread meeting at barriers, or one communication thread doing every
// rank's part of a step before the next step): the same chunks, the same additions in the same
// order, so both give bit-identical sums and the same RingStep records.
//
// Step s of phase 0 (reduce-scatter): rank r sends chunk (r - s) mod world to rank r+1, and receives
// chunk (r - 1 - s) mod world from rank r-1, adding it to its own copy. Phase 1 (all-gather): rank r
// sends chunk (r + 1 - s) mod world and receives chunk (r - s) mod world, overwriting its own copy. Within
// one step every rank writes a different chunk index of its own buffer from the one its successor
// reads, so the ranks' parts of a step may run in any order, or at once.
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace dpv {

struct RingMove {
  int send_chunk = 0;  // the chunk this rank sends to rank + 1
  int recv_chunk = 0;  // the chunk this rank receives from rank - 1 (and adds, in reduce-scatter)
};

// Which chunk each rank completes in the reduce-scatter phase. The all-reduce's ring (the schedule
// above) ends that phase with rank r owning chunk r+1 and starts its all-gather phase from there.
// PyTorch's reduce_scatter gives rank r chunk r, and its all_gather starts from rank r's piece in
// slot r (NCCL's ring runs both so, and its all-reduce too): the same ring with every chunk index
// one less. Same bytes, same number of steps; each chunk's partial sum starts one rank further on,
// so for world >= 3 a float chunk is summed in another order than the all-reduce sums it. The
// all-reduce keeps its schedule so its sums and steps stay what they were.
enum class RingSchedule : uint8_t {
  AllReduce,         // rank r owns chunk (r + 1) mod world between the phases
  RankOwnsItsChunk,  // rank r owns chunk r between the phases (reduce_scatter, all_gather)
};

RingMove ring_move(int phase, int rank, int step, int world_size, RingSchedule schedule = RingSchedule::AllReduce);

// Rank `rank`'s part of one step: its chunk `recv_chunk` += (phase 0) or = (phase 1) the same chunk
// of its predecessor's buffer. `mine` and `from` are the two ranks' whole buffers; `offsets` from
// ring_chunk_offsets (engine/process_groups/in_process_group.h).
void ring_receive(int phase, Tensor& mine, const Tensor& from, int recv_chunk, const std::vector<int64_t>& offsets);
// The same reduce-scatter receive for a premultiplied sum (host memory): mine = p*mine + p*from at
// the first step (both chunks are touched for the first time) and mine = p*mine + from later (the
// predecessor's partial sum is premultiplied already), with p*x rounded as a separate
// multiplication pass would round it. Every chunk of every rank is touched first in exactly one of
// these (ring_steps.cpp), so the sums are bit-identical to multiplying every buffer first.
void ring_receive_premultiplied(int step, Tensor& mine, const Tensor& from, int recv_chunk,
                                const std::vector<int64_t>& offsets, double premultiply);
// The last reduce-scatter step and the first all-gather step in one pass (host memory), as NCCL
// pipelines a ring's steps: this rank's receive of the last reduce-scatter step (as ring_receive,
// or ring_receive_premultiplied when premultiply != 1), with each finished element also written
// into `successor`'s buffer, which is exactly what the successor receives from this rank in the
// first all-gather step. Within that step no other part reads or writes those elements of the
// successor (with world = 2 the successor is `from`, read here element by element before the write),
// so the parts still run in any order, and the sums are bit-identical to the two steps one after
// the other. The first all-gather step then has nothing left to move.
void ring_receive_and_forward(int step, Tensor& mine, const Tensor& from, Tensor& successor, int recv_chunk,
                              const std::vector<int64_t>& offsets, double premultiply);
// buf *= premultiply in one pass (host memory), rounded as ring_receive_premultiplied rounds it.
void premultiply_in_place(Tensor& buf, double premultiply);

}  // namespace dpv
