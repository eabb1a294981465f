#include "gui/compare/page.h"

#include <QBoxLayout>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "engine/error.h"
#include "gui/common/context.h"
#include "gui/common/ui_helpers.h"
#include "gui/compare/charts.h"
#include "gui/common/lesson_panel.h"
#include "gui/ring/ring_view.h"
#include "gui/runtime/engine_controller.h"
#include "course/run_caption.h"

namespace gui {

namespace {

struct CompareRun {
  dpv::course::CompareResult result;
  bool ok = false;
  QString error;
};

QString ms(double seconds) { return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', 2); }

QString valueList(const std::vector<double>& v) {
  QStringList parts;
  for (double x : v) parts << shortValue(x);
  return parts.join(QStringLiteral(", "));
}

QSpinBox* spin(QWidget* parent, int lo, int hi, int value) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  return s;
}

}  // namespace

ComparePage::ComparePage(AppContext* context, QWidget* parent) : Page(context, parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(12, 12, 12, 12);
  outer->setSpacing(6);

  auto* controls = new QHBoxLayout();
  controls->addWidget(new QLabel(tr("Model"), this));
  preset_ = new QComboBox(this);
  preset_->addItem(tr("mlp-bn (BatchNorm)"), QStringLiteral("mlp-bn"));
  preset_->addItem(tr("SimpleModel"), QStringLiteral("simple"));
  preset_->addItem(tr("MNIST MLP"), QStringLiteral("mnist-mlp"));
  controls->addWidget(preset_);
  controls->addWidget(new QLabel(tr("devices"), this));
  devices_ = spin(this, 2, 8, 4);
  controls->addWidget(devices_);
  controls->addWidget(new QLabel(tr("batch"), this));
  batch_ = spin(this, 2, 4096, 64);
  batch_->setToolTip(tr("The global batch: DataParallel scatters it, DDP's DistributedSampler shards it. Changed "
                        "while the comparison trains, the next iteration uses it: no restart"));
  controls->addWidget(batch_);
  controls->addWidget(new QLabel(tr("iterations"), this));
  iterations_ = spin(this, 1, 500, 20);
  controls->addWidget(iterations_);
  controls->addWidget(new QLabel(tr("speed-up to"), this));
  controls->setSpacing(4);
  sweep_ = spin(this, 0, 8, 8);
  
  sweep_->setToolTip(tr("Times one device, DataParallel and DDP on 1..N devices (0: skip)"));
  controls->addWidget(sweep_);
  runButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run"), this);
  runButton_->setObjectName(QStringLiteral("primary"));
  runButton_->setToolTip(tr("Trains one device, DataParallel and DDP side by side on the engine"));
  controls->addWidget(runButton_);
  controls->addStretch(1);
  outer->addLayout(controls);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("hintLabel"));
  status_->setWordWrap(true);
  outer->addWidget(status_);
  runCaption_ = new QLabel(this);
  runCaption_->setObjectName(QStringLiteral("runCaption"));
  runCaption_->setWordWrap(true);
  runCaption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(runCaption_);
  // When the simulated devices share the machine's cores the time charts mislead: said large, first.
  coresBanner_ = new QLabel(this);
  coresBanner_->setObjectName(QStringLiteral("notice"));  // the theme's warning box, light and dark
  coresBanner_->setWordWrap(true);
  coresBanner_->setTextFormat(Qt::RichText);
  QFont bannerFont = coresBanner_->font();
  bannerFont.setPointSizeF(bannerFont.pointSizeF() * 1.15);
  coresBanner_->setFont(bannerFont);
  coresBanner_->setVisible(false);
  outer->addWidget(coresBanner_);

  note_ = new QLabel(tr("One device, DataParallel and DDP from the same start on the same batches. Press “Run”."), this);
  note_->setWordWrap(true);
  note_->setTextFormat(Qt::RichText);
  outer->addWidget(note_);

  // The charts, and beside them the lesson that says what to look for in them.
  auto* body = new QBoxLayout(QBoxLayout::LeftToRight);
  body_ = body;
  charts_ = new CompareCharts(this);
  body->addWidget(charts_, 1);
  lesson_ = new LessonPanel(this);
  lesson_->setLessonsDir(context->lessonsDir());
  lesson_->showLesson(QStringLiteral("ddp/dp-vs-ddp"));
  lessonCard_ = wrapInCard(tr("The lesson"), lesson_, this);
  body->addWidget(lessonCard_);
  outer->addLayout(body, 1);
  placeLesson();

  sumMean_ = new QLabel(this);
  sumMean_->setWordWrap(true);
  sumMean_->setTextFormat(Qt::RichText);
  sumMean_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(wrapInCard(tr("Sum versus mean: one gradient element after the first iteration"), sumMean_, this));

  connect(runButton_, &QPushButton::clicked, this, &ComparePage::run);
  // While the three train, a new batch goes to the run (its next iteration) instead of waiting.
  connect(batch_, &QSpinBox::valueChanged, this, [this](int rows) {
    if (!running_) return;
    liveBatch_->store(rows);
    status_->setText(tr("training all three on the engine… batch %1 from the next iteration on (no restart)").arg(rows));
  });
  connect(context, &AppContext::themeChanged, charts_, &CompareCharts::applyTheme);
}

// Beside the charts the lesson needs about 260 px, which a 1024-pixel window cannot spare: there
// the charts keep the whole width (three charts a row, titles whole) and the lesson reads below
// them at full width, a few lines high, instead of one word a line.
constexpr int kLessonBesideMinWidth = 1180;

bool ComparePage::lessonBelowCharts() const { return body_->direction() == QBoxLayout::TopToBottom; }

void ComparePage::placeLesson() {
  const bool below = width() < kLessonBesideMinWidth;
  body_->setDirection(below ? QBoxLayout::TopToBottom : QBoxLayout::LeftToRight);
  if (below) {
    lessonCard_->setMinimumWidth(0);
    lessonCard_->setMaximumWidth(QWIDGETSIZE_MAX);
    lessonCard_->setMinimumHeight(150);
    lessonCard_->setMaximumHeight(220);
  } else {
    lessonCard_->setMinimumWidth(200);
    lessonCard_->setMaximumWidth(290);
    lessonCard_->setMinimumHeight(0);
    lessonCard_->setMaximumHeight(QWIDGETSIZE_MAX);
  }
}

void ComparePage::resizeEvent(QResizeEvent* event) {
  Page::resizeEvent(event);
  placeLesson();
}

// Not runSpecFromSettings: the comparison shares only the seed with the app's run. Its model,
// devices and batch are this page's controls, and its lr, BatchNorm mode and strategies its own
// (compare_run_defaults), so the settings bar's lr, SyncBatchNorm or DDP never change it.
dpv::course::CompareConfig ComparePage::config() const {
  dpv::course::CompareConfig c;
  c.run.preset = preset_->currentData().toString().toStdString();
  c.run.devices = "cpu:" + std::to_string(devices_->value());
  c.run.batch = batch_->value();
  c.iterations = iterations_->value();
  c.max_speedup_devices = sweep_->value();
  c.run.seed = context()->settings().seed;
  return c;
}

void ComparePage::setConfig(const dpv::course::CompareConfig& c) {
  const int i = preset_->findData(QString::fromStdString(c.run.preset));
  if (i >= 0) preset_->setCurrentIndex(i);
  devices_->setValue(dpv::course::compare_world_size(c));
  batch_->setValue(static_cast<int>(c.run.batch));
  iterations_->setValue(c.iterations);
  sweep_->setValue(c.max_speedup_devices);
}

void ComparePage::run() {
  EngineController* engine = context()->engine();
  if (!engine || running_) return;
  const dpv::course::CompareConfig c = config();
  liveBatch_->store(c.run.batch);
  const std::shared_ptr<std::atomic<int64_t>> liveBatch = liveBatch_;
  const quint64 request = ++request_;
  running_ = true;
  error_.clear();
  runButton_->setEnabled(false);
  status_->setText(tr("training all three on the engine… (a new batch applies at the next iteration)"));
  const std::atomic<bool>* stop = engine->stopFlag();
  const bool queued = engine->runJob(
      this,
      [c, stop, liveBatch] {
        CompareRun out;
        try {
          out.result = dpv::course::run_comparison(c, {}, [stop] { return !stop->load(); }, liveBatch.get());
          out.ok = true;
        } catch (const dpv::Error& e) {
          out.error = QString::fromStdString(e.full());
        } catch (const std::exception& e) {
          out.error = QString::fromStdString(e.what());
        }
        return out;
      },
      [this, request](CompareRun out) {
        if (request != request_) return;
        running_ = false;
        runButton_->setEnabled(true);
        if (!out.ok) {
          error_ = out.error;
          status_->setText(out.error);
          emit failed(out.error);
          return;
        }
        showResult(out.result);
      });
  if (!queued) {
    running_ = false;
    runButton_->setEnabled(true);
    status_->setText(tr("the engine has stopped"));
  }
}

QString ComparePage::sumMeanText() const { return sumMean_->text(); }
QString ComparePage::runCaption() const { return runCaption_->text(); }
QString ComparePage::coresBannerText() const { return coresBanner_->isHidden() ? QString() : coresBanner_->text(); }

QString ComparePage::dataText(const dpv::course::CompareResult& r) {
  const QString changed = !r.batch_sizes.empty() && r.batch_sizes.front() != r.batch_sizes.back()
                              ? tr("The global batch went from %1 to %2 while it trained (changed here, taken at the next "
                                   "iteration). ").arg(r.batch_sizes.front()).arg(r.batch_sizes.back())
                              : QString();
  return changed + tr("<b>The data:</b> each of the %1 iterations trains on a <b>new random batch</b> (seeds %2 to %3), the "
            "same one for all three at that step. A loss is that batch's loss, so it moves from batch to batch "
            "(one device: %4 to %5) even while training goes well: compare the three at the same step. ")
      .arg(r.batches)
      .arg(r.first_batch_seed)
      .arg(r.first_batch_seed + static_cast<quint64>(std::max(0, r.batches - 1)))
      .arg(shortValue(r.loss_low), shortValue(r.loss_high));
}

QString ComparePage::coresText(const dpv::course::CompareResult& r) {
  if (!r.threads_share_cores()) return QString();
  const unsigned free = r.cores_for_devices();
  QString text = r.cores_taken()
                     ? tr("⚠ <b>This machine cannot show a speed-up beyond %1× now: other programs kept %2 of its %3 CPU "
                          "cores busy.</b> Up to %4 simulated devices ran as threads on the %1 core%5 left, so at most %1 "
                          "computed at once and the rest waited for a core.")
                           .arg(free).arg(r.hardware_threads - free).arg(r.hardware_threads).arg(r.most_devices)
                           .arg(free == 1 ? QString() : QStringLiteral("s"))
                     : tr("⚠ <b>These times measure threads sharing %1 CPU hardware thread%2, not GPUs: no speed-up beyond "
                          "%1× can show.</b> Up to %3 simulated devices run as %3 threads here, so at most %1 compute at "
                          "once and the rest wait for a core.")
                           .arg(free)
                           .arg(free == 1 ? QString() : QStringLiteral("s"))
                           .arg(r.most_devices);
  if (r.ddp_slower())
    text += tr(" <b>That is why DDP looks slower here</b> (%1 a step against DataParallel's %2): every DDP rank runs a "
               "whole forward and backward and meets the others in each bucket all-reduce, so ranks waiting for a "
               "core hold up the rest. On real GPUs each rank has its own device and DDP is the faster one, as the "
               "lesson says.")
                .arg(ms(r.ddp.steady.total), ms(r.dp.steady.total));
  return text;
}
QString ComparePage::noteText() const { return note_->text(); }

void ComparePage::showResult(const dpv::course::CompareResult& r) {
  result_ = r;
  hasResult_ = true;
  const auto& c = r.config;
  const int world = dpv::course::compare_world_size(c);
  QStringList dpRows, ddpRows;
  for (auto n : r.dp.rows) dpRows << QString::number(n);
  for (auto n : r.ddp.rows) ddpRows << QString::number(n);
  status_->setText(tr("%1, cpu:%2, global batch %3 (DataParallel chunks %4; DDP shards %5), %6 iterations, seed %7, lr %8")
                       .arg(QString::fromStdString(c.run.preset))
                       .arg(world)
                       .arg(c.run.batch)
                       .arg(dpRows.join(QStringLiteral(", ")), ddpRows.join(QStringLiteral(", ")))
                       .arg(c.iterations)
                       .arg(c.run.seed)
                       .arg(c.run.optimizer.lr));

  QString note = r.has_batchnorm
                     ? tr("<b>Why DP and DDP drift from one device:</b> this model has BatchNorm, and under both each "
                          "device normalises its own chunk with its own batch statistics, not the whole batch's, so "
                          "the gradients differ and the parameters drift apart (SyncBatchNorm would share the statistics). ")
                     : tr("<b>No BatchNorm:</b> DataParallel and DDP compute one device's gradients; what is left in "
                          "the difference chart is float rounding from adding in a different order. ");
  if (r.ddp_padding > 0)
    note += tr("DistributedSampler repeated %1 sample(s) so every rank gets an equal shard, so DDP also saw a slightly "
               "different batch. ")
                .arg(r.ddp_padding);
  if (!r.ddp.parts.empty())
    note += tr("Time bars: mean of the iterations after the first. DataParallel replicates every step (%1); DDP "
               "broadcast rank 0's state once, in its first iteration (%2). DDP's all-reduces took %3 on rank 0, "
               "overlapping the backward; %4 was left waiting. Measured on %5 free of this machine's %6 hardware threads.")
                .arg(ms(r.dp.steady.replicate), ms(r.ddp.parts.front().replicate), ms(r.ddp.steady.overlapped),
                     ms(r.ddp.steady.communication))
                .arg(r.cores_for_devices())
                .arg(r.hardware_threads);
  note_->setText(dataText(r) + note);
  runCaption_->setText(tr("Data: %1").arg(QString::fromStdString(dpv::course::run_caption(c.run, 0, "one device, DataParallel and DDP"))));
  coresBanner_->setText(coresText(r));
  coresBanner_->setVisible(!coresBanner_->text().isEmpty());

  const auto& s = r.sum_mean;
  sumMean_->setText(
      tr("<b>grad %1</b>, first element. <b>One device:</b> %2 (the gradient of the whole batch's mean loss).<br>"
         "<b>DataParallel:</b> every replica differentiates the <i>whole-batch</i> mean loss on its own chunk: %3; "
         "ReduceGrads <b>sums</b> them on GPU 0 → <b>%4</b>.<br>"
         "<b>DDP:</b> every rank differentiates <i>its own shard's</i> mean loss, and DDP divides by W = %5 before the "
         "all-reduce: %6; the ring sums those, which is the <b>mean</b> of the ranks' gradients → <b>%7</b>.")
          .arg(QString::fromStdString(s.param))
          .arg(shortValue(s.one_device))
          .arg(valueList(s.dp_replicas))
          .arg(shortValue(s.dp_reduced))
          .arg(world)
          .arg(valueList(s.ddp_bucket))
          .arg(shortValue(s.ddp_reduced)) +
      (r.has_batchnorm ? tr(" <i>Here the three differ because every device's BatchNorm normalised its own rows; with "
                            "SimpleModel (no BatchNorm) they agree.</i>")
                       : tr(" <i>Without BatchNorm all three agree: the sum of whole-batch-mean gradients and the mean "
                            "of per-shard-mean gradients are the same number.</i>")));
  charts_->showResult(r);
  emit resultShown();
}

QList<Page::Shot> ComparePage::screenshots() {
  return {Shot{QString(), [this](std::function<void()> done) {
                 if (hasResult_) return done();
                 whenRunEnds(this, done);
                 run();
               }}};
}

}  // namespace gui
