// `dpv lab network`: what the network costs DDP. Two namespaced nodes joined by a veth pair shaped
// with tc (cli/lab_netns.h), the DDP job run across them for every point of a sweep of rates,
// delays and bucket caps, each point's measured step time, exposed communication and bytes per step
// printed beside the cost model's prediction (engine/netmodel). Without CAP_NET_ADMIN, or with
// --simulated, the in-process ranks run over a simulated link instead, labelled so on every line
// that reports it. Everything the lab made is removed on the way out, on failure and on Ctrl-C.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/int_options.h"
#include "cli/lab_netns.h"
#include "cli/lab_point.h"
#include "cli/lab_process.h"
#include "cli/lab_report.h"
#include "cli/launch_worker.h"
#include "cli/output_paths.h"
#include "cli/validators.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/netmodel/link_model.h"

namespace dpv::cli {
namespace {

struct LabOptions {
  int nproc_per_node = 1;
  std::string rates, delays = "0", bucket_caps = "25", hooks;
  double loss_percent = 0;
  bool simulated = false;
  double timeout_s = 300;
  std::string json;
  std::vector<std::string> train;
};

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    check(!item.empty(), flag + " '" + text + "' has an empty item: give a comma-separated list, e.g. 10mbit,100mbit",
          ErrorClass::ValueError);
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  check(items.size() <= 64, flag + " lists " + std::to_string(items.size()) + " values: give at most 64",
        ErrorClass::ValueError);
  return items;
}

// The sweep: every rate with every delay with every bucket cap, rates outermost.
std::vector<LabPoint> sweep_points(const LabOptions& o) {
  std::vector<double> rates, delays, caps;
  for (const std::string& r : split_list(o.rates, "--rate")) rates.push_back(netmodel::parse_rate_bits_per_s(r, "--rate"));
  for (const std::string& d : split_list(o.delays, "--delay")) delays.push_back(netmodel::parse_delay_s(d, "--delay"));
  for (const std::string& c : split_list(o.bucket_caps, "--bucket-cap-mb")) {
    char* end = nullptr;
    const double mb = std::strtod(c.c_str(), &end);
    check(end != c.c_str() && *end == '\0' && mb > 0 && mb <= 1024,
          "--bucket-cap-mb '" + c + "' is not a bucket cap: give MiB from above 0 to 1024, e.g. 1,25", ErrorClass::ValueError);
    caps.push_back(mb);
  }
  std::vector<std::string> hooks{""};  // DDP's own all-reduce
  if (!o.hooks.empty()) hooks = split_list(o.hooks, "--comm-hook");
  for (const std::string& h : hooks) {
    check(h.empty() || h == "allreduce" || h == "fp16" || h == "powersgd",
          "--comm-hook '" + h + "' is not a hook the lab sweeps: give allreduce, fp16 or powersgd", ErrorClass::ValueError);
  }
  std::vector<LabPoint> points;
  for (double rate : rates)
    for (double delay : delays)
      for (double cap : caps)
        for (const std::string& hook : hooks) points.push_back(LabPoint{LinkShape{rate, delay, o.loss_percent}, cap, hook});
  check(points.size() <= 256, "the sweep has " + std::to_string(points.size()) + " points: give at most 256",
        ErrorClass::ValueError);
  return points;
}

// A temporary folder for the step logs, dpv-lab-<pid>-XXXXXX, removed with everything in it. A lab
// killed by SIGKILL leaves its folder; the next one removes the folders of pids that no longer run.
class TempFolder {
 public:
  TempFolder() {
    const std::filesystem::path tmp = std::filesystem::temp_directory_path();
    remove_dead_folders(tmp);
    std::string pattern = (tmp / ("dpv-lab-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    check(::mkdtemp(pattern.data()) != nullptr, "cannot create a temporary folder under " + tmp.string(),
          ErrorClass::OSError);
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  static void remove_dead_folders(const std::filesystem::path& tmp) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(tmp, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("dpv-lab-", 0) != 0) continue;
      const std::string rest = name.substr(8);
      const size_t dash = rest.find('-');
      if (dash == 0 || dash == std::string::npos || dash > 9 ||
          rest.find_first_not_of("0123456789") != dash)
        continue;
      const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
      if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // that lab still runs
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }

  std::string path_;
};

void run_lab(const LabOptions& o) {
  check_lab_train_command(o.train);
  const std::vector<LabPoint> points = sweep_points(o);
  if (!o.json.empty()) check_output_path(o.json, "--json");
  LabReport report;
  report.nproc_per_node = o.nproc_per_node;
  report.world = 2 * o.nproc_per_node;
  std::optional<std::string> why_not = why_no_shaping();
  report.simulated = o.simulated || why_not.has_value();
  report.simulated_reason = o.simulated ? "--simulated was given" : why_not.value_or("");
  check(!report.simulated || o.loss_percent == 0,
        "--loss needs a real link with netem: the simulated link (" + report.simulated_reason +
            ") models no packet loss; leave --loss out", ErrorClass::ValueError);

  const InterruptGuard interrupts;  // Ctrl-C stops the job, then the namespaces go
  std::unique_ptr<LabNetwork> network;
  if (!report.simulated) {
    for (const std::string& name : remove_dead_lab_namespaces())
      std::cout << "removed " << name << ", left by a lab that is no longer running\n";
    network = std::make_unique<LabNetwork>();
    report.netem = network->has_netem();
    for (const LabPoint& p : points) {
      check(report.netem || (p.shape.delay_s == 0 && p.shape.loss_percent == 0),
            "--delay and --loss need the kernel's netem qdisc, which this machine lacks (tc says \"Specified qdisc "
            "kind is unknown\"): leave them out, load it (modprobe sch_netem), or add --simulated, where the cost "
            "model applies the delay", ErrorClass::ValueError);
    }
  }
  print_lab_header(std::cout, report);
  print_lab_columns(std::cout);
  LabJob job;
  job.nproc_per_node = o.nproc_per_node;
  job.timeout_s = o.timeout_s;
  job.train = o.train;
  job.exe = self_executable();
  const TempFolder work;
  job.work_dir = work.path();
  for (size_t i = 0; i < points.size(); ++i) {
    check(!InterruptGuard::interrupted(), "stopped by " +
          std::string(InterruptGuard::signal() == SIGINT ? "SIGINT" : "SIGTERM") + " before point " + std::to_string(i + 1),
          ErrorClass::RuntimeError);
    const StepLog log = run_lab_point(job, points[i], network.get(), static_cast<int>(i));
    const netmodel::Link link{points[i].shape.delay_s, points[i].shape.rate_bits_per_s / 8};
    report.points.push_back(LabPointResult{points[i], netmodel::summarize_point(log.steps, link), log.steps.back()});
    print_lab_row(std::cout, report.points.back());
  }
  if (network) network->remove();
  if (!o.json.empty()) {
    write_file_atomic(o.json, lab_report_json(report));
    std::cout << "json: " << report.points.size() << " points -> " << o.json << "\n";
  }
}

}  // namespace

void add_lab_command(CLI::App& app, Action& run) {
  auto* lab = app.add_subcommand("lab", "Experiments on what data parallelism costs: dpv lab network");
  lab->require_subcommand(1);
  auto o = std::make_shared<LabOptions>();
  auto* sub = lab->add_subcommand(
      "network", "DDP across two namespaced nodes on a tc-shaped link, swept over rates, delays and bucket caps, "
                 "measured beside the cost model: dpv lab network --rate 100mbit,10mbit -- train --ddp ...");
  sub->add_option("--nproc-per-node", o->nproc_per_node, "Ranks on each of the two nodes")
      ->capture_default_str()
      ->transform(integer_in<int>(1, 16));
  sub->add_option("--rate", o->rates, "Link rates to sweep, tc syntax, comma-separated: 1gbit,100mbit,10mbit")->required();
  sub->add_option("--delay", o->delays, "One-way delays to sweep (netem, or the simulated link): 0,1ms,10ms")
      ->capture_default_str();
  sub->add_option("--loss", o->loss_percent, "Packet loss in percent (netem only)")
      ->capture_default_str()
      ->check(number_in(0, 100));
  sub->add_option("--bucket-cap-mb", o->bucket_caps, "DDP bucket caps to sweep, MiB, comma-separated: 1,25")
      ->capture_default_str();
  sub->add_option("--comm-hook", o->hooks, "DDP communication hooks to sweep, comma-separated: allreduce,fp16,powersgd");
  sub->add_flag("--simulated", o->simulated,
                "In-process ranks over a simulated link (the cost model's delays) instead of a shaped real one");
  sub->add_option("--timeout", o->timeout_s, "Seconds the job of each point may take (dpv launch --timeout)")
      ->capture_default_str()
      ->check(seconds_in(kTimeoutSeconds));
  sub->add_option("--json", o->json, "Also write every point's numbers here (JSON)");
  sub->add_option("command", o->train, "The DDP job after --: train --ddp ...")->required();
  sub->callback([o, &run] { run = [o] { run_lab(*o); }; });
}

}  // namespace dpv::cli
