// `dpv launch`: torchrun for dpv. Starts --nproc-per-node workers running the dpv subcommand
// given after --, as ranks of a job of --nnodes x --nproc-per-node processes that meet at
// --master-addr:--master-port (rank 0 hosts the store there). See cli/launcher.h.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/int_options.h"
#include "cli/launch_events.h"
#include "cli/launcher.h"
#include "cli/output_paths.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "cli/validators.h"

namespace dpv::cli {
namespace {

// The job's error as values, for a program that runs dpv launch (the app's "Run as processes"):
// {"error_class": "RuntimeError", "message": "...", "rank": 1} (rank -1 when no rank failed).
void write_error_file(const std::string& path, const Error& e) {
  const nlohmann::json doc{{"error_class", e.kind()}, {"message", e.what()}, {"rank", e.site().rank}};
  write_file_atomic(path, doc.dump(2) + "\n");
}

// The files the launched command names (any argument, or --flag=value's value, that is an existing
// regular file): the launcher does not know which of them the command reads, so none may be the
// file --events-file truncates or --error-file replaces.
std::vector<NamedPath> command_files(const std::vector<std::string>& command) {
  std::vector<NamedPath> files;
  for (const std::string& arg : command) {
    const size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    const std::string value = eq == std::string::npos ? arg : arg.substr(eq + 1);
    struct stat info {};
    if (!value.empty() && ::stat(value.c_str(), &info) == 0 && S_ISREG(info.st_mode))
      files.push_back({"the launched command's file", value});
  }
  return files;
}

// An empty --master-addr would pass here and fail in every worker as "MASTER_ADDR ... not set":
// refused as the flag's own mistake, before anything starts.
CLI::Validator address_given() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return value.empty() ? "the address is empty: give node 0's host name or IP address (e.g. 127.0.0.1)" : "";
      },
      "ADDR");
}

}  // namespace

void add_launch_command(CLI::App& app, Action& run) {
  auto plan = std::make_shared<LaunchPlan>();
  auto* sub = app.add_subcommand(
      "launch", "Run a dpv subcommand as K processes per node (torchrun's conventions): dpv launch --nproc-per-node K -- step --ddp ...");
  sub->add_option("--nproc-per-node", plan->nproc_per_node, "Worker processes on this node (one device each)")
      ->required()
      ->transform(integer_in<int>(1, 4096));
  sub->add_option("--nnodes", plan->nnodes, "Nodes in the job")->capture_default_str()->transform(integer_in<int>(1, 4096));
  sub->add_option("--node-rank", plan->node_rank, "This node's index, 0 .. nnodes-1 (node 0 hosts the store)")
      ->capture_default_str()
      ->transform(integer_in<int>(0, 4095));
  sub->add_option("--master-addr", plan->master_addr, "Address of node 0, where rank 0 hosts the store")
      ->capture_default_str()
      ->check(address_given());
  sub->add_option("--master-port", plan->master_port, "Port of the store on node 0 (0: a free port, one node only)")
      ->capture_default_str()
      ->transform(integer_in<int>(0, 65535));
  // Read as its name (CLI11 checks it is one of them, with its own message), made a value in the callback.
  auto backend_name = std::make_shared<std::string>(name(plan->backend));
  sub->add_option("--backend", *backend_name, "gloo (CPU ranks) or nccl (one GPU per rank)")
      ->capture_default_str()
      ->check(CLI::IsMember(dist::process_group_backend_names()));
  sub->add_option("--timeout", plan->timeout_s, "Seconds a rank waits for the store or a collective before failing")
      ->capture_default_str()
      ->check(seconds_in(kTimeoutSeconds));
  sub->add_option("--iface", plan->iface, "Network interface for Gloo (sets GLOO_SOCKET_IFNAME); default: the one that routes to the master");
  sub->add_option("--max-restarts", plan->max_restarts,
                  "When a worker fails, stop and start all of this node's workers again, up to this many times (torchrun's --max-restarts)")
      ->capture_default_str()
      ->transform(integer_in<int>(0, 1000));
  auto events_file = std::make_shared<std::string>();
  sub->add_option("--events-file", *events_file,
                  "Append what happens to the workers (started, exited, restarting, finished) here as JSON Lines");
  auto error_file = std::make_shared<std::string>();
  sub->add_option("--error-file", *error_file,
                  "When the job fails, write its error here as JSON (error_class, message, rank)");
  sub->add_option("command", plan->command, "The dpv subcommand and its arguments, after --")->required();
  sub->callback([plan, backend_name, error_file, events_file, &run] {
    plan->backend = dist::parse_process_group_backend(*backend_name);
    run = [plan, error_file, events_file] {
      if (!error_file->empty()) check_output_path(*error_file, "--error-file");
      check_outputs_distinct({{"--events-file", *events_file}, {"--error-file", *error_file}}, command_files(plan->command));
      try {
        auto events = events_file->empty() ? std::make_unique<LaunchEvents>()
                                           : std::make_unique<LaunchEvents>(*events_file, "--events-file");
        run_launch(*plan, *events);
      } catch (const Error& e) {
        if (!error_file->empty()) write_error_file(*error_file, e);
        throw;
      }
    };
  });
}

}  // namespace dpv::cli
