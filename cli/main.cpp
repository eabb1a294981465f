// dpv: the engine's command-line front end (devices, sample, step, train, bench, launch, trace, lab).
// Exit status: 0 on success, 1 on an engine error ("dpv: error: ValueError: ..." on one line of
// stderr), 2 on a command-line parse error (CLI11's message). Output files are written atomically
// and only after every computation succeeded, so a failure never leaves a partial file.
#include <exception>
#include <new>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/launcher.h"
#include "engine/core_backends.h"
#include "engine/error.h"

namespace {

// Error texts may carry a Python-style traceback over several lines; the CLI promises one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dpv: run, check and measure nn.DataParallel training with the dpviz engine"};
  app.require_subcommand(1);
  app.fallthrough(false);
  dpv::cli::Action run;
  dpv::cli::add_devices_command(app, run);
  dpv::cli::add_sample_command(app, run);
  dpv::cli::add_step_command(app, run);
  dpv::cli::add_train_command(app, run);
  dpv::cli::add_bench_command(app, run);
  dpv::cli::add_bench_allreduce_command(app, run);
  dpv::cli::add_bench_ring_command(app, run);
  dpv::cli::add_launch_command(app, run);
  dpv::cli::add_trace_command(app, run);
  dpv::cli::add_lab_command(app, run);

  // CLI11 answers an unknown command with "A subcommand is required", which does not say which
  // word it did not know.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == word;
    }
    if (!found) {
      std::cerr << "dpv: error: unknown command '" << word << "' (commands: " << known << "); see dpv --help"
                << std::endl;
      return 2;
    }
  }

  try {
    (void)dpv::cpu_gemm_pin();  // DPV_GEMM, checked before a flag's check makes a device with it
  } catch (const dpv::Error& e) {
    std::cerr << "dpv: error: " << one_line(e.full()) << std::endl;
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, or the parse error and a hint
    return code == 0 ? 0 : 2;
  } catch (const dpv::Error& e) {
    // A subcommand's callback that turns an option into a value may refuse it (no abort for that).
    std::cerr << "dpv: error: " << one_line(e.full()) << std::endl;
    return 2;
  }

  try {
    if (run) run();
  } catch (const dpv::Error& e) {
    std::cout.flush();
    // A worker of `dpv launch` names the launcher's flags behind the variables the error is about.
    const std::string hint = dpv::cli::launched_by_dpv_launch() ? dpv::cli::launch_flags_hint(e) : std::string();
    std::cerr << "dpv: error: " << one_line(e.full() + hint) << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    // The size checks run before the work; this is what is left (a request the checks let through
    // but the system could not serve).
    std::cout.flush();
    std::cerr << "dpv: error: MemoryError: out of memory (an allocation failed); try a smaller --batch or --samples"
              << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "dpv: error: " << one_line(e.what()) << std::endl;
    return 1;
  }
  return 0;
}
