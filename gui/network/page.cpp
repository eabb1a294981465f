#include "gui/network/page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "engine/error.h"
#include "course/lesson_template.h"
#include "course/lessons.h"
#include "course/network_facts.h"
#include "course/network_real.h"
#include "engine/model_spec.h"
#include "gui/common/context.h"
#include "gui/common/ui_helpers.h"
#include "gui/network/real_link.h"
#include "gui/network/timeline_chart.h"

namespace gui {

namespace {

// Steps per point: the first dpv::netmodel::kWarmupSteps are left out of the summary.
constexpr int kSteps = 6;
constexpr int64_t kBatch = 64;

struct Rate {
  const char* label;
  double bits_per_s;
};
constexpr Rate kRates[] = {{"10 Mbit/s", 10e6}, {"100 Mbit/s", 100e6}, {"1 Gbit/s", 1e9}, {"10 Gbit/s", 10e9}};

NetworkWorker::Runner runnerOrDefault(NetworkWorker::Runner runner) {
  if (runner) return runner;
  return [](const dpv::course::NetworkLabSetup& setup, const dpv::netmodel::Link& link) {
    return dpv::course::run_simulated_network_point(setup, link);
  };
}

QLabel* wrappedLabel(QWidget* parent, const QString& objectName, Qt::TextFormat format = Qt::PlainText) {
  auto* label = new QLabel(parent);
  label->setObjectName(objectName);
  label->setWordWrap(true);
  label->setTextFormat(format);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return label;
}

QString msText(double seconds) { return QString::number(seconds * 1e3, 'f', 1) + QStringLiteral(" ms"); }

}  // namespace

NetworkPage::NetworkPage(AppContext* context, QWidget* parent, NetworkWorker::Runner runner,
                         std::optional<dpv::course::RealLinkFacts> facts)
    : Page(context, parent),
      facts_(facts ? std::move(*facts) : findRealLinkFacts()),
      worker_(QStringLiteral("network lab"), runnerOrDefault(std::move(runner)), facts_, &generation_) {
  NetworkWorker::registerTypes();
  setObjectName(QStringLiteral("network"));
  // The page scrolls: at 1024x640 the controls, the figures and a four-rank timeline do not all fit.
  QVBoxLayout* layout = makeScrollingPage(this, scroll_);
  layout->addWidget(buildLinkControls());
  layout->addWidget(buildRunControls());
  layout->addWidget(buildBody(), 1);

  NetworkWorker* worker = worker_.worker();
  connect(this, &NetworkPage::runRequested, worker, &NetworkWorker::run);
  connect(worker, &NetworkWorker::finished, this, &NetworkPage::onFinished);
  connect(worker, &NetworkWorker::failed, this, &NetworkPage::onFailed);
  connect(this, &NetworkPage::stopRequested, worker, &NetworkWorker::stop);
  connect(worker, &NetworkWorker::stopped, this, &NetworkPage::onStopped);
  connect(worker, &NetworkWorker::realLabStarted, this, &NetworkPage::onRealLabStarted);
  worker_.start();
  showNextRun();
}

NetworkPage::~NetworkPage() {
  generation_.next();  // a request still queued is skipped; one under way finishes and is dropped
  worker_.stop(&NetworkWorker::shutdown);  // the lab's child gets SIGTERM and is waited for
}

QWidget* NetworkPage::buildLinkControls() {
  auto* box = new QWidget(this);
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(new QLabel(tr("Link rate"), box));
  rate_ = new QComboBox(box);
  for (const Rate& r : kRates) rate_->addItem(QString::fromLatin1(r.label), r.bits_per_s);
  rate_->setCurrentIndex(2);  // 1 Gbit/s: the buckets and the backward both show
  rate_->setToolTip(tr("The link's bandwidth in each direction (tc's rate on a real link)"));
  row->addWidget(rate_);
  row->addWidget(new QLabel(tr("one-way delay"), box));
  delay_ = new QDoubleSpinBox(box);
  delay_->setRange(0, 20);
  delay_->setSingleStep(0.5);
  delay_->setDecimals(1);
  delay_->setSuffix(tr(" ms"));
  delay_->setValue(1);
  delay_->setToolTip(tr("Every message pays it once (alpha): a ring all-reduce sends 2(W-1) messages per bucket"));
  row->addWidget(delay_);
  row->addWidget(new QLabel(tr("hook"), box));
  hook_ = new QComboBox(box);
  hook_->addItem(tr("none (DDP's all-reduce)"), static_cast<int>(dpv::CommHookKind::None));
  hook_->addItem(QStringLiteral("allreduce_hook"), static_cast<int>(dpv::CommHookKind::AllReduce));
  hook_->addItem(QStringLiteral("fp16_compress_hook"), static_cast<int>(dpv::CommHookKind::Fp16Compress));
  hook_->addItem(QStringLiteral("powerSGD_hook (rank 1)"), static_cast<int>(dpv::CommHookKind::PowerSgd));
  hook_->setToolTip(tr("register_comm_hook: fp16 sends half the bytes; PowerSGD sends two thin matrices per layer"));
  row->addWidget(hook_);
  realLink_ = new QCheckBox(tr("Real link (needs root)"), box);
  const QString whyNot = QString::fromStdString(dpv::course::why_no_real_link(facts_));
  realLink_->setEnabled(whyNot.isEmpty());
  realLink_->setChecked(whyNot.isEmpty());
  realLink_->setToolTip(whyNot.isEmpty() ? tr("Runs dpv lab network: two network namespaces joined by a veth pair "
                                              "shaped with tc tbf, one DDP node in each; untick for the simulated link")
                                         : tr("Only the simulated link here: %1").arg(whyNot));
  row->addWidget(realLink_);
  row->addStretch(1);
  connect(rate_, &QComboBox::currentIndexChanged, this, &NetworkPage::showNextRun);
  connect(hook_, &QComboBox::currentIndexChanged, this, &NetworkPage::showNextRun);
  connect(delay_, &QDoubleSpinBox::valueChanged, this, &NetworkPage::showNextRun);
  return box;
}

QWidget* NetworkPage::buildRunControls() {
  auto* box = new QWidget(this);
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(new QLabel(tr("Model"), box));
  model_ = new QComboBox(box);
  for (const std::string& name : dpv::preset_names()) model_->addItem(QString::fromStdString(name));
  model_->setCurrentText(QStringLiteral("mlp-large"));  // a few buckets of about a MiB
  row->addWidget(model_);
  row->addWidget(new QLabel(tr("ranks"), box));
  ranks_ = new QComboBox(box);
  ranks_->addItem(QStringLiteral("2"), 2);
  ranks_->addItem(QStringLiteral("4"), 4);
  ranks_->setToolTip(tr("An even number: the real lab puts the same number of ranks on each of its two nodes"));
  row->addWidget(ranks_);
  row->addWidget(new QLabel(tr("bucket cap"), box));
  bucketCap_ = new QDoubleSpinBox(box);
  bucketCap_->setRange(0.01, 1024);
  bucketCap_->setDecimals(2);
  bucketCap_->setSuffix(tr(" MiB"));
  bucketCap_->setValue(1);
  bucketCap_->setToolTip(tr("DDP's bucket_cap_mb (25 by default in PyTorch): smaller buckets start sooner, each pays the delay"));
  row->addWidget(bucketCap_);
  predictFirst_ = new QCheckBox(tr("Predict first: my guess"), box);
  predictFirst_->setToolTip(tr("Guess the step time before you run; the page grades it against the measurement"));
  row->addWidget(predictFirst_);
  guess_ = new QDoubleSpinBox(box);
  guess_->setRange(0.1, 100000);
  guess_->setDecimals(1);
  guess_->setSuffix(tr(" ms"));
  guess_->setValue(50);
  guess_->setEnabled(false);
  row->addWidget(guess_);
  runButton_ = new QPushButton(QIcon(QStringLiteral(":/icons/run.svg")), tr("Run"), box);
  runButton_->setObjectName(QStringLiteral("primary"));
  runButton_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  runButton_->setToolTip(tr("Trains %1 DDP steps over the link and draws the last (Ctrl+R)").arg(kSteps));
  row->addWidget(runButton_);
  cancelButton_ = new QPushButton(tr("Stop"), box);
  cancelButton_->setToolTip(tr("Stops the run: the real lab gets SIGTERM and removes its namespaces"));
  cancelButton_->setEnabled(false);
  row->addWidget(cancelButton_);
  row->addStretch(1);
  connect(model_, &QComboBox::currentIndexChanged, this, &NetworkPage::showNextRun);
  connect(ranks_, &QComboBox::currentIndexChanged, this, &NetworkPage::showNextRun);
  connect(bucketCap_, &QDoubleSpinBox::valueChanged, this, &NetworkPage::showNextRun);
  connect(predictFirst_, &QCheckBox::toggled, guess_, &QWidget::setEnabled);
  connect(runButton_, &QPushButton::clicked, this, &NetworkPage::run);
  connect(cancelButton_, &QPushButton::clicked, this, &NetworkPage::cancel);
  return box;
}

QWidget* NetworkPage::buildBody() {
  auto* box = new QWidget(this);
  auto* column = new QVBoxLayout(box);
  column->setContentsMargins(0, 0, 0, 0);
  simulated_ = wrappedLabel(box, QStringLiteral("simulatedLabel"));
  column->addWidget(simulated_);
  command_ = wrappedLabel(box, QStringLiteral("commandLabel"));
  command_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  column->addWidget(command_);
  figures_ = wrappedLabel(box, QStringLiteral("runCaption"), Qt::RichText);
  column->addWidget(figures_);
  grade_ = wrappedLabel(box, QStringLiteral("gradeLabel"));
  grade_->setVisible(false);
  column->addWidget(grade_);
  status_ = wrappedLabel(box, QStringLiteral("hintLabel"));
  status_->setText(tr("Press “Run” (Ctrl+R) to train a few DDP steps over the link and watch the buckets stretch."));
  column->addWidget(status_);
  busy_ = new QProgressBar(box);
  busy_->setRange(0, 0);  // busy: the lab reports no progress within a point
  busy_->setMaximumHeight(6);
  busy_->setTextVisible(false);
  busy_->setVisible(false);
  column->addWidget(busy_);
  timeline_ = new NetworkTimelineChart(box);
  column->addWidget(timeline_, 1);
  lessons_ = new QTextBrowser(box);
  lessons_->setObjectName(QStringLiteral("networkLessons"));
  lessons_->setMinimumHeight(320);
  lessons_->setMarkdown(tr("The lessons (the alpha-beta model, why buckets, what compression buys) are written from "
                           "the run's own numbers: run a point to read them."));
  column->addWidget(lessons_);
  return box;
}

NetworkRequest NetworkPage::request() const {
  NetworkRequest r;
  r.setup.model = dpv::preset_model(model_->currentText().toStdString());
  r.setup.world = ranks_->currentData().toInt();
  r.setup.batch = kBatch;
  r.setup.steps = kSteps;
  r.setup.bucket_cap_mb = bucketCap_->value();
  r.setup.comm_hook.kind = static_cast<dpv::CommHookKind>(hook_->currentData().toInt());
  // PyTorch's start_powerSGD_iter of 1000 would leave a short run on plain all-reduces (as the CLI lab).
  r.setup.comm_hook.powersgd.start_powerSGD_iter = 2;
  r.link.latency_s = delay_->value() / 1e3;
  r.link.bandwidth_bytes_per_s = rate_->currentData().toDouble() / 8;
  // Not offered: the learner still gets the real link's reason beside the simulated result.
  r.real = realLinkOffered() ? realLink_->isChecked() : true;
  r.preset = model_->currentText().toStdString();
  return r;
}

void NetworkPage::showNextRun() {
  const NetworkRequest r = request();
  try {
    command_->setText(tr("Over a real link (as root): %1")
                          .arg(QString::fromStdString(dpv::course::real_link_command(r.setup, model_->currentText().toStdString(), r.link))));
  } catch (const dpv::Error& e) {
    command_->setText(QString::fromStdString(e.full()));
  }
}

void NetworkPage::run() {
  const quint64 generation = generation_.next();  // a point still under way is now stale
  error_.clear();
  pendingGuessMs_ = predictFirst_->isChecked() ? guess_->value() : 0;
  grade_->setVisible(false);
  setBusy(true);
  status_->setText(realLink_->isChecked()
                       ? tr("Starting %1 DDP steps on %2 ranks over the real shaped link (the lab takes 10 to 30 s)…")
                             .arg(kSteps).arg(ranks_->currentData().toInt())
                       : tr("Running %1 DDP steps on %2 in-process ranks over the simulated link…")
                             .arg(kSteps).arg(ranks_->currentData().toInt()));
  shown_ = request();
  emit runRequested(shown_, generation);
}

void NetworkPage::cancel() {
  generation_.next();
  emit stopRequested();  // a real run's lab gets SIGTERM; an in-process point cannot be interrupted
  setBusy(false);
  status_->setText(tr("Stopped. An in-process point under way finishes in the background and is not shown; a "
                      "real lab under way gets SIGTERM."));
}

void NetworkPage::setBusy(bool busy) {
  running_ = busy;
  runButton_->setEnabled(!busy);
  cancelButton_->setEnabled(busy);
  predictFirst_->setEnabled(!busy);
  guess_->setEnabled(!busy && predictFirst_->isChecked());
  realLink_->setEnabled(!busy && dpv::course::why_no_real_link(facts_).empty());
  busy_->setVisible(busy);
}

void NetworkPage::onFinished(const NetworkResult& result, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;  // cancelled or replaced
  setBusy(false);
  shownGuessMs_ = pendingGuessMs_;
  showResult(result);
}

void NetworkPage::onFailed(const QString& message, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  setBusy(false);
  error_ = message;
  status_->setText(tr("The run failed: %1").arg(message));
  emit failed(message);
}

void NetworkPage::onStopped(quint64 generation) {
  Q_UNUSED(generation);  // Stop moved the page on; the lab's end is still worth saying
  if (running_) return;  // a newer run is under way: its status stays
  status_->setText(tr("Stopped: the lab got SIGTERM, stopped its DDP job and removed its network namespaces."));
  emit stoppedShown();
}

void NetworkPage::onRealLabStarted(const QString& command, bool probe, quint64 generation) {
  if (!generation_.isCurrent(generation)) return;
  status_->setText(probe ? tr("Asking the lab whether this kernel has netem, which a delay needs (one step, no "
                              "delay): %1").arg(command)
                         : tr("Running on the real shaped link (10 to 30 s): %1").arg(command));
}

void NetworkPage::showResult(const NetworkResult& result) {
  result_ = result;
  if (!result) return;
  const dpv::course::NetworkLabPoint& p = *result;
  const bool everyRank = static_cast<int>(p.last_step_by_rank.size()) == p.world;
  status_->setText((everyRank ? tr("The timeline below is the last step, on every rank.")
                              : tr("The timeline below is rank 0's last step (the only rank the lab logs)."))
                   + tr(" Buckets go out one at a time, each as soon as its layers' gradients are ready."));
  simulated_->setText(QString::fromStdString(dpv::course::network_link_text(p)));
  figures_->setText(figuresHtml(p));
  grade_->setVisible(shownGuessMs_ > 0);
  if (shownGuessMs_ > 0) {
    try {
      grade_->setText(QString::fromStdString(
          dpv::course::guess_grade_text(dpv::course::grade_step_guess(shownGuessMs_ / 1e3, p.summary))));
    } catch (const dpv::Error& e) {
      grade_->setText(QString::fromStdString(e.full()));
    }
  }
  timeline_->setPoint(result);
  showLessons(p);
  emit resultShown();
}

QString NetworkPage::figuresHtml(const dpv::course::NetworkLabPoint& p) const {
  const dpv::netmodel::PointSummary& s = p.summary;
  return tr("Step: measured <b>%1</b>, the model predicted <b>%2</b> (measured / predicted %3×); "
            "exposed communication %4 (model %5); %6 MB sent per step. Medians of %7 steps after the warm-up, "
            "over %8 at %9 one-way.")
      .arg(msText(s.step_s), msText(s.predicted_step_s), QString::number(s.ratio, 'f', 2), msText(s.exposed_s),
           msText(s.predicted_exposed_s), QString::number(s.bytes_per_step / 1e6, 'f', 3))
      .arg(s.steps_measured)
      .arg(QString::fromStdString(dpv::netmodel::rate_text(p.link.bandwidth_bytes_per_s * 8)),
           QString::fromStdString(dpv::netmodel::delay_text(p.link.latency_s)))
      + (s.hook_error ? tr(" The hook saved %1 MB per step; gradient error %2 (relative L2 vs. allreduce), "
                           "measured on one extra step.")
                            .arg(QString::number(s.saved_bytes_per_step / 1e6, 'f', 3),
                                 QString::number(s.hook_error->relative_l2(), 'e', 1))
                      : QString());
}

void NetworkPage::showLessons(const dpv::course::NetworkLabPoint& point) {
  if (!context()) return;  // a page outside the app has no lessons folder
  try {
    const std::string dir = context()->lessonsDir().toStdString();
    const std::vector<dpv::course::NamedFact> facts = dpv::course::network_fact_table(point);
    QString markdown;
    for (const std::string& name : dpv::course::network_lesson_names()) {
      const std::string id = "network/" + name;
      QString lesson = QString::fromStdString(dpv::course::render_lesson(id, dpv::course::load_lesson(dir, id), facts));
      // The lesson's "# Title" drawn as a "### " heading, as the side panels do: a section, not a page.
      if (lesson.startsWith(QStringLiteral("# "))) lesson.insert(0, QStringLiteral("##"));
      markdown += lesson + QStringLiteral("\n\n");
    }
    lessonsMarkdown_ = markdown;
    lessons_->setMarkdown(markdown);
  } catch (const dpv::Error& e) {
    lessonsMarkdown_.clear();
    lessons_->setMarkdown(tr("**The network lessons are missing** (%1). The lab still works.")
                              .arg(QString::fromStdString(e.what()).toHtmlEscaped()));
  }
}

void NetworkPage::setLink(int rateIndex, double delayMs) {
  rate_->setCurrentIndex(rateIndex);
  delay_->setValue(delayMs);
}

void NetworkPage::setHook(dpv::CommHookKind kind) { hook_->setCurrentIndex(hook_->findData(static_cast<int>(kind))); }

void NetworkPage::setModel(const QString& preset, int ranks, double bucketCapMb) {
  model_->setCurrentText(preset);
  ranks_->setCurrentIndex(ranks_->findData(ranks));
  bucketCap_->setValue(bucketCapMb);
}

void NetworkPage::setPredictFirst(bool on, double guessMs) {
  predictFirst_->setChecked(on);
  guess_->setValue(guessMs);
}

QString NetworkPage::simulatedText() const { return simulated_->text(); }
QString NetworkPage::commandText() const { return command_->text(); }
QString NetworkPage::figuresText() const { return figures_->text(); }
QString NetworkPage::statusText() const { return status_->text(); }
bool NetworkPage::realLinkOffered() const { return dpv::course::why_no_real_link(facts_).empty(); }
QString NetworkPage::realLinkToolTip() const { return realLink_->toolTip(); }

void NetworkPage::setRealLink(bool on) {
  if (realLinkOffered()) realLink_->setChecked(on);
}

QString NetworkPage::gradeText() const { return grade_->isVisibleTo(this) ? grade_->text() : QString(); }

QList<Page::Shot> NetworkPage::screenshots() {
  auto afterRun = [this](std::function<void()> done) {
    auto ready = [this, done] {
      scroll_->verticalScrollBar()->setValue(0);
      done();
    };
    if (result_ || !error_.isEmpty()) return ready();
    setPredictFirst(true, 40);
    // Where the real link runs, shoot a real run: no delay, which tbf alone shapes (netem or not).
    if (realLinkOffered()) delay_->setValue(0);
    whenRunEnds(this, ready);
    run();
  };
  auto atLessons = [this](std::function<void()> done) {
    scroll_->ensureWidgetVisible(lessons_, 0, 0);
    done();
  };
  return {Shot{QString(), afterRun}, Shot{QStringLiteral("lessons"), atLessons}};
}

}  // namespace gui
