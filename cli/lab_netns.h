#pragma once
// The two nodes of `dpv lab network`: network namespaces dpvlabA<pid> and dpvlabB<pid> joined by
// a veth pair dpvla<pid> (10.231.0.1/24) <-> dpvlb<pid> (10.231.0.2/24). The addresses exist only
// inside the namespaces (the host's own routes never see them). Both ends are shaped the same:
// tc tbf at the rate (each direction of the link gets it), under netem's delay and loss where the
// kernel has netem. The names carry the lab's pid, so leftovers of a lab that died (SIGKILL) are
// found by the next one and removed (remove_dead_lab_namespaces). Every `ip` and `tc` call has a
// timeout. The destructor removes everything it made; removing a namespace removes its veth end.
#include <optional>
#include <string>
#include <vector>

namespace dpv::cli {

// Names and addresses of one lab's network, from its pid.
struct LabNames {
  std::string ns_a, ns_b, veth_a, veth_b;
  std::string addr_a = "10.231.0.1", addr_b = "10.231.0.2";
  static LabNames for_pid(long pid);
};

// The shaping of one point: rate in bits per second; delay and loss only with netem.
struct LinkShape {
  double rate_bits_per_s = 0;
  double delay_s = 0;
  double loss_percent = 0;
};

// What stops the lab from shaping a real link, or nullopt when it can: not root / no CAP_NET_ADMIN,
// no `ip` or `tc`. The text says what is missing and the command to run as root.
std::optional<std::string> why_no_shaping();

// Removes namespaces named like a lab's whose pid no longer runs; returns the names removed.
// The network namespaces `ip netns list` names now, each by its exact name (a line may add
// " (id: N)"); empty when `ip` fails.
std::vector<std::string> list_network_namespaces();
// Whether list_network_namespaces() holds `name` exactly ("dpvlabA370" is not "dpvlabA3707").
bool network_namespace_exists(const std::string& name);
std::vector<std::string> remove_dead_lab_namespaces();

class LabNetwork {
 public:
  // Creates the namespaces and the veth pair, addresses and links up; throws dpv::Error (after
  // removing what it made) when a step fails, naming the command and its output.
  LabNetwork();
  ~LabNetwork();
  LabNetwork(const LabNetwork&) = delete;
  LabNetwork& operator=(const LabNetwork&) = delete;

  const LabNames& names() const { return names_; }
  // Whether netem works here (tried on this lab's own veth once).
  bool has_netem() const { return has_netem_; }
  // Replaces both ends' qdiscs with `shape`. Throws dpv::Error when tc refuses, or when a delay or
  // loss is asked for without netem.
  void shape(const LinkShape& shape);
  // `ip netns exec <ns>` for node 0 (A) or node 1 (B), to put before a command.
  std::vector<std::string> exec_prefix(int node) const;
  // Removes everything now (the destructor's work; safe to call twice).
  void remove();

 private:
  LabNames names_;
  bool created_a_ = false, created_b_ = false;
  bool has_netem_ = false;
};

// Runs one `ip`/`tc` command with the lab's timeout; throws dpv::Error with its output if it fails.
void run_network_command(const std::vector<std::string>& argv);

}  // namespace dpv::cli
