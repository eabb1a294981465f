#pragma once
// What `dpv step --ddp --comm-hook ...` writes about the hook beside the usual DDP output:
//   comm_hook/bytes_sent          [buckets] int64: the bytes the hook's collectives carried per
//                                 bucket in the last iteration (rank 0's)
//   comm_hook/bytes_uncompressed  [buckets] int64: the bucket's float32 bytes (allreduce_hook's)
// and with powerSGD_hook, per rank r whose hook is given (PowerSGDState's memory, bucket b):
//   rank<r>/powersgd/iter         0-dim int64: PowerSGDState.iter
//   rank<r>/powersgd/error/<b>    [bucket numel] error_dict[b] (with error feedback)
//   rank<r>/powersgd/p/<b>        [sum rows * rank] p_memory_dict[b] (with warm start)
//   rank<r>/powersgd/q/<b>        [sum cols * rank] q_memory_dict[b] (with warm start)
#include <string>
#include <vector>

#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/ddp/reducer.h"
#include "engine/tensor_map.h"

namespace dpv {

void add_comm_hook_bytes(TensorMap& out, const std::vector<BucketRun>& rank0_runs);
// For a summary line: ", fp16_compress_hook sent 1276 of 4364 bytes" (the last iteration's buckets
// on rank 0), or "" without a hook.
std::string comm_hook_words(CommHookKind kind, const std::vector<BucketRun>& rank0_runs);
void add_comm_hook_state(TensorMap& out, const CommHook& hook, int rank);

}  // namespace dpv
