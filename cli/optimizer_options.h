#pragma once
// The optimizer flags every training command takes, in one place: --optimizer sgd|adam|adamw, --lr,
// --momentum (SGD), --betas B1,B2 and --eps (Adam/AdamW), --weight-decay (all). Unset flags take
// PyTorch's defaults for the chosen optimizer where PyTorch has one (Adam and AdamW: lr 1e-3,
// betas 0.9,0.999, eps 1e-8; AdamW: weight_decay 1e-2); SGD's lr, which PyTorch requires, defaults
// to the source document's 0.01.
#include <functional>

#include <CLI/CLI.hpp>

#include "engine/optim/optimizer.h"

namespace dpv::cli {

// Adds the flags to `sub`, writing into `settings` (which must outlive the parse). Returns the
// finisher the subcommand's callback calls once the flags are read: it applies the optimizer's
// defaults and refuses a flag the optimizer does not take (--momentum with Adam, --betas with SGD),
// as PyTorch's constructors refuse an unknown argument.
std::function<void()> add_optimizer_options(CLI::App* sub, OptimizerSettings& settings);

}  // namespace dpv::cli
