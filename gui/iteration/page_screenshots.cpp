// The Iteration page's screenshots (--screenshot-all): the DataParallel stages, the loss strip after
// several iterations, and the DDP view's stages, some frozen mid-flight.
#include <memory>

#include "gui/ddp/scene.h"
#include "gui/iteration/page.h"
#include "gui/iteration/scene.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

namespace {

constexpr int kShotIterations = 8;  // iterations run for the screenshot of the loss strip

// The chip worth opening in the inspector for a stage (used for screenshots).
dpv::TensorRole roleShownFor(dpv::StageKind kind) {
  switch (kind) {
    case dpv::StageKind::Scatter: return dpv::TensorRole::Input;
    case dpv::StageKind::Replicate: return dpv::TensorRole::Param;
    case dpv::StageKind::Forward: return dpv::TensorRole::Activation;
    case dpv::StageKind::Gather: return dpv::TensorRole::Output;
    case dpv::StageKind::Loss: return dpv::TensorRole::Output;
    case dpv::StageKind::GradScatter:
    case dpv::StageKind::Backward:
    case dpv::StageKind::ReduceGrads:
    case dpv::StageKind::Finalize: return dpv::TensorRole::Grad;
    case dpv::StageKind::Step:
    case dpv::StageKind::Construct:
    case dpv::StageKind::BroadcastBuffers: return dpv::TensorRole::Param;
    case dpv::StageKind::Sample: return dpv::TensorRole::Input;
    case dpv::StageKind::GatherParams:
    case dpv::StageKind::FreeParams:
    case dpv::StageKind::BroadcastParams: return dpv::TensorRole::Param;
    case dpv::StageKind::ReduceScatter: return dpv::TensorRole::Grad;
  }
  return dpv::TensorRole::Input;
}

}  // namespace

QList<Page::Shot> IterationPage::screenshots() {
  const QList<dpv::StageKind> kinds = {dpv::StageKind::Scatter, dpv::StageKind::Replicate, dpv::StageKind::Forward,
                                       dpv::StageKind::Gather,  dpv::StageKind::Loss,      dpv::StageKind::Backward,
                                       dpv::StageKind::ReduceGrads, dpv::StageKind::Step};
  // The DDP view first (on mlp-bn, so there are buffers and several buckets); the first DataParallel
  // shot puts the settings back.
  QList<Shot> shots = ddpScreenshots();
  shots.append(zeroScreenshots());
  const AppSettings original = context()->settings();
  shots.append(Shot{QStringLiteral("stage-00-start"), [this, original](std::function<void()> done) {
                      if (context()->settings() != original) {
                        applyAndWait(original, [this, done] { seekTo(-1, done); });
                        return;
                      }
                      seekTo(-1, std::move(done));
                    }});
  int n = 1;
  for (dpv::StageKind kind : kinds) {
    const QString suffix = QStringLiteral("stage-%1-%2").arg(n++, 2, 10, QLatin1Char('0')).arg(stageLessonId(kind));
    shots.append(Shot{suffix, [this, kind](std::function<void()> done) {
                        // The stage's first occurrence; for Forward the middle layer (BatchNorm in mlp-bn).
                        QList<int> matches;
                        for (int i = 0; i < static_cast<int>(info_.plan.size()); ++i) {
                          if (info_.plan[static_cast<size_t>(i)].kind == kind) matches.append(i);
                        }
                        if (matches.isEmpty()) return done();
                        const int index = kind == dpv::StageKind::Forward ? matches[matches.size() / 2] : matches.first();
                        seekTo(index, [this, kind, done] {
                          const int last = scene_->deviceCount() - 1;
                          const dpv::TensorRole role = roleShownFor(kind);
                          for (int d = std::max(0, last); d >= 0; --d) {
                            if (inspectChip(d, role)) break;
                          }
                          done();
                        });
                      }});
  }
  // Several iterations on the same batch, so the loss strip shows training.
  shots.append(Shot{QStringLiteral("stage-09-after-iterations"), [this](std::function<void()> done) {
                      EngineController* e = engine();
                      if (!e) return done();
                      auto more = std::make_shared<QMetaObject::Connection>();
                      auto finish = [this, more, done] {
                        disconnect(*more);
                        seekTo(static_cast<int>(info_.plan.size()) - 1, done);
                      };
                      *more = connect(e, &EngineController::iterationCompleted, this, [e, finish] {
                        if (e->losses().size() >= kShotIterations) finish();
                        else e->requestIteration();
                      });
                      connect(e, &EngineController::engineError, this, finish, Qt::SingleShotConnection);
                      if (e->losses().size() >= kShotIterations) finish();
                      else e->requestIteration();
                    }});
  return shots;
}

void IterationPage::applyAndWait(const AppSettings& settings, std::function<void()> done) {
  EngineController* e = engine();
  if (!e || context()->settings() == settings) {
    done();
    return;
  }
  auto conn = std::make_shared<QMetaObject::Connection>();
  auto fail = std::make_shared<QMetaObject::Connection>();
  auto finish = [conn, fail, done] {
    QObject::disconnect(*conn);
    QObject::disconnect(*fail);
    done();
  };
  *conn = connect(e, &EngineController::iterationStarted, this, finish);
  *fail = connect(e, &EngineController::engineError, this, finish);
  context()->setSettings(settings);
  resumeStage_.reset();  // the screenshots seek on their own; the learner's place is not kept here
}

void IterationPage::seekInIteration(int iteration, std::function<int()> pick, std::function<void()> done) {
  if (!haveInfo_ || !errorText().isEmpty()) return done();
  if (info_.iteration >= iteration) return seekTo(pick(), std::move(done));
  // Run to the end of this iteration, then one step into the next.
  seekTo(static_cast<int>(info_.plan.size()) - 1, [this, iteration, pick, done] {
    EngineController* e = engine();
    if (!e || !atEnd()) return done();
    auto shown = std::make_shared<QMetaObject::Connection>();
    auto fail = std::make_shared<QMetaObject::Connection>();
    auto again = [this, shown, fail, iteration, pick, done](bool ok) {
      QObject::disconnect(*shown);
      QObject::disconnect(*fail);
      if (!ok) return done();
      seekInIteration(iteration, pick, done);
    };
    *shown = connect(this, &IterationPage::stageShown, this, [again](int) { again(true); });
    *fail = connect(e, &EngineController::engineError, this, [again](const QString&) { again(false); });
    stepForward();
  });
}

void IterationPage::freezeNextStage(double fraction, std::function<void()> done) {
  setSpeed(1.0);
  connect(
      this, &IterationPage::stageShown, this,
      [this, fraction, done](int) {
        if (ddpScene_->animating()) ddpScene_->pauseAnimationsAt(static_cast<int>(fraction * ddpScene_->totalAnimationMs()));
        else if (scene_->animating()) scene_->pauseAnimationsAt(static_cast<int>(fraction * scene_->duration()));
        done();
      },
      Qt::SingleShotConnection);
  stepForward();
}

QList<Page::Shot> IterationPage::ddpScreenshots() {
  using K = dpv::StageKind;
  // (iteration, stage kind, which of its layers: 0 first, 1 middle, 2 last);
  // frozen > 0: the stage's flights, stopped at that share of their animation (at 1x).
  struct Flying {
    const char* name;
    int iteration;
    K kind;
    int which;
    double frozen;
  };
  const Flying picks[] = {{"construct", 1, K::Construct, 0, 0},
                          {"sample-flying", 1, K::Sample, 0, 0.45},
                          {"sample", 1, K::Sample, 0, 0},
                          {"forward", 1, K::Forward, 1, 0},
                          {"loss", 1, K::Loss, 0, 0},
                          {"backward-one-bucket", 1, K::Backward, 2, 0},
                          {"finalize", 1, K::Finalize, 0, 0},
                          {"step", 1, K::Step, 0, 0},
                          {"broadcast-buffers-flying", 2, K::BroadcastBuffers, 0, 0.5},
                          {"broadcast-buffers", 2, K::BroadcastBuffers, 0, 0},
                          {"backward-first-ring", 2, K::Backward, 0, 0.7},
                          {"backward-first", 2, K::Backward, 0, 0},
                          {"backward-middle", 2, K::Backward, 1, 0},
                          {"backward-last", 2, K::Backward, 2, 0},
                          {"finalize-averaged-landing", 2, K::Finalize, 0, 0.55},
                          {"finalize-averaged", 2, K::Finalize, 0, 0}};
  QList<Shot> shots;
  shots.append(Shot{QStringLiteral("ddp-00-start"), [this](std::function<void()> done) {
                      AppSettings s = context()->settings();
                      s.strategy = dpv::StrategyKind::DistributedDataParallel;
                      s.preset = QStringLiteral("mlp-bn");
                      applyAndWait(s, [this, done] { seekTo(-1, done); });
                    }});
  int n = 1;
  for (const Flying& p : picks) {
    const QString name = QStringLiteral("ddp-%1-%2").arg(n++, 2, 10, QLatin1Char('0')).arg(QLatin1String(p.name));
    shots.append(Shot{name, [this, p](std::function<void()> done) {
                        auto pick = [this, p] { return planIndexOf(p.kind, p.which); };
                        if (p.frozen <= 0) {
                          // The inspector opened on what the stage is about (rank 2: it has a padding repeat).
                          return seekInIteration(p.iteration, pick, [this, p, done] {
                            switch (p.kind) {
                              case K::Sample: inspectDdpPart(DdpPart::Shard, 2); break;
                              case K::BroadcastBuffers: inspectDdpPart(DdpPart::Buffers, 2); break;
                              case K::Backward: inspectDdpPart(DdpPart::Bucket, 2, 0); break;
                              case K::Finalize: inspectDdpPart(DdpPart::Grad, 2); break;
                              case K::Step:
                              case K::Construct: inspectDdpPart(DdpPart::Params, 2); break;
                              default: break;
                            }
                            done();
                          });
                        }
                        // The stage before, then this one animated and frozen mid-flight.
                        seekInIteration(p.iteration, [pick] { return std::max(0, pick() - 1); },
                                        [this, p, done] { freezeNextStage(p.frozen, done); });
                      }});
  }
  return shots;
}

int IterationPage::planIndexOf(dpv::StageKind kind, int which) const {
  QList<int> matches;
  for (int i = 0; i < static_cast<int>(info_.plan.size()); ++i)
    if (info_.plan[static_cast<size_t>(i)].kind == kind) matches.append(i);
  if (matches.isEmpty()) return cursor_;
  return which == 0 ? matches.first() : which == 1 ? matches[matches.size() / 2] : matches.last();
}

QList<Page::Shot> IterationPage::zeroScreenshots() {
  using K = dpv::StageKind;
  using S = dpv::StrategyKind;
  // frozen > 0: the stage's flights stopped at that share; `which`: the first (0) or last (2) match.
  struct Pick {
    const char* name;
    S strategy;
    K kind;
    int which;
    double frozen;
  };
  const Pick picks[] = {{"zero2-gather-flying", S::Zero2, K::GatherParams, 0, 0.6},
                        {"zero2-gather", S::Zero2, K::GatherParams, 0, 0},
                        {"zero2-reduce-scatter-flying", S::Zero2, K::ReduceScatter, 0, 0.6},
                        {"zero2-step", S::Zero2, K::Step, 0, 0},
                        {"zero3-gather-backward", S::Zero3, K::GatherParams, 2, 0},
                        {"zero3-free", S::Zero3, K::FreeParams, 0, 0},
                        {"zero3-reduce-scatter", S::Zero3, K::ReduceScatter, 0, 0},
                        {"zero1-step", S::Zero1, K::Step, 0, 0},
                        {"zero1-broadcast-flying", S::Zero1, K::BroadcastParams, 0, 0.5}};
  QList<Shot> shots;
  int n = 1;
  for (const Pick& p : picks) {
    const QString name = QStringLiteral("zero-%1-%2").arg(n++, 2, 10, QLatin1Char('0')).arg(QLatin1String(p.name));
    shots.append(Shot{name, [this, p](std::function<void()> done) {
                        auto pick = [this, p] { return planIndexOf(p.kind, p.which); };
                        auto shoot = [this, p, pick, done] {
                          if (p.frozen <= 0) return seekInIteration(1, pick, done);
                          seekInIteration(1, [pick] { return std::max(0, pick() - 1); },
                                          [this, p, done] { freezeNextStage(p.frozen, done); });
                        };
                        AppSettings s = context()->settings();
                        if (s.strategy == p.strategy && s.preset == QLatin1String("mlp-bn")) return shoot();
                        s.strategy = p.strategy;
                        s.preset = QStringLiteral("mlp-bn");
                        applyAndWait(s, shoot);
                      }});
  }
  return shots;
}

}  // namespace gui
