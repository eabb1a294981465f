#include "gui/ring/page.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>

#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/common/ui_helpers.h"
#include "gui/common/lesson_panel.h"
#include "gui/ring/ring_view.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "course/run_caption.h"
#include "course/sample_program.h"
#include "engine/device.h"

namespace gui {

namespace {

size_t ix(int i) { return static_cast<size_t>(i); }

QString bytesText(double b) {
  if (b >= 1e6) return QStringLiteral("%1 MB").arg(b / 1e6, 0, 'f', 2);
  if (b >= 1e4) return QStringLiteral("%1 kB").arg(b / 1e3, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
}

QString microseconds(double s) { return QStringLiteral("%1 µs").arg(s * 1e6, 0, 'f', 1); }

QString valueList(const std::vector<double>& v, size_t n = 3) {
  QStringList parts;
  for (size_t i = 0; i < std::min(n, v.size()); ++i) parts << shortValue(v[i]);
  if (v.size() > n) parts << QStringLiteral("…");
  return parts.join(QStringLiteral(", "));
}

// The result of one run on the worker thread: the demo, or the engine's error.
struct RingRun {
  std::shared_ptr<const dpv::course::RingDemo> demo;
  QString error;
};

QTextBrowser* panel(QWidget* parent) {
  auto* t = new QTextBrowser(parent);
  t->setFrameShape(QFrame::NoFrame);
  t->setOpenLinks(false);
  // The panels scroll when short of room; the page must fit the window with the slider in view.
  t->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  t->setMinimumHeight(56);
  return t;
}

}  // namespace

RingPage::RingPage(AppContext* context, QWidget* parent) : Page(context, parent) {
  setFocusPolicy(Qt::StrongFocus);
  addKey({QKeyCombination(Qt::Key_Right), QKeyCombination(Qt::Key_Space)}, tr("next step of the ring"),
         [this](int) { setFrame(frame() + 1); });
  addKey({QKeyCombination(Qt::Key_Left), QKeyCombination(Qt::Key_Backspace)}, tr("previous step"),
         [this](int) { setFrame(frame() - 1); });
  addKey({QKeyCombination(Qt::Key_Home)}, tr("first step"), [this](int) { setFrame(0); });
  addKey({QKeyCombination(Qt::Key_End)}, tr("last step"), [this](int) { setFrame(frameCount() - 1); });
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(12, 12, 12, 12);
  outer->setSpacing(8);

  auto* caption = new QLabel(tr("DDP's all-reduce of one real gradient bucket on the engine's in-process ring: a "
                                "reduce-scatter of W−1 steps, then an all-gather of W−1 steps. Every number is the "
                                "engine's, step by step."),
                             this);
  caption->setWordWrap(true);
  outer->addWidget(caption);
  runCaption_ = new QLabel(this);
  runCaption_->setObjectName(QStringLiteral("runCaption"));
  runCaption_->setWordWrap(true);
  runCaption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(runCaption_);

  auto* controls = new QHBoxLayout();
  controls->addWidget(new QLabel(tr("Model"), this));
  preset_ = new QComboBox(this);
  preset_->addItem(tr("SimpleModel (Linear 10→2, 22 values)"), QStringLiteral("simple"));
  preset_->addItem(tr("MLP with BatchNorm (mlp-bn)"), QStringLiteral("mlp-bn"));
  controls->addWidget(preset_);
  controls->addSpacing(12);
  controls->addWidget(new QLabel(tr("Ranks (W)"), this));
  ranks_ = new QSpinBox(this);
  ranks_->setRange(2, 8);
  ranks_->setValue(4);
  controls->addWidget(ranks_);
  runButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run the ring"), this);
  runButton_->setObjectName(QStringLiteral("primary"));
  runButton_->setToolTip(tr("Runs one DDP iteration on cpu:W in-process ranks and one DataParallel iteration, same batch"));
  controls->addWidget(runButton_);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("hintLabel"));
  status_->setWordWrap(true);
  controls->addWidget(status_, 1);
  outer->addLayout(controls);

  auto* body = new QHBoxLayout();
  auto* left = new QWidget(this);
  auto* ll = new QVBoxLayout(left);
  ll->setContentsMargins(0, 0, 0, 0);
  view_ = new RingView(left);
  ll->addWidget(view_, 1);
  auto* scrub = new QHBoxLayout();
  back_ = new QPushButton(QIcon(QStringLiteral(":/icons/step-back.svg")), QString(), left);
  back_->setToolTip(tr("Previous step (Left)"));
  forward_ = new QPushButton(QIcon(QStringLiteral(":/icons/step.svg")), QString(), left);
  forward_->setToolTip(tr("Next step (Right)"));
  slider_ = new QSlider(Qt::Horizontal, left);
  slider_->setRange(0, 0);
  slider_->setPageStep(1);
  frameLabel_ = new QLabel(left);
  frameLabel_->setMinimumWidth(210);
  scrub->addWidget(back_);
  scrub->addWidget(slider_, 1);
  scrub->addWidget(forward_);
  scrub->addWidget(frameLabel_);
  ll->addLayout(scrub);
  body->addWidget(wrapInCard(tr("The ring, step by step"), left, this), 3);

  auto* right = new QWidget(this);
  right->setMinimumWidth(330);
  right->setMaximumWidth(440);
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(0, 0, 0, 0);
  step_ = panel(right);
  cost_ = panel(right);
  dp_ = panel(right);
  rl->addWidget(wrapInCard(tr("This step"), step_, right), 2);
  rl->addWidget(wrapInCard(tr("Bytes and time"), cost_, right), 2);
  rl->addWidget(wrapInCard(tr("DataParallel instead: reduce to GPU 0"), dp_, right), 3);
  lesson_ = new LessonPanel(right);
  lesson_->setLessonsDir(context->lessonsDir());
  lesson_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  lesson_->setMinimumHeight(56);
  lesson_->showLesson(QStringLiteral("ddp/ring"));
  rl->addWidget(wrapInCard(tr("The lesson"), lesson_, right), 3);
  body->addWidget(right, 2);
  outer->addLayout(body, 1);

  connect(runButton_, &QPushButton::clicked, this, &RingPage::run);
  connect(slider_, &QSlider::valueChanged, this, &RingPage::setFrame);
  connect(back_, &QPushButton::clicked, this, [this] { setFrame(frame() - 1); });
  connect(forward_, &QPushButton::clicked, this, [this] { setFrame(frame() + 1); });
  connect(context, &AppContext::themeChanged, this, &RingPage::applyTheme);
  connect(context, &AppContext::settingsChanged, this, &RingPage::followSettings);
  followSettings(context->settings());
  applyTheme();
  refreshPanels();
}

void RingPage::followSettings(const AppSettings& settings) {
  // The Iteration page's model, and its ranks when they are 2 to 8 CPU devices (the ring's range).
  const dpv::RunSpec run = runSpecFromSettings(settings);
  if (preset_->findData(settings.preset) < 0) preset_->addItem(settings.preset, settings.preset);
  preset_->setCurrentIndex(preset_->findData(settings.preset));
  try {
    const dpv::DeviceSpec devices = dpv::parse_device_spec(run.devices);
    if (devices.kind == dpv::DeviceKind::Cpu && devices.count >= 2 && devices.count <= 8) ranks_->setValue(devices.count);
  } catch (const dpv::Error&) {
    // A device spec the settings bar has not accepted yet: the page keeps its ranks.
  }
}

dpv::RunSpec RingPage::ringRun() const {
  dpv::RunSpec run = runSpecFromSettings(context()->settings());
  run.preset = preset_->currentData().toString().toStdString();
  run.devices = "cpu:" + std::to_string(ranks_->value());
  return run;
}

QString RingPage::runCaption() const { return runCaption_->text(); }

void RingPage::applyTheme() { view_->setTheme(context()->theme()); }

void RingPage::setWorldSize(int ranks) { ranks_->setValue(ranks); }

void RingPage::setPreset(const QString& preset) {
  const int i = preset_->findData(preset);
  if (i >= 0) preset_->setCurrentIndex(i);
}

int RingPage::frame() const { return view_->frame(); }
int RingPage::frameCount() const { return demo_ ? static_cast<int>(demo_->frames.size()) : 0; }

void RingPage::setFrame(int frame) {
  if (!demo_) return;
  view_->setFrame(frame);
  if (slider_->value() != view_->frame()) slider_->setValue(view_->frame());
  refreshPanels();
}

void RingPage::run() {
  EngineController* engine = context()->engine();
  if (!engine || running_) return;
  const dpv::RunSpec run = ringRun();
  const quint64 request = ++request_;
  running_ = true;
  error_.clear();
  runButton_->setEnabled(false);
  status_->setText(tr("running on the engine…"));
  const bool queued = engine->runJob(
      this,
      [run] {
        RingRun out;
        try {
          // The Iteration page's run (model, batch, seed, optimizer, DDP settings) on the page's ranks.
          dpv::course::RingDemoConfig config;
          config.run = run;
          out.demo = std::make_shared<const dpv::course::RingDemo>(dpv::course::run_ring_demo(config));
        } catch (const dpv::Error& e) {
          out.error = QString::fromStdString(e.full());
        } catch (const std::exception& e) {
          out.error = QString::fromStdString(e.what());
        }
        return out;
      },
      [this, request](RingRun out) {
        if (request != request_) return;
        running_ = false;
        runButton_->setEnabled(true);
        if (!out.demo) {
          error_ = out.error;
          status_->setText(out.error);
          emit failed(out.error);
          return;
        }
        showDemo(std::move(out.demo));
      });
  if (!queued) {
    running_ = false;
    runButton_->setEnabled(true);
    status_->setText(tr("the engine has stopped"));
  }
}

void RingPage::showDemo(std::shared_ptr<const dpv::course::RingDemo> demo) {
  demo_ = std::move(demo);
  const auto& d = *demo_;
  QStringList shards;
  for (auto n : d.shards) shards << QString::number(n);
  // Whose gradients: the run's description, and whether it is the Iteration page's (typed compare).
  // (RunSpec has no ==: a model spec does not compare; the app's runs name presets.)
  const dpv::RunSpec iterationRun = runSpecFromSettings(context()->settings());
  const dpv::RunSpec& shown = d.config.run;
  const bool same = shown.preset == iterationRun.preset && shown.devices == iterationRun.devices &&
                    shown.batch == iterationRun.batch && shown.seed == iterationRun.seed &&
                    shown.optimizer == iterationRun.optimizer && shown.sync_bn == iterationRun.sync_bn;
  runCaption_->setText(same
                           ? tr("Data: the Iteration page's run, iteration 1 (from the seed's weights): %1")
                                 .arg(QString::fromStdString(dpv::course::run_caption(d.config.run)))
                           : tr("Data: %1, iteration 1. <b>Not the Iteration page's run</b> (it runs %2): the model or "
                                "ranks were changed here.")
                                 .arg(QString::fromStdString(dpv::course::run_caption(d.config.run)),
                                      QString::fromStdString(dpv::course::run_caption(iterationRun))));
  status_->setText(tr("W = %1 ranks on cpu:%1, global batch %2 (shards %3), seed %4; bucket %5 of the first iteration")
                       .arg(d.world_size)
                       .arg(d.config.run.batch)
                       .arg(shards.join(QStringLiteral(", ")))
                       .arg(d.config.run.seed)
                       .arg(d.bucket));
  view_->setDemo(demo_);
  showDpPanel();
  slider_->setRange(0, frameCount() - 1);
  slider_->setValue(0);
  setFrame(0);
  emit demoShown();
}

QString RingPage::stepText() const { return step_->toPlainText(); }
QString RingPage::costText() const { return cost_->toPlainText(); }

// DataParallel's reduce of the same gradients: the same for every step of the ring, so it is
// written once per run, not on every step (setHtml lays the text out again).
void RingPage::showDpPanel() {
  if (!demo_) {
    dp_->clear();
    return;
  }
  const auto& d = *demo_;
  const auto& dp = d.dp;
  QString dpHtml = tr("Same model, seed and batch under DataParallel (%1 replicas), <b>grad %2</b> after the "
                      "backward:<table cellspacing=1>")
                       .arg(dp.replicas)
                       .arg(QString::fromStdString(dpv::course::program_parameter_name(d.config.run.preset, dp.param)));
  for (size_t j = 0; j < dp.replica_grads.size(); ++j)
    dpHtml += tr("<tr><td>GPU %1%2</td><td>%3</td></tr>")
                  .arg(j)
                  .arg(j < dp.chunks.size() ? tr(" (%1 rows)").arg(dp.chunks[j]) : QString())
                  .arg(valueList(dp.replica_grads[j]));
  dpHtml += tr("</table>ReduceGrads adds them all on GPU 0: <b>%1</b>. GPU 0 receives every other replica's whole "
               "gradients, %2 in %3 (%4), and only GPU 0 ends up with the sum.")
                .arg(valueList(dp.reduced))
                .arg(bytesText(static_cast<double>(dp.bytes_to_device0)))
                .arg(microseconds(dp.seconds))
                .arg(QString::fromStdString(dp.transport));
  const auto& last = d.frames.back().values[0];
  dpHtml += tr("<br>The ring's result for the same values, on every rank: <b>%1</b>.").arg(valueList(last));
  dp_->setHtml(dpHtml);
}

void RingPage::refreshPanels() {
  const bool has = demo_ != nullptr;
  back_->setEnabled(has && frame() > 0);
  forward_->setEnabled(has && frame() < frameCount() - 1);
  slider_->setEnabled(has);
  if (!has) {
    frameLabel_->setText(QString());
    step_->setHtml(tr("<p>Run the ring to see one real gradient bucket all-reduced, step by step.</p>"));
    cost_->clear();
    return;
  }
  const auto& d = *demo_;
  const int world = d.world_size, f = frame();
  const auto& fr = d.frames[ix(f)];
  frameLabel_->setText(f == 0 ? tr("start (step 0 of %1)").arg(frameCount() - 1)
                              : tr("%1 %2 of %3 (step %4 of %5)")
                                    .arg(QString::fromStdString(fr.phase))
                                    .arg(fr.step + 1)
                                    .arg(world - 1)
                                    .arg(f)
                                    .arg(frameCount() - 1));

  QString html;
  if (f == 0) {
    html = tr("<p><b>Start.</b> Each rank's bucket holds <i>its own</i> gradients divided by W = %1: DDP divides "
              "before it sums, so the sum is the mean over ranks. The ring cuts the bucket's %2 values into %1 "
              "chunks; each cell shows a chunk's first value.</p>")
               .arg(world)
               .arg(d.numel);
  } else {
    const auto& prev = d.frames[ix(f - 1)];
    const bool reduce = fr.phase == "reduce-scatter";
    html = reduce ? tr("<p><b>Reduce-scatter, step %1 of %2.</b> Every rank sends one chunk to the next rank, which "
                       "<b>adds</b> it to its own copy of that chunk.</p>")
                        .arg(fr.step + 1)
                        .arg(world - 1)
                  : tr("<p><b>All-gather, step %1 of %2.</b> Every rank passes a <b>finished</b> chunk on; the next "
                       "rank overwrites its copy with it.</p>")
                        .arg(fr.step + 1)
                        .arg(world - 1);
    html += QStringLiteral("<table cellspacing=2>");
    for (const auto& m : fr.moves) {
      const auto first = static_cast<size_t>(d.chunk_offsets[ix(m.chunk)]);
      const double mine = prev.values[ix(m.to)][first], sent = prev.values[ix(m.from)][first], now = fr.values[ix(m.to)][first];
      const QString what = reduce ? tr("%1 + %2 = <b>%3</b>").arg(shortValue(mine), shortValue(sent), shortValue(now))
                                  : tr("copies <b>%1</b>").arg(shortValue(now));
      html += tr("<tr><td>%1 → %2</td><td>chunk %3</td><td>%4</td></tr>").arg(m.from).arg(m.to).arg(m.chunk).arg(what);
    }
    html += QStringLiteral("</table>");
    if (reduce && fr.step == world - 2)
      html += tr("<p>Every rank now holds one <b>complete</b> chunk (the sum over all %1 ranks).</p>").arg(world);
    if (!reduce && fr.step == world - 2) html += tr("<p>Every rank holds the whole summed bucket: the all-reduce is done.</p>");
  }
  step_->setHtml(html);

  size_t stepBytes = 0;
  double stepSeconds = 0;
  for (const auto& m : fr.moves) {
    stepBytes = std::max(stepBytes, m.bytes);
    stepSeconds = std::max(stepSeconds, m.seconds);
  }
  QStringList params;
  // Named as the Iteration page's code panel names them (SimpleModel: linear.weight).
  for (const auto& p : d.params) params << QString::fromStdString(dpv::course::program_parameter_name(d.config.run.preset, p));
  QString cost = tr("Bucket %1 (%2): %3 values, <b>%4</b>.<br>")
                     .arg(d.bucket)
                     .arg(params.join(QStringLiteral(", ")))
                     .arg(d.numel)
                     .arg(bytesText(static_cast<double>(d.bytes)));
  if (f > 0)
    cost += tr("This step: each rank sends one chunk, up to %1; slowest rank %2.<br>").arg(bytesText(static_cast<double>(stepBytes)), microseconds(stepSeconds));
  cost += tr("Per rank over 2(W−1) = %1 steps the engine sent <b>%2</b>; the ring's cost formula "
             "2(W−1)/W × bytes = <b>%3</b>.<br>Measured on rank 0: <b>%4</b> (algbw %5 GB/s, busbw %6 GB/s).")
              .arg(2 * (world - 1))
              .arg(bytesText(static_cast<double>(d.bytes_sent_per_rank)))
              .arg(bytesText(d.formula_bytes))
              .arg(microseconds(d.seconds))
              .arg(d.algbw, 0, 'g', 3)
              .arg(d.busbw, 0, 'g', 3);
  cost_->setHtml(cost);

}

QList<Page::Shot> RingPage::screenshots() {
  // Runs the ring on `ranks` ranks (unless it is already shown) and shows frame `frameWanted`
  // (negative: from the end).
  auto shot = [this](int ranks, int frameWanted) {
    return [this, ranks, frameWanted](std::function<void()> done) {
      auto finished = std::make_shared<bool>(false);
      auto finish = [this, done, finished, frameWanted] {
        if (*finished) return;
        *finished = true;
        if (demo_) setFrame(frameWanted < 0 ? frameCount() + frameWanted : frameWanted);
        done();
      };
      if (demo_ && demo_->world_size == ranks && demo_->config.run.preset == "simple") {
        finish();
        return;
      }
      auto once = std::make_shared<QMetaObject::Connection>();
      auto fail = std::make_shared<QMetaObject::Connection>();
      *once = connect(this, &RingPage::demoShown, this, [once, fail, finish] {
        QObject::disconnect(*once);
        QObject::disconnect(*fail);
        finish();
      });
      *fail = connect(this, &RingPage::failed, this, [once, fail, finish] {
        QObject::disconnect(*once);
        QObject::disconnect(*fail);
        finish();
      });
      setPreset(QStringLiteral("simple"));
      setWorldSize(ranks);
      run();
    };
  };
  // Mid reduce-scatter (partial sums of two ranks), the last all-gather step, and eight ranks.
  return {Shot{QString(), shot(4, 2)}, Shot{QStringLiteral("all-gather"), shot(4, -1)},
          Shot{QStringLiteral("8-ranks"), shot(8, 5)}};
}

}  // namespace gui
