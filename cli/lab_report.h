#pragma once
// What `dpv lab network` prints and writes for its sweep: one line per point (rate, delay, bucket
// cap, step time measured and predicted and their ratio, exposed communication measured and
// predicted, MB all-reduced per step, and for a hook the MB it saved against allreduce's and its
// gradient error, relative L2 against the exact average, from its probed step), and --json FILE
// with the same numbers (format "dpv-lab-network" version 1, docs/cli-lab-network.md; each point
// with rank 0's last step), written atomically.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/lab_point.h"
#include "engine/netmodel/lab_summary.h"

namespace dpv::cli {

struct LabPointResult {
  LabPoint point;
  netmodel::PointSummary summary;
  netmodel::StepMeasure last_step;  // rank 0's last step: what the app's timeline draws
};

struct LabReport {
  int nproc_per_node = 1;
  int world = 2;
  bool simulated = false;
  std::string simulated_reason;  // why the link is simulated ("--simulated", or what shaping lacked)
  bool netem = false;            // the kernel has netem (a real link only)
  std::vector<LabPointResult> points;
};

// The lines before the table: how the link is made, and "SIMULATED" where it is.
void print_lab_header(std::ostream& out, const LabReport& report);
// The table's column names, then one row per point as it finishes.
void print_lab_columns(std::ostream& out);
void print_lab_row(std::ostream& out, const LabPointResult& result);
std::string lab_report_json(const LabReport& report);

}  // namespace dpv::cli
