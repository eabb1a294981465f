#include "engine/ddp/gather_rank_results.h"

#include <string>

#include "engine/ddp/ddp_rank_codec.h"
#include "engine/process_groups/gather_bytes.h"

namespace dpv {

std::vector<DdpRankResult> gather_rank_results(ProcessGroup& group, const DdpRankResult& mine,
                                               const std::shared_ptr<Device>& device) {
  // An all-gather (every rank calls it); only rank 0 decodes what it needs.
  const std::vector<std::string> all = all_gather_bytes(group, encode_rank_result(mine), device);
  std::vector<DdpRankResult> results;
  if (group.rank() != 0) return results;
  for (size_t r = 0; r < all.size(); ++r)
    results.push_back(decode_rank_result(all[r], "rank " + std::to_string(r) + "'s result"));
  return results;
}

}  // namespace dpv
