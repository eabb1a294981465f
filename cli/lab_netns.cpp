#include "cli/lab_netns.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "cli/lab_process.h"
#include "engine/error.h"
#include "engine/netmodel/net_admin.h"

namespace dpv::cli {
namespace {

constexpr auto kCommandTimeout = std::chrono::seconds(10);
const std::string kPrefixA = "dpvlabA", kPrefixB = "dpvlabB";

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

// Runs a command whose failure is expected or harmless (a removal of what may be gone already).
bool try_command(const std::vector<std::string>& argv) { return run_with_timeout(argv, kCommandTimeout).exit_code == 0; }

// The pid a lab namespace name carries ("dpvlabA1234" -> 1234), or -1 when it is not one.
long pid_in_name(const std::string& name) {
  for (const std::string& prefix : {kPrefixA, kPrefixB}) {
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9)
      return -1;
    return std::stol(digits);
  }
  return -1;
}

std::string tc_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

LabNames LabNames::for_pid(long pid) {
  const std::string id = std::to_string(pid);
  LabNames n;
  n.ns_a = kPrefixA + id;
  n.ns_b = kPrefixB + id;
  n.veth_a = "dpvla" + id;  // interface names have at most 15 characters: pids have at most 7 digits
  n.veth_b = "dpvlb" + id;
  return n;
}

void run_network_command(const std::vector<std::string>& argv) {
  const ProcessResult r = run_with_timeout(argv, kCommandTimeout);
  check(!r.interrupted, "stopped by " + std::string(InterruptGuard::signal() == SIGINT ? "SIGINT" : "SIGTERM") +
                            " while running `" + joined(argv) + "`", ErrorClass::RuntimeError);
  std::string output = r.output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (r.exit_code == 0) return;
  // Built piecewise: GCC 12 warns falsely (-Wrestrict) on "`" + text.
  std::string message = "`";
  message += joined(argv);
  if (r.timed_out) {
    message += "` did not finish within 10 s";
  } else {
    message += "` failed (status ";
    message += std::to_string(r.exit_code);
    message += ")";
  }
  if (!output.empty()) message.append(": ").append(output);
  throw Error(message, ErrorClass::OSError);
}

std::optional<std::string> why_no_shaping() {
  const std::string as_root = "run it as root (sudo dpv lab network ...), or give --simulated for in-process ranks over a "
                              "simulated link";
  if (!netmodel::has_net_admin()) return "this process lacks CAP_NET_ADMIN, which network namespaces and tc need: " + as_root;
  if (run_with_timeout({"ip", "-V"}, kCommandTimeout).exit_code != 0)
    return "the `ip` tool (iproute2) is not installed: apt-get install iproute2, then " + as_root;
  if (run_with_timeout({"tc", "-V"}, kCommandTimeout).exit_code != 0)
    return "the `tc` tool (iproute2) is not installed: apt-get install iproute2, then " + as_root;
  return std::nullopt;
}

std::vector<std::string> list_network_namespaces() {
  std::vector<std::string> names;
  const ProcessResult list = run_with_timeout({"ip", "netns", "list"}, kCommandTimeout);
  if (list.exit_code != 0) return names;
  std::istringstream lines(list.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) names.push_back(line.substr(0, line.find(' ')));  // "name (id: 3)"
  return names;
}

bool network_namespace_exists(const std::string& name) {
  const std::vector<std::string> names = list_network_namespaces();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> remove_dead_lab_namespaces() {
  std::vector<std::string> removed;
  for (const std::string& name : list_network_namespaces()) {
    const long pid = pid_in_name(name);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // that lab still runs
    if (try_command({"ip", "netns", "del", name})) removed.push_back(name);
  }
  return removed;
}

LabNetwork::LabNetwork() : names_(LabNames::for_pid(::getpid())) {
  try {
    run_network_command({"ip", "netns", "add", names_.ns_a});
    created_a_ = true;
    run_network_command({"ip", "netns", "add", names_.ns_b});
    created_b_ = true;
    run_network_command({"ip", "link", "add", names_.veth_a, "netns", names_.ns_a, "type", "veth", "peer", "name",
                         names_.veth_b, "netns", names_.ns_b});
    run_network_command({"ip", "-n", names_.ns_a, "addr", "add", names_.addr_a + "/24", "dev", names_.veth_a});
    run_network_command({"ip", "-n", names_.ns_b, "addr", "add", names_.addr_b + "/24", "dev", names_.veth_b});
    for (const auto& [ns, veth] : {std::pair{names_.ns_a, names_.veth_a}, std::pair{names_.ns_b, names_.veth_b}}) {
      run_network_command({"ip", "-n", ns, "link", "set", veth, "up"});
      run_network_command({"ip", "-n", ns, "link", "set", "lo", "up"});
    }
    // netem is a module some kernels lack ("Specified qdisc kind is unknown"): try it here, once.
    has_netem_ = try_command({"tc", "-n", names_.ns_a, "qdisc", "add", "dev", names_.veth_a, "root", "netem", "delay", "0ms"});
    if (has_netem_) try_command({"tc", "-n", names_.ns_a, "qdisc", "del", "dev", names_.veth_a, "root"});
  } catch (...) {
    remove();
    throw;
  }
}

LabNetwork::~LabNetwork() { remove(); }

void LabNetwork::remove() {
  // Removing a namespace removes its end of the veth pair, and with it the pair.
  if (created_a_ && try_command({"ip", "netns", "del", names_.ns_a})) created_a_ = false;
  if (created_b_ && try_command({"ip", "netns", "del", names_.ns_b})) created_b_ = false;
}

std::vector<std::string> LabNetwork::exec_prefix(int node) const {
  return {"ip", "netns", "exec", node == 0 ? names_.ns_a : names_.ns_b};
}

void LabNetwork::shape(const LinkShape& shape) {
  check(has_netem_ || (shape.delay_s == 0 && shape.loss_percent == 0),
        "a delay or loss needs the kernel's netem qdisc, which this machine lacks (`tc qdisc add ... netem` says "
        "\"Specified qdisc kind is unknown\"): leave --delay and --loss out, load it (modprobe sch_netem), or give "
        "--simulated, where the cost model applies the delay",
        ErrorClass::ValueError);
  const double rate_bytes = shape.rate_bits_per_s / 8;
  // tbf's bucket must hold a timer tick of traffic (rate / HZ, HZ 250 at the least) and a few full
  // frames; no more, since what fits in it passes at the veth's own speed, which the model ignores.
  const double burst = std::max(rate_bytes / 250, 8.0 * 1514);
  for (const auto& [ns, veth] : {std::pair{names_.ns_a, names_.veth_a}, std::pair{names_.ns_b, names_.veth_b}}) {
    try_command({"tc", "-n", ns, "qdisc", "del", "dev", veth, "root"});  // none yet on the first point
    std::vector<std::string> tbf{"tc", "-n", ns, "qdisc", "add", "dev", veth};
    if (has_netem_) {
      run_network_command({"tc", "-n", ns, "qdisc", "add", "dev", veth, "root", "handle", "1:", "netem", "delay",
                           tc_number(shape.delay_s * 1e6) + "us", "loss", std::to_string(shape.loss_percent) + "%"});
      tbf.insert(tbf.end(), {"parent", "1:", "handle", "2:"});
    } else {
      tbf.insert(tbf.end(), {"root", "handle", "1:"});
    }
    tbf.insert(tbf.end(), {"tbf", "rate", tc_number(shape.rate_bits_per_s) + "bit", "burst", tc_number(burst),
                           "latency", "100ms"});
    run_network_command(tbf);
  }
}

}  // namespace dpv::cli
