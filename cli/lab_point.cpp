#include "cli/lab_point.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/lab_process.h"
#include "engine/error.h"
#include "engine/netmodel/link_model.h"

namespace dpv::cli {
namespace {

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// The last `count` lines of `text`, for an error message.
std::string last_lines(const std::string& text, int count) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  const size_t end = pos;
  for (int n = 0; n < count && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  std::string out = text.substr(pos == 0 ? 0 : pos + 1, end - (pos == 0 ? 0 : pos + 1));
  for (char& c : out) {
    if (c == '\n') c = '|';
  }
  return out;
}

std::string point_words(const LabPoint& p) {
  return "rate " + netmodel::rate_text(p.shape.rate_bits_per_s) + ", delay " + netmodel::delay_text(p.shape.delay_s) +
         ", bucket cap " + number_text(p.bucket_cap_mb) + " MB" +
         (p.comm_hook.empty() ? "" : ", --comm-hook " + p.comm_hook);
}

// The training command with the lab's own arguments after the user's.
std::vector<std::string> train_args(const LabJob& job, const LabPoint& point, const std::string& log) {
  std::vector<std::string> args = job.train;
  args.insert(args.end(), {"--bucket-cap-mb", number_text(point.bucket_cap_mb), "--step-json", log});
  // A hook point runs one step more that measures the hook's gradient error (the summary does not
  // time it): the bytes a hook saves beside what they cost in accuracy.
  if (!point.comm_hook.empty()) args.insert(args.end(), {"--comm-hook", point.comm_hook, "--probe-hook-error"});
  // PyTorch's start_powerSGD_iter is 1000: a lab of a few steps would measure plain all-reduces.
  // 2 is the first iteration PowerSGD allows with error feedback and warm start.
  if (point.comm_hook == "powersgd") args.insert(args.end(), {"--powersgd-start-iter", "2"});
  return args;
}

void check_finished(const std::vector<const ProcessResult*>& nodes, const LabPoint& point) {
  // The node that failed on its own is the one to name: the other was stopped because of it.
  const ProcessResult* failed = nullptr;
  size_t which = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]->exit_code == 0) continue;
    if (!failed || (failed->stopped_by_lab && !nodes[i]->stopped_by_lab)) failed = nodes[i], which = i;
  }
  if (!failed) return;
  if (failed->interrupted)
    throw Error("stopped by " + std::string(InterruptGuard::signal() == SIGINT ? "SIGINT" : "SIGTERM") + " at " +
                    point_words(point) + "; the lab's namespaces were removed", ErrorClass::RuntimeError);
  const std::string who = nodes.size() == 1 ? "the simulated job" : "node " + std::to_string(which);
  throw Error("the DDP job failed at " + point_words(point) + ": " + who +
                  (failed->timed_out ? " did not finish within its --timeout"
                                     : " exited with status " + std::to_string(failed->exit_code)) +
                  "; its last output: " + last_lines(failed->output, 3),
              ErrorClass::RuntimeError);
}

}  // namespace

void check_lab_train_command(const std::vector<std::string>& train) {
  check(!train.empty() && train[0] == "train",
        "give the DDP job after --, starting with `train`: dpv lab network ... -- train --ddp --preset mlp --steps 10",
        ErrorClass::ValueError);
  bool ddp = false;
  for (const std::string& a : train) {
    ddp = ddp || a == "--ddp";
    for (const char* own :
         {"--devices", "--step-json", "--simulated-rate", "--simulated-delay", "--bucket-cap-mb", "--comm-hook",
          "--powersgd-start-iter", "--probe-hook-error"}) {
      const std::string flag = own;
      check(a != flag && a.rfind(flag + "=", 0) != 0,
            flag + " after -- is the lab's to set (ranks from --nproc-per-node, buckets from the lab's --bucket-cap-mb): "
            "leave it out of the train command", ErrorClass::ValueError);
    }
  }
  check(ddp, "the lab measures DistributedDataParallel: add --ddp to the train command after --", ErrorClass::ValueError);
}

StepLog run_lab_point(const LabJob& job, const LabPoint& point, LabNetwork* network, int index) {
  const std::string log = job.work_dir + "/point" + std::to_string(index) + ".json";
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>((job.timeout_s + 30) * 1000));
  if (!network) {
    std::vector<std::string> argv{job.exe};
    const std::vector<std::string> train = train_args(job, point, log);
    argv.insert(argv.end(), train.begin(), train.end());
    argv.insert(argv.end(), {"--devices", "cpu:" + std::to_string(2 * job.nproc_per_node), "--simulated-rate",
                             number_text(point.shape.rate_bits_per_s) + "bit", "--simulated-delay",
                             number_text(point.shape.delay_s * 1e6) + "us"});
    LabProcess p(argv);
    wait_all({&p}, deadline, true);
    check_finished({&p.result()}, point);
    return read_step_log(log);
  }
  network->shape(point.shape);
  const LabNames& n = network->names();
  std::vector<std::unique_ptr<LabProcess>> nodes;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = network->exec_prefix(node);
    argv.insert(argv.end(), {job.exe, "launch", "--nproc-per-node", std::to_string(job.nproc_per_node), "--nnodes", "2",
                             "--node-rank", std::to_string(node), "--master-addr", n.addr_a, "--master-port", "29500",
                             "--iface", node == 0 ? n.veth_a : n.veth_b, "--timeout", number_text(job.timeout_s), "--"});
    const std::vector<std::string> train = train_args(job, point, log);
    argv.insert(argv.end(), train.begin(), train.end());
    nodes.push_back(std::make_unique<LabProcess>(argv));
  }
  wait_all({nodes[0].get(), nodes[1].get()}, deadline, true);
  check_finished({&nodes[0]->result(), &nodes[1]->result()}, point);
  return read_step_log(log);
}

}  // namespace dpv::cli
