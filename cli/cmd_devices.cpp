// `dpv devices`: what this machine offers (CPU workers, CUDA devices, NCCL version) and how this
// dpv was built.
#include <cblas.h>

#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "engine/device.h"

namespace dpv::cli {
namespace {

void print_devices() {
  std::cout << describe_machine();
  // The engine speaks of device specs; the flag that takes one is dpv's.
  std::cout << "Device specs for --devices: cpu:K, cuda, cuda:0,1, cuda:NxK\n";
  std::cout << "CPU workers: " << std::thread::hardware_concurrency()
            << " (std::thread::hardware_concurrency)\n";
  std::cout << "Build: CUDA backend "
#ifdef DPV_HAVE_CUDA
            << "on"
#else
            << "off"
#endif
            << ", "
#ifdef NDEBUG
            << "release"
#else
            << "debug (assertions on)"
#endif
            << ", compiler " << __VERSION__ << "\n";
  std::cout << "BLAS: OpenBLAS " << openblas_get_config() << " (core " << openblas_get_corename() << ")\n";
}

}  // namespace

void add_devices_command(CLI::App& app, Action& run) {
  auto* sub = app.add_subcommand("devices", "What this machine offers: CPU workers, CUDA devices, NCCL, build flags");
  sub->callback([&run] { run = print_devices; });
}

}  // namespace dpv::cli
