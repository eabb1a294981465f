#include "cli/comm_hook_options.h"

#include <memory>
#include <string>
#include <vector>

#include "cli/int_options.h"
#include "cli/validators.h"
#include "engine/error.h"

namespace dpv::cli {

std::function<void(bool, int)> add_comm_hook_options(CLI::App* sub, CommHookOptions& hook) {
  auto name = std::make_shared<std::string>();
  PowerSgdOptions& p = hook.powersgd;
  auto* kind = sub->add_option("--comm-hook", *name,
                               "DDP communication hook (register_comm_hook): allreduce, fp16, bf16 or powersgd")
                   ->check(CLI::IsMember({"allreduce", "fp16", "bf16", "powersgd"}));
  auto no_error_feedback = std::make_shared<bool>(false), no_warm_start = std::make_shared<bool>(false);
  const std::vector<CLI::Option*> powersgd = {
      sub->add_option("--powersgd-rank", p.matrix_approximation_rank,
                      "PowerSGD matrix_approximation_rank (1 or 2)")
          ->capture_default_str()
          ->transform(integer_in<int>(1, 2)),
      sub->add_option("--powersgd-start-iter", p.start_powerSGD_iter,
                      "PowerSGD start_powerSGD_iter: plain all-reduce before this iteration (> 1 with error "
                      "feedback or warm start)")
          ->capture_default_str()
          ->transform(integer_in<int64_t>(0)),
      sub->add_option("--powersgd-min-compression-rate", p.min_compression_rate,
                      "PowerSGD min_compression_rate: compress a matrix only when it shrinks more than this")
          ->capture_default_str()
          ->check(at_least(0)),
      sub->add_flag("--powersgd-no-error-feedback", *no_error_feedback, "PowerSGD use_error_feedback=False"),
      sub->add_flag("--powersgd-no-warm-start", *no_warm_start, "PowerSGD warm_start=False"),
      sub->add_option("--powersgd-seed", p.random_seed, "PowerSGD random_seed (np.random.RandomState's)")
          ->capture_default_str()
          ->transform(integer_in<uint32_t>()),
  };
  return [&hook, name, kind, powersgd, no_error_feedback, no_warm_start](bool ddp, int zero) {
    hook.kind = kind->count() > 0 ? parse_comm_hook(*name) : CommHookKind::None;
    hook.powersgd.use_error_feedback = !*no_error_feedback;
    hook.powersgd.warm_start = !*no_warm_start;
    if (hook.kind != CommHookKind::PowerSgd)
      for (const CLI::Option* option : powersgd)
        if (option->count() > 0) throw CLI::RequiresError(option->get_name(), "--comm-hook powersgd");
    if (hook.kind == CommHookKind::None) return;
    if (zero > 0)
      throw CLI::ValidationError("--comm-hook", "is DistributedDataParallel's register_comm_hook: it runs with --ddp, "
                                                "not with --zero " + std::to_string(zero) +
                                                    " (FSDP and ZeroRedundancyOptimizer register hooks of their own)");
    if (!ddp) throw CLI::RequiresError("--comm-hook", "--ddp");
    try {
      check_comm_hook_options(hook);
    } catch (const Error& e) {
      throw CLI::ValidationError("--comm-hook powersgd", e.what());
    }
  };
}

}  // namespace dpv::cli
