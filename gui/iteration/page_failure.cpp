// The Iteration page when the engine fails: the banner in the mode's words (devices and chunks for
// DataParallel, ranks and shards for DDP), the failing device or rank marked, and the place the
// learner keeps when settings change.
#include <QLabel>

#include "gui/ddp/scene.h"
#include "gui/iteration/page.h"
#include "gui/iteration/scene.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

int IterationPage::stageLike(const std::vector<dpv::Stage>& plan, const dpv::Stage& stage, int index) {
  if (plan.empty()) return -1;
  for (int i = 0; i < static_cast<int>(plan.size()); ++i) {
    if (plan[static_cast<size_t>(i)].kind == stage.kind && plan[static_cast<size_t>(i)].layer == stage.layer) return i;
  }
  for (int i = 0; i < static_cast<int>(plan.size()); ++i) {
    if (plan[static_cast<size_t>(i)].kind == stage.kind) return i;
  }
  return std::min(index, static_cast<int>(plan.size()) - 1);
}

void IterationPage::clearFailure() {
  scene_->setFailure(-1, QString());
  failedRank_ = -1;
  failedRankReason_.clear();
}

void IterationPage::markFailedRank(DdpSceneState& state) const {
  for (DdpRankView& rank : state.ranks) {
    if (rank.rank != failedRank_) continue;
    rank.failure = failedRankReason_;
    rank.activity = failedRankReason_;  // the words beside the red mark
  }
}

QString IterationPage::failureAdvice(const EngineFailure& failure) const {
  if (failure.reason != dpv::ErrorReason::BatchNormSingleValue) return tr("Change the settings above and step again.");
  if (info_.ddp) {
    // A rank's BatchNorm normalises its own shard (or, with SyncBatchNorm, the whole batch).
    return tr("One rank got a shard of a single sample, and BatchNorm cannot normalise one value per channel in "
              "training. Pick a batch size that leaves every rank's shard at least 2 samples.");
  }
  // nn.DataParallel has no synchronised BatchNorm (each replica normalises its own chunk), so the
  // only fix inside DataParallel is a batch that gives every device at least 2 samples.
  return tr("One device got a chunk of a single sample, and BatchNorm cannot normalise one value per channel "
            "in training. Pick a batch size that leaves at least 2 samples per chunk.");
}

void IterationPage::onEngineError(const QString& message) {
  waiting_ = false;
  pause();
  const EngineFailure failure = engine() ? engine()->lastFailure() : EngineFailure{};
  const bool batchNormSingleValue = failure.reason == dpv::ErrorReason::BatchNormSingleValue;
  // Only errors raised while a stage of the program ran are PyTorch's; the app's own (preparing
  // devices, model or data) are said to be the app's.
  const QString headline = failure.inProgram ? tr("The engine stopped with an error (PyTorch raises the same):")
                                             : tr("The app could not prepare this iteration (this error is the app's own, not one PyTorch raises):");
  errorBanner_->setText(QStringLiteral("%1\n%2\n%3").arg(headline, message, failureAdvice(failure)));
  errorBanner_->setVisible(true);
  showStatus(tr("Engine error: %1").arg(message.section(QLatin1Char('\n'), 0, 0)));
  // A jump (a stage pill) to a stage that fails ends where stepping there would: at the last stage
  // that ran, with the failure shown on it, not back at the start.
  const bool seeking = seekTarget_ >= -1;
  seekTarget_ = -2;
  if (seeking && engine() && haveInfo_) showStage(static_cast<int>(engine()->events().size()) - 1, false);
  if (info_.ddp && failure.site.rank >= 0) {
    failedRank_ = failure.site.rank;
    failedRankReason_ = batchNormSingleValue ? tr("1 sample: BatchNorm refuses") : tr("this rank failed");
    DdpSceneState state = ddpSceneStateFor(info_, cursor_ >= 0 ? &engine()->events()[cursor_] : nullptr);
    markFailedRank(state);
    ddpScene_->showState(state, false);
  } else if (failure.site.replica >= 0) {
    scene_->setFailure(failure.site.replica, batchNormSingleValue ? tr("1 sample: BatchNorm refuses") : tr("this replica failed"));
  }
  if (seeking) {
    if (auto done = std::exchange(seekDone_, {})) done();
  }
  updateControls();
}

}  // namespace gui
