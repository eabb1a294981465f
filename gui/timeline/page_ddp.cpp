// The Timeline page after a DDP iteration of the engine: the lanes a DDP trace has (host; per rank
// its compute lane with its communication lane right under it, where the bucket all-reduces ran),
// and how much all-reduce time overlapped the same rank's backward.
#include <QLabel>
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "engine/trace.h"
#include "gui/timeline/page.h"

namespace gui {

double ddpOverlapSeconds(const QVector<dpv::StageEvent>& events, double* commSeconds) {
  std::map<int, std::vector<std::pair<double, double>>> backward;  // per rank: busy spans of Backward stages
  for (const auto& ev : events) {
    if (ev.stage.kind != dpv::StageKind::Backward) continue;
    for (const auto& d : ev.devices)
      if (d.busy_end > d.busy_start) backward[d.device].push_back({d.busy_start, d.busy_end});
  }
  double overlap = 0, total = 0;
  for (const auto& ev : events) {
    for (const auto& c : ev.comm) {
      total += std::max(0.0, c.t_end - c.t_start);
      for (const auto& [s, e] : backward[c.device]) overlap += std::max(0.0, std::min(e, c.t_end) - std::max(s, c.t_start));
    }
  }
  if (commSeconds) *commSeconds = total;
  return overlap;
}

void TimelinePage::drawDdpIteration(const QVector<dpv::StageEvent>& events, const IterationInfo& info, bool complete) {
  // The same lanes `dpv train --ddp --trace` writes (engine/trace.h), read back as a trace file is.
  dpv::TraceRecorder recorder;
  recorder.set_process_name("dpviz DDP");
  for (const auto& ev : events) recorder.on_stage(ev);
  ddpLanes_ = dpv::read_trace_lanes(recorder.to_json(), "this DDP iteration");
  const double endMs = drawLanes(ddpLanes_);
  double commSeconds = 0;
  const double overlap = ddpOverlapSeconds(events, &commSeconds);
  summary_->setText(tr("<b>Iteration %1 under DistributedDataParallel</b> on %2%3: %4 ms. Under each rank's compute "
                       "lane is its communication lane: the bucket all-reduces (grey) took %5 ms in all, %6 ms of it "
                       "while that rank's backward was still computing.%7")
                        .arg(info.iteration)
                        .arg(info.deviceSpec)
                        .arg(complete ? QString() : tr(", in progress"))
                        .arg(endMs, 0, 'f', 3)
                        .arg(commSeconds * 1e3, 0, 'f', 3)
                        .arg(overlap * 1e3, 0, 'f', 3)
                        .arg(info.iteration == 1 ? tr("<br><i>Iteration 1 has one bucket, all-reduced after the whole "
                                                      "backward; run another iteration to see the rebuilt buckets "
                                                      "overlap it.</i>")
                                                 : QString()));
}

}  // namespace gui
