// `dpv trace merge OUT IN...`: one Chrome trace with a process per rank from the per-rank traces
// of a launched job (engine/io/trace_merge.h). OUT is written atomically.
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "engine/io/trace_merge.h"

namespace dpv::cli {

void add_trace_command(CLI::App& app, Action& run) {
  auto* trace = app.add_subcommand("trace", "Chrome trace tools: dpv trace merge OUT IN...");
  trace->require_subcommand(1);
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto* merge = trace->add_subcommand("merge", "Join per-rank Chrome traces into one, a process per rank");
  merge->add_option("out", *out, "Merged trace to write")->required();
  merge->add_option("inputs", *inputs, "Per-rank traces, rank 0 first")->required()->check(CLI::ExistingFile);
  merge->callback([out, inputs, &run] {
    run = [out, inputs] {
      check_output_path(*out, "OUT");
      std::vector<std::pair<std::string, std::string>> named;
      for (const std::string& in : *inputs) named.emplace_back("IN", in);
      check_not_an_input(*out, "OUT", named);
      merge_trace_files(*out, *inputs);
    };
  });
}

}  // namespace dpv::cli
