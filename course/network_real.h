#pragma once
// The network lab over a REAL shaped link, for the app: the `dpv lab network` command for one point
// of the Network page (two network namespaces joined by a veth pair shaped with tc tbf, `dpv launch
// --nnodes 2` in each; docs/cli-lab-network.md), the plan that says whether the page can run it or
// must run the simulated link instead (and why, from typed facts: the privilege, the dpv binary,
// netem), and the reader of the lab's --json report into typed points. The child process itself is
// the caller's to run (the app's worker thread). The command the page shows and the one it runs
// come from the same builder, so they cannot differ.
#include <optional>
#include <string>
#include <vector>

#include "course/network_lab.h"

namespace dpv::course {

// `dpv lab network`'s arguments (after the program) for `setup` on `link`: world/2 ranks on each
// of the two nodes, the rate, the delay, the bucket cap, the hook, then `-- train --ddp --preset
// <preset> ...`; `--json <json_path>` before the `--` when json_path is not empty. Throws
// dpv::Error (ValueError) for an odd world (the lab puts the same number of ranks on each node).
std::vector<std::string> lab_network_arguments(const NetworkLabSetup& setup, const std::string& preset,
                                               const netmodel::Link& link, const std::string& json_path);

// The one-step run that asks the lab whether the kernel has netem (the report's "netem"), on a
// link without delay, before a point with a delay runs: the lab refuses a delay without netem.
std::vector<std::string> netem_probe_arguments(const NetworkLabSetup& setup, const std::string& preset,
                                               const netmodel::Link& link, const std::string& json_path);

// `program` and `args` as a POSIX shell reads them: each word single-quoted where it holds
// anything but [A-Za-z0-9_./:=,+-@%].
std::string shell_command(const std::string& program, const std::vector<std::string>& args);

// What decides whether the real link can run here, each a fact found by the app.
struct RealLinkFacts {
  bool privileged = false;           // CAP_NET_ADMIN (netmodel::has_net_admin)
  std::string dpv_exe;               // the dpv binary the app runs; "" when none was found
  std::string dpv_missing_reason;    // where it was looked for, when none was found
  std::optional<bool> netem;         // the lab's own finding; unknown until a lab reported it
};

struct NetworkRunPlan {
  bool real = false;         // run the lab on the shaped link
  bool probe_netem = false;  // first run netem_probe_arguments (a delay, netem not known yet)
  std::string simulated_reason;  // why the simulated link runs instead ("" when it was chosen)
};

// The plan for a point on `link`: the real link when `want_real` and the facts allow it, else the
// simulated one with the reason.
NetworkRunPlan plan_network_run(bool want_real, const RealLinkFacts& facts, const netmodel::Link& link);

// What the page can say before any run: why the real link cannot run here ("" when it can).
std::string why_no_real_link(const RealLinkFacts& facts);

// `dpv lab network --json`'s report ("dpv-lab-network" version 1), every point typed.
struct LabNetworkReport {
  int world = 0;
  bool simulated = false;
  std::string simulated_reason;  // the lab's own, when it ran simulated
  bool netem = false;            // the kernel has netem (a real link only)
  std::vector<NetworkLabPoint> points;  // steps and last_step_by_rank: rank 0's last step only
};

// Reads and checks a report; throws dpv::Error (ValueError) naming `path` and the field that is
// wrong, or that the file is not such a report.
LabNetworkReport read_lab_network_report(const std::string& path);

// The sentence the page shows about the link a point ran on, from the point's facts: the real
// shaped link (namespaces, tbf at the rate, netem's delay) or the simulated one and why.
std::string network_link_text(const NetworkLabPoint& point);

}  // namespace dpv::course
