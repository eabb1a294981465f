// Stage sentences for DDP and the sharded strategies (see zero_summaries.h).
#include "engine/zero/zero_summaries.h"

#include "engine/number_text.h"

namespace dpv {
namespace {

std::string slice_words(const FlatLayout& layout) {
  std::string words = count_text(layout.shard_numel(), "element") + " of the flat parameter's " +
                      std::to_string(layout.padded_numel);
  if (layout.padding() > 0) words += " (" + count_text(layout.padding(), "padding zero") + " at the end)";
  return words;
}

}  // namespace

std::string step_summary(const DdpRank& rank0) {
  const std::string optimizer = optimizer_class_name(rank0.options().optimizer.kind);
  switch (rank0.zero_stage()) {
    case 0:
      return "optimizer.step() on every rank with the same averaged gradients: the parameters stay equal "
             "without being broadcast.";
    case 1: {
      const auto& mine = rank0.partition().at(0);
      return "Each rank's " + optimizer + " steps only the parameters it owns (rank 0: " +
             count_text(static_cast<int64_t>(mine.size()), "parameter") + " of " +
             std::to_string(rank0.model().parameter_decls().size()) +
             "), so only it keeps their optimizer state; the other parameters are stale until the broadcast.";
    }
    default:
      return "Each rank's " + optimizer + " steps only its slice of " + slice_words(rank0.flat_layout()) +
             ", with optimizer state for that slice alone.";
  }
}

std::string backward_summary(const DdpRank& rank0, int layer) {
  const std::string what = rank0.model().layer(layer).describe();
  if (rank0.zero_stage() >= 2)
    return "Every rank back-propagates through " + what + "; its gradients are written into the rank's own flat " +
           "gradient of " + std::to_string(rank0.flat_layout().padded_numel) +
           " elements, reduce-scattered once the backward is done.";
  return "Every rank back-propagates through " + what +
         "; each finished gradient is copied into its bucket times 1/W, and a full bucket starts its "
         "all-reduce on the communication thread while the backward goes on.";
}

std::string sharding_summary(const DdpRank& rank0, StageKind kind, bool second_gather) {
  const FlatLayout& layout = rank0.flat_layout();
  const int world = rank0.world_size();
  switch (kind) {
    case StageKind::GatherParams:
      return std::string(second_gather ? "FULL_SHARD freed the parameters after the forward, so they are gathered "
                                         "again for the backward: "
                                       : "All-gather: ") +
             "each of the " + std::to_string(world) + " ranks contributes its slice of " +
             count_text(layout.shard_numel(), "element") + ", and every rank now holds the full flat parameter of " +
             std::to_string(layout.padded_numel) + ", viewed as the model's parameters.";
    case StageKind::FreeParams:
      return "FULL_SHARD frees the gathered parameters after the forward: each rank keeps only its slice of " +
             count_text(layout.shard_numel(), "element") + " until the backward gathers them again.";
    case StageKind::ReduceScatter: {
      const DivideFactors divide = fsdp_divide_factors(world);
      return "Reduce-scatter: every rank's flat gradient of " + std::to_string(layout.padded_numel) +
             " elements is divided by " + python_float(divide.pre) + ", summed over the ranks slice by slice and " +
             "divided by " + python_float(divide.post) + ": each rank keeps the mean gradient of its own " +
             count_text(layout.shard_numel(), "element") + " and frees the full gradient and parameters.";
    }
    case StageKind::BroadcastParams: {
      size_t broadcasts = 0;
      for (const auto& names : rank0.partition()) broadcasts += names.size();
      return "Each rank broadcasts the parameters it stepped (" + count_text(static_cast<int64_t>(broadcasts), "broadcast") +
             " in all), so every rank ends with the same updated parameters.";
    }
    default: return stage_kind_title(kind);
  }
}

}  // namespace dpv
