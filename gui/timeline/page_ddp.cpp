// The Timeline page after a DDP iteration of the engine: the lanes a DDP trace has (host; per rank
// its compute lane with its communication lane right under it, where the bucket all-reduces ran),
// and how much all-reduce time overlapped the same rank's backward.
#include <QCoreApplication>
#include <QLabel>
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "course/timeline_series.h"
#include "engine/trace.h"
#include "gui/timeline/page.h"

namespace gui {

QString idleText(const dpv::course::IterationWork& work) {
  if (work.idle_seconds <= 0) return QString();
  return QCoreApplication::translate("gui::TimelinePage", " (%1 ms of waiting before and between steps left out)")
      .arg(work.idle_seconds * 1e3, 0, 'f', 1);
}

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
  // Only the iteration's work: not the wait before its first step, the learner's pauses between
  // steps, nor DDP's construction (course/timeline_series.h).
  const dpv::course::IterationWork work = dpv::course::measured_work(std::vector<dpv::StageEvent>(events.begin(), events.end()));
  dpv::TraceRecorder recorder;
  recorder.set_process_name("dpviz DDP");
  for (const auto& ev : work.events) recorder.on_stage(ev);
  ddpLanes_ = dpv::read_trace_lanes(recorder.to_json(), "this DDP iteration");
  const double endMs = drawLanes(ddpLanes_);
  double commSeconds = 0;
  const double overlap = ddpOverlapSeconds(QVector<dpv::StageEvent>(work.events.begin(), work.events.end()), &commSeconds);
  const QString construct = work.construct_seconds > 0
                                ? tr(" DDP's construction (checking the model across ranks, broadcasting rank 0's state) "
                                     "took %1 ms once before it and is not part of the iteration.")
                                      .arg(work.construct_seconds * 1e3, 0, 'f', 3)
                                : QString();
  summary_->setText(tr("<b>Iteration %1 under DistributedDataParallel</b> on %2%3: %4 ms of measured work%5.%6 Under each rank's compute "
                       "lane is its communication lane: the bucket all-reduces (grey) took %7 ms in all, %8 ms of it "
                       "while that rank's backward was still computing.%9")
                        .arg(info.iteration)
                        .arg(info.deviceSpec)
                        .arg(complete ? QString() : tr(", in progress"))
                        .arg(endMs, 0, 'f', 3)
                        .arg(idleText(work), construct)
                        .arg(commSeconds * 1e3, 0, 'f', 3)
                        .arg(overlap * 1e3, 0, 'f', 3)
                        .arg(info.iteration == 1 ? tr("<br><i>Iteration 1 has one bucket, all-reduced after the whole "
                                                      "backward; run another iteration to see the rebuilt buckets "
                                                      "overlap it.</i>")
                                                 : QString()));
}

}  // namespace gui
