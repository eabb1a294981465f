#pragma once
// SyncBatchNorm on one DDP rank over a ProcessGroup (torch/nn/modules/_functions.py, 1.13):
//  forward:  local mean and invstd, all-gather [mean, invstd, count] from every rank, merge them
//            (batch_norm_gather_stats_with_counts, which also updates the running statistics with
//            the total count), normalise with the merged statistics;
//  backward: local sum_dy and sum_dy_xmu (and the local weight/bias gradients, which DDP then
//            averages), all-reduce [sum_dy, sum_dy_xmu], input gradient with the total count.
// Equal to BatchNorm over the union of the ranks' batches. PyTorch refuses SyncBatchNorm on CPU
// ("SyncBatchNorm layers only work with GPU modules"); dpviz offers it there as an extension.
#include <vector>

#include "engine/collectives.h"
#include "engine/ddp/comm_thread.h"
#include "engine/process_groups/process_group.h"
#include "engine/layers/batchnorm.h"
#include "engine/observer.h"

namespace dpv {

// Returns y; `local` and `global` receive this rank's and the merged statistics (biased variance).
Tensor sync_bn_forward(const BatchNorm& bn, LayerRun& run, const Tensor& x, ProcessGroup& group, CommThread& comm,
                       std::vector<CollectiveReport>& reports, BatchNormStats& local, BatchNormStats& global);
// Returns dx; accumulates this rank's weight and bias gradients.
Tensor sync_bn_backward(const BatchNorm& bn, LayerRun& run, const Tensor& dy, ProcessGroup& group, CommThread& comm,
                        std::vector<CollectiveReport>& reports);

}  // namespace dpv
