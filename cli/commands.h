#pragma once
// The subcommands of `dpv`. Each add_*_command registers its options on `app`; when the user picks
// that subcommand, parsing stores the action in `run`, and main() runs it inside the one place that
// turns dpv::Error into "dpv: error: ..." and exit status 1.
#include <functional>

#include <CLI/CLI.hpp>

namespace dpv::cli {

using Action = std::function<void()>;

void add_devices_command(CLI::App& app, Action& run);
void add_sample_command(CLI::App& app, Action& run);
void add_step_command(CLI::App& app, Action& run);
void add_train_command(CLI::App& app, Action& run);
void add_bench_command(CLI::App& app, Action& run);
void add_launch_command(CLI::App& app, Action& run);
void add_trace_command(CLI::App& app, Action& run);
// `dpv bench allreduce`: registered under the bench command, so after add_bench_command.
void add_bench_allreduce_command(CLI::App& app, Action& run);
// `dpv bench ring`: the in-process ring against memcpy; also under the bench command.
void add_bench_ring_command(CLI::App& app, Action& run);
// `dpv lab network`: DDP across two shaped namespaced nodes beside the cost model (cmd_lab_network.cpp).
void add_lab_command(CLI::App& app, Action& run);

}  // namespace dpv::cli
