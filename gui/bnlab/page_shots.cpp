// The BatchNorm lab's states for `dpviz --screenshot-all`: a few real training steps, and the
// one-sample-chunk callout. Both are prepared asynchronously through the worker.
#include <QTimer>
#include <memory>

#include "gui/bnlab/callout.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"

namespace gui {

namespace {

constexpr qint64 kShotSteps = 200;
constexpr int kShotTimeoutMs = 30000;  // a stuck engine must not hang the screenshot run

}  // namespace

QList<Page::Shot> BatchNormLabPage::screenshots() {
  // Calls `done` once, after `ready` fired or the timeout, and drops the shot's connections.
  auto prepare = [this](BnLabConfig config, qint64 steps, std::function<void()> done) {
    auto finished = std::make_shared<bool>(false);
    auto connections = std::make_shared<QList<QMetaObject::Connection>>();
    auto finish = [this, done, finished, connections] {
      if (*finished) return;
      *finished = true;
      for (const auto& c : *connections) disconnect(c);
      pause();
      // Grab once the worker has confirmed the pause, so the buttons show the paused state.
      auto grab = [this, done] {
        charts_->replotNow();
        done();
      };
      if (!isRunning()) {
        grab();
        return;
      }
      auto once = std::make_shared<QMetaObject::Connection>();
      *once = connect(this, &BatchNormLabPage::runningStateChanged, this, [once, grab](bool running) {
        if (running) return;
        QObject::disconnect(*once);
        grab();
      });
    };
    *connections << connect(this, &BatchNormLabPage::labConfigured, this, [this, steps, finish] {
      if (steps == 0 || hasFailed()) finish();
      else start();
    });
    *connections << connect(this, &BatchNormLabPage::stepsShown, this, [steps, finish](qint64 shown) {
      if (steps > 0 && shown >= steps) finish();
    });
    *connections << connect(this, &BatchNormLabPage::labFailed, this, finish);
    QTimer::singleShot(kShotTimeoutMs, this, finish);
    setStepLimit(std::max<qint64>(steps, kShotSteps));
    setStepsPerSecond(0);
    setConfig(config);
  };

  // The lab's defaults (8 rows per device on 4 devices, class-sorted), trained long enough for the
  // callout to state the result; then the source document's batch of 10 (chunks 3, 3, 3, 1), where
  // the per-device model stops at step 1 and the others train on.
  const BnLabConfig training{};
  BnLabConfig oneSample = training;
  oneSample.batchSize = 10;
  return {
      Shot{QString(), [prepare, training](std::function<void()> done) { prepare(training, kShotSteps, done); }},
      Shot{QStringLiteral("one-sample-chunk"),
           [prepare, oneSample](std::function<void()> done) { prepare(oneSample, kBnLabResultSteps, done); }},
  };
}

}  // namespace gui
