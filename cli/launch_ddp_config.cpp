#include "cli/launch_ddp_config.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/number_text.h"

namespace dpv::cli {
namespace {

std::string config_key(int rank) { return "dpv/ddp_config/" + std::to_string(rank); }

DdpConfig parse_config(const std::string& text, int rank) {
  DdpConfig config;
  try {
    for (const auto& entry : nlohmann::ordered_json::parse(text)) config.emplace_back(entry.at(0), entry.at(1));
  } catch (const nlohmann::json::exception&) {
    throw Error("rank " + std::to_string(rank) + "'s DDP configuration in the store is not readable (key '" +
                config_key(rank) + "' was overwritten?)");
  }
  return config;
}

// The first setting where `other` differs from rank 0's, as "broadcast_buffers is false on rank 1
// but true on rank 0", or "" when they agree.
std::string first_difference(const DdpConfig& rank0, const DdpConfig& other, int rank) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  for (size_t i = 0; i < rank0.size(); ++i) {
    if (i >= other.size() || other[i].first != rank0[i].first)
      return "rank " + std::to_string(rank) + " runs another dpv build (its settings are not rank 0's)";
    if (other[i].second == rank0[i].second) continue;
    return rank0[i].first + " is " + other[i].second + on + rank0[i].second + " on rank 0";
  }
  return other.size() == rank0.size() ? "" : "rank " + std::to_string(rank) + " runs another dpv build";
}

std::string powersgd_text(const PowerSgdOptions& p) {
  return "matrix_approximation_rank=" + std::to_string(p.matrix_approximation_rank) +
         ", start_powerSGD_iter=" + std::to_string(p.start_powerSGD_iter) +
         ", min_compression_rate=" + shortest_text(p.min_compression_rate) +
         ", use_error_feedback=" + (p.use_error_feedback ? "True" : "False") +
         ", warm_start=" + (p.warm_start ? "True" : "False") + ", random_seed=" + std::to_string(p.random_seed);
}

}  // namespace

DdpConfig ddp_config_of(const DdpOptions& options, int64_t steps) {
  return {
      {"broadcast_buffers", options.broadcast_buffers ? "true" : "false"},
      {"bucket_cap_mb", shortest_text(options.bucket_cap_mb)},
      {"first_bucket_bytes", std::to_string(options.first_bucket_bytes)},
      {"sync_bn", options.sync_bn ? "true" : "false"},
      {"steps", std::to_string(steps)},
      // A rank with another ZeRO stage would meet the others in different collectives.
      {"zero", std::to_string(options.zero_stage)},
      // A rank with another hook would send other collectives (PowerSGD's P and Q) or other bytes.
      {"comm_hook", comm_hook_name(options.comm_hook.kind)},
      {"powersgd", options.comm_hook.kind != CommHookKind::PowerSgd ? std::string("-") : powersgd_text(options.comm_hook.powersgd)},
      // The model is not compared here: DdpRank's construction checks the parameter shapes against
      // rank 0's with PyTorch's own message ("DDP expects same model across all ranks").
  };
}

void verify_same_ddp_config(dist::DistSession& session, const DdpConfig& mine) {
  dist::Store& store = session.store();
  const int rank = session.env().rank, world = session.env().world_size;
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  for (const auto& [name, value] : mine) doc.push_back({name, value});
  store.set(config_key(rank), dist::to_bytes(doc.dump()));
  const DdpConfig rank0 = rank == 0 ? mine : parse_config(dist::to_string(store.get(config_key(0))), 0);
  // Every rank reads every other's in rank order, so all of them name the same first difference.
  for (int r = 1; r < world; ++r) {
    const DdpConfig other = r == rank ? mine : parse_config(dist::to_string(store.get(config_key(r))), r);
    const std::string difference = first_difference(rank0, other, r);
    if (difference.empty()) continue;
    throw Error("the ranks' DistributedDataParallel configurations differ: " + difference +
                ". Every rank must run DDP with the same options and steps: start them all with the same command")
        .at_rank(r);
  }
}

}  // namespace dpv::cli
