#include "cli/optimizer_options.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/validators.h"

namespace dpv::cli {
namespace {

// "B1,B2", each a number in [0, 1) (torch.optim.Adam's check), into the two betas.
std::string parse_betas(const std::string& text, double& beta1, double& beta2) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return "expects two numbers B1,B2 (e.g. 0.9,0.999), got '" + text + "'";
  double values[2];
  const std::string parts[2] = {text.substr(0, comma), text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    char* end = nullptr;
    values[i] = parts[i].empty() ? NAN : std::strtod(parts[i].c_str(), &end);
    if (parts[i].empty() || !end || *end != '\0' || !std::isfinite(values[i]))
      return "expects two numbers B1,B2 (e.g. 0.9,0.999), got '" + text + "'";
    if (!(values[i] >= 0 && values[i] < 1))
      return "each beta must be in [0, 1) (Invalid beta parameter at index " + std::to_string(i) + ": " + parts[i] + ")";
  }
  beta1 = values[0];
  beta2 = values[1];
  return "";
}

}  // namespace

std::function<void()> add_optimizer_options(CLI::App* sub, OptimizerSettings& settings) {
  auto name = std::make_shared<std::string>("sgd");
  sub->add_option("--optimizer", *name, "torch.optim class: sgd, adam or adamw")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  auto* lr = sub->add_option("--lr", settings.lr, "Learning rate (default: 0.01 for sgd, 1e-3 for adam and adamw)")
                 ->check(at_least(0));
  auto* momentum = sub->add_option("--momentum", settings.momentum, "SGD momentum (default 0)")->check(at_least(0));
  auto* weight_decay =
      sub->add_option("--weight-decay", settings.weight_decay,
                      "Weight decay: L2 in the gradient for sgd and adam, decoupled for adamw (default: 0; adamw 1e-2)")
          ->check(at_least(0));
  auto* betas = sub->add_option_function<std::string>(
      "--betas",
      [&settings](const std::string& text) {
        const std::string problem = parse_betas(text, settings.beta1, settings.beta2);
        if (!problem.empty()) throw CLI::ValidationError("--betas", problem);
      },
      "Adam/AdamW betas B1,B2 (default 0.9,0.999)");
  auto* eps = sub->add_option("--eps", settings.eps, "Adam/AdamW eps (default 1e-8)")->check(at_least(0));
  return [&settings, name, lr, momentum, weight_decay, betas, eps] {
    settings.kind = parse_optimizer_kind(*name);
    const bool adam = settings.kind != OptimizerKind::Sgd;
    if (adam && momentum->count() > 0)
      throw CLI::ValidationError("--momentum", "is SGD's; " + std::string(optimizer_class_name(settings.kind)) +
                                                   " takes --betas B1,B2 instead");
    if (!adam && (betas->count() > 0 || eps->count() > 0))
      throw CLI::ValidationError(betas->count() > 0 ? "--betas" : "--eps",
                                 "is Adam's and AdamW's; choose --optimizer adam or adamw (SGD takes --momentum)");
    if (adam && lr->count() == 0) settings.lr = 1e-3;
    if (settings.kind == OptimizerKind::AdamW && weight_decay->count() == 0) settings.weight_decay = 1e-2;
  };
}

}  // namespace dpv::cli
