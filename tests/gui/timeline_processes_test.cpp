// The Timeline page's "Run as W processes": the settings' model trained by real processes through
// `dpv launch` (Gloo on 127.0.0.1, a free port picked by the launcher), whose merged trace opens
// with one group of lanes per rank and their communication lanes; rank 0's progress shows while it
// runs; a missing dpv, an option dpv refuses, Cancel and the wall-clock limit end with words and
// leave the page usable.
#include <gtest/gtest.h>

#include <QJsonObject>

#include <QJsonDocument>

#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QStringList>
#include <set>

#include "gui/common/context.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/process_run.h"
#include "gui/timeline/page.h"
#include "gui_test_support.h"

namespace gui {
namespace {

class TimelineProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = std::make_unique<AppContext>();
    engine_ = std::make_unique<EngineController>();
    context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
    context_->setEngine(engine_.get());
    page_ = std::make_unique<TimelinePage>(context_.get());
    page_->resize(1000, 560);
    page_->show();
    QObject::connect(page_.get(), &TimelinePage::processProgress, page_.get(), [this](const QString& line) { progress_ << line; });
    QObject::connect(page_.get(), &TimelinePage::processRunFinished, page_.get(), [this](bool ok) {
      ++finished_;
      lastOk_ = ok;
    });
  }
  // Runs `request` and waits for its end; returns whether it succeeded.
  bool run(const ProcessRunRequest& request, int ms = 120000) {
    const int before = finished_;
    page_->runAsProcesses(request);
    EXPECT_TRUE(waitUntil([&] { return finished_ > before; }, ms)) << "the run as processes never ended";
    return lastOk_;
  }
  void TearDown() override {
    page_.reset();
    engine_.reset();
    context_.reset();
  }
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<EngineController> engine_;
  std::unique_ptr<TimelinePage> page_;
  QStringList progress_;
  int finished_ = 0;
  bool lastOk_ = false;
};

// The processes still running whose command line mentions `needle` (the run's own temporary folder).
QStringList processesMentioning(const QString& needle) {
  QStringList found;
  for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
    bool number = false;
    pid.toInt(&number);
    if (!number) continue;
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
    if (!cmdline.open(QIODevice::ReadOnly)) continue;
    const QByteArray text = cmdline.readAll().replace('\0', ' ');
    if (text.contains(needle.toUtf8())) found << pid + QLatin1Char(' ') + QString::fromUtf8(text);
  }
  return found;
}

TEST(ProcessRun, FindsDpvBesideTheAppAndCountsProcesses) {
  QStringList searched;
  const QString dpv = ProcessRun::findDpv(&searched);
  EXPECT_FALSE(dpv.isEmpty()) << searched.join(QLatin1Char(' ')).toStdString();
  EXPECT_TRUE(dpv.endsWith(QLatin1String("/dpv")));
  QString error;
  EXPECT_EQ(ProcessRun::processCount(QStringLiteral("cpu:3"), &error), 3);
  EXPECT_EQ(ProcessRun::processCount(QStringLiteral("cuda:0,1"), &error), 2);
  EXPECT_EQ(ProcessRun::processCount(QStringLiteral("cuda:0x4"), &error), 0);
  EXPECT_TRUE(error.contains(QLatin1String("a GPU of its own"))) << error.toStdString();
  EXPECT_EQ(ProcessRun::processCount(QStringLiteral("tpu:2"), &error), 0);
  EXPECT_FALSE(error.isEmpty());
  // Only 127.0.0.1, a port the launcher picks, the ranks' own devices and the trace in the run's folder.
  ProcessRunRequest r;
  r.run.devices = "cpu:2";
  r.run.preset = "simple";
  const QStringList args = ProcessRun::arguments(r, QStringLiteral("/tmp/x/trace.json"));
  const QString line = args.join(QLatin1Char(' '));
  EXPECT_TRUE(line.startsWith(QLatin1String("launch --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 0 --backend gloo")))
      << line.toStdString();
  EXPECT_TRUE(line.contains(QLatin1String("-- train --ddp --devices cpu:2 --preset simple --batch 10"))) << line.toStdString();
  EXPECT_TRUE(line.contains(QLatin1String("--trace /tmp/x/trace.json"))) << line.toStdString();
}

// The request the page builds from the settings (through runSpecFromSettings) gives dpv exactly
// this command line; the Iteration page's DDP mode changes nothing (the ranks always run DDP).
TEST_F(TimelineProcessesTest, TheSettingsBecomeThisCommandLine) {
  AppSettings settings = settingsFor(QStringLiteral("cpu:3"), QStringLiteral("mlp-bn"), 12);
  settings.learningRate = 0.3;
  settings.seed = 42;
  settings.syncBatchNorm = true;
  for (const bool ddp : {false, true}) {
    settings.strategy = ddp ? dpv::StrategyKind::DistributedDataParallel : dpv::StrategyKind::DataParallel;
    context_->setSettings(settings);
    const QStringList expected{
        QStringLiteral("launch"), QStringLiteral("--nproc-per-node"), QStringLiteral("3"), QStringLiteral("--master-addr"),
        QStringLiteral("127.0.0.1"), QStringLiteral("--master-port"), QStringLiteral("0"), QStringLiteral("--backend"),
        QStringLiteral("gloo"), QStringLiteral("--timeout"), QStringLiteral("60"), QStringLiteral("--error-file"),
        QStringLiteral("/tmp/x/error.json"), QStringLiteral("--"), QStringLiteral("train"),
        QStringLiteral("--ddp"), QStringLiteral("--devices"), QStringLiteral("cpu:3"), QStringLiteral("--preset"),
        QStringLiteral("mlp-bn"), QStringLiteral("--batch"), QStringLiteral("12"), QStringLiteral("--lr"),
        QStringLiteral("0.29999999999999999"), QStringLiteral("--seed"), QStringLiteral("42"), QStringLiteral("--steps"),
        QString::number(TimelinePage::kProcessSteps), QStringLiteral("--trace"), QStringLiteral("/tmp/x/trace.json"),
        QStringLiteral("--trace-steps"), QString::number(TimelinePage::kProcessSteps), QStringLiteral("--sync-bn")};
    EXPECT_EQ(ProcessRun::arguments(page_->processRequest(), QStringLiteral("/tmp/x/trace.json")), expected) << "ddp " << ddp;
  }
}

TEST_F(TimelineProcessesTest, TwoProcessesGiveTwoRanksOfLanesWithTheirCommunication) {
  EXPECT_EQ(page_->processButtonEnabled(), true);
  ASSERT_TRUE(run(page_->processRequest())) << page_->processStatus().toStdString();
  EXPECT_FALSE(page_->processesRunning());
  EXPECT_TRUE(page_->processStatus().isEmpty()) << "the status line goes once the trace is shown";
  ASSERT_TRUE(page_->showingOpenedTrace());
  const dpv::TraceLanes& t = *page_->openedLanes();
  EXPECT_EQ(t.processes, 2);
  std::set<QString> ranks, commRanks;
  std::set<int> commLanes;
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const QString process = QString::fromStdString(t.lanes[i].process_label);
    ranks.insert(process);
    if (QString::fromStdString(t.lanes[i].thread).contains(QLatin1String("communication"))) {
      commLanes.insert(static_cast<int>(i));
      commRanks.insert(process);
    }
  }
  EXPECT_EQ(ranks, (std::set<QString>{QStringLiteral("rank 0"), QStringLiteral("rank 1")}));
  EXPECT_EQ(commRanks, ranks) << "every rank has its communication lane";
  int commSpans = 0;
  for (const dpv::TraceSpan& s : t.spans) commSpans += commLanes.count(s.lane);
  EXPECT_GE(commSpans, 2 * TimelinePage::kProcessSteps) << "every rank all-reduces at least once per iteration";
  // The chart draws every span of the trace, and the summary's numbers are the trace's.
  EXPECT_EQ(page_->bars().size(), static_cast<qsizetype>(t.spans.size()));
  EXPECT_TRUE(page_->summary().contains(QLatin1String("Ran as 2 processes"))) << page_->summary().toStdString();
  EXPECT_TRUE(page_->summary().contains(QStringLiteral("%1 spans").arg(t.spans.size()))) << page_->summary().toStdString();
  // The colour key lists DDP's stages as the ranks recorded them, not DataParallel's.
  const QString legend = page_->legendText();
  for (const char* stage : {"Forward", "Loss", "Backward", "Finalize", "Step", "Bucket all-reduce"})
    EXPECT_TRUE(legend.contains(QLatin1String(stage))) << stage << " missing from: " << legend.toStdString();
  EXPECT_LT(legend.indexOf(QLatin1String("Forward")), legend.indexOf(QLatin1String("Backward"))) << "in the order the stages ran";
  EXPECT_LT(legend.indexOf(QLatin1String("Backward")), legend.indexOf(QLatin1String("Finalize")));
  for (const char* stage : {"Scatter", "Replicate", "Gather", "Reduce grads"})
    EXPECT_FALSE(legend.contains(QLatin1String(stage))) << stage << " is not a stage of this trace: " << legend.toStdString();
  // Rank 0's progress lines came through while it ran.
  bool sawStep = false;
  for (const QString& line : progress_) sawStep |= line.startsWith(QStringLiteral("step %1/%1").arg(TimelinePage::kProcessSteps));
  EXPECT_TRUE(sawStep) << progress_.join(QLatin1Char('|')).toStdString();
  // The lesson says what differs from threads.
  EXPECT_TRUE(page_->lessonText().contains(QLatin1String("Gloo over TCP on 127.0.0.1"))) << page_->lessonText().toStdString();
}

TEST_F(TimelineProcessesTest, AMissingDpvIsShownInWordsAndThePageStaysUsable) {
  ProcessRunRequest r = page_->processRequest();
  r.dpvPath = QDir::temp().filePath(QStringLiteral("no-such-dir-for-dpviz/dpv"));
  EXPECT_FALSE(run(r, 5000));
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("is not a program that can be run"))) << page_->processStatus().toStdString();
  EXPECT_FALSE(page_->processesRunning());
  EXPECT_TRUE(page_->processButtonEnabled());
  EXPECT_FALSE(page_->showingOpenedTrace());
  // Still usable: a good run afterwards works and replaces the error.
  ASSERT_TRUE(run(page_->processRequest())) << page_->processStatus().toStdString();
  EXPECT_TRUE(page_->processStatus().isEmpty());
  EXPECT_EQ(page_->openedLanes()->processes, 2);
}

TEST_F(TimelineProcessesTest, AnOptionDpvRefusesIsTheLaunchersErrorWithTheRank) {
  ProcessRunRequest r = page_->processRequest();
  r.extraTrainArguments = {QStringLiteral("--no-such-option")};
  EXPECT_FALSE(run(r));
  const std::string status = page_->processStatus().toStdString();
  EXPECT_NE(status.find("The run as processes failed"), std::string::npos) << status;
  EXPECT_NE(status.find("exited with status 2"), std::string::npos) << status;
  EXPECT_NE(status.find("--no-such-option"), std::string::npos) << status;
  EXPECT_TRUE(page_->processStatus().contains(QRegularExpression(QStringLiteral("rank [01] \\(local rank [01], pid \\d+\\)")))) << status;
  // The status is the launcher's verdict as it wrote it to --error-file, with the failing rank.
  QFile errorFile(QDir(page_->processRunner()->workFolder()).filePath(QStringLiteral("error.json")));
  ASSERT_TRUE(errorFile.open(QIODevice::ReadOnly)) << errorFile.fileName().toStdString();
  const QJsonObject error = QJsonDocument::fromJson(errorFile.readAll()).object();
  EXPECT_EQ(error.value(QStringLiteral("error_class")).toString(), QStringLiteral("RuntimeError"));
  const int rank = error.value(QStringLiteral("rank")).toInt(-1);
  EXPECT_TRUE(rank == 0 || rank == 1) << rank;
  EXPECT_TRUE(page_->processStatus().contains(QStringLiteral("rank %1 (local rank %1,").arg(rank))) << status;
  EXPECT_TRUE(page_->processButtonEnabled());
  EXPECT_FALSE(page_->showingOpenedTrace());
}

TEST_F(TimelineProcessesTest, CancelStopsEveryWorker) {
  ProcessRunRequest r = page_->processRequest();
  r.steps = 100000000;  // far longer than the test
  page_->runAsProcesses(r);
  // Cancel once rank 0 has joined the group and printed its header line, so every worker is up.
  ASSERT_TRUE(waitUntil([&] { return !progress_.isEmpty() || finished_ > 0; }, 60000));
  ASSERT_EQ(finished_, 0) << page_->processStatus().toStdString();
  EXPECT_TRUE(progress_.first().startsWith(QLatin1String("dpv train --ddp:"))) << progress_.first().toStdString();
  const QString folder = page_->processRunner()->workFolder();
  ASSERT_FALSE(folder.isEmpty());
  EXPECT_TRUE(waitUntil([&] { return processesMentioning(folder).size() >= 3; }, 10000))
      << "the launcher and its 2 workers: " << processesMentioning(folder).join(QLatin1Char('\n')).toStdString();
  page_->cancelProcesses();
  ASSERT_TRUE(waitUntil([&] { return finished_ > 0; }, 30000)) << "Cancel must end the run";
  EXPECT_FALSE(lastOk_);
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("Cancelled"))) << page_->processStatus().toStdString();
  EXPECT_TRUE(processesMentioning(folder).isEmpty()) << processesMentioning(folder).join(QLatin1Char('\n')).toStdString();
  EXPECT_TRUE(page_->processButtonEnabled());
}

TEST_F(TimelineProcessesTest, AJobPastItsWallClockLimitIsStoppedNotWaitedFor) {
  ProcessRunRequest r = page_->processRequest();
  r.steps = 100000000;
  r.wallLimitS = 2;
  EXPECT_FALSE(run(r, 30000));
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("ran longer than its limit of 2 s"))) << page_->processStatus().toStdString();
  EXPECT_FALSE(page_->processesRunning());
}

}  // namespace
}  // namespace gui
