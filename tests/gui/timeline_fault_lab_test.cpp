// The Timeline page's fault lab: the command line it runs, its flow against a stand-in launcher that
// writes prepared events (the lab sends the real signal to the stand-in worker's pid once rank 0
// reports the step), and the real end-to-end runs with `dpv launch --events-file`.
//
// FaultLabEndToEnd_*: the real dpv built beside the tests (dpv launch --events-file, --max-restarts,
// dpv train --checkpoint).
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <csignal>

#include "gui/common/context.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/process_run.h"
#include "gui/timeline/fault_lab.h"
#include "gui/timeline/page.h"
#include "gui_test_support.h"

namespace gui {
namespace {

using dpv::course::FaultKind;
using dpv::course::FaultPlan;

class FaultLabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = std::make_unique<AppContext>();
    context_->setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 10));
    page_ = std::make_unique<TimelinePage>(context_.get());
    page_->resize(1200, 700);
    page_->show();
    page_->showFaultLab();
    lab_ = page_->faultLab();
    QObject::connect(lab_, &FaultLabPanel::labFinished, lab_, [this] { ++finished_; });
  }
  void TearDown() override {
    page_.reset();
    context_.reset();
  }
  std::unique_ptr<AppContext> context_;
  std::unique_ptr<TimelinePage> page_;
  FaultLabPanel* lab_ = nullptr;
  int finished_ = 0;
};

TEST_F(FaultLabTest, TheRequestAsksForEventsAndWithARestartForCheckpoints) {
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, false, 2, 15});
  QString line = ProcessRun::arguments(lab_->request(), QStringLiteral("/tmp/x/trace.json")).join(QLatin1Char(' '));
  EXPECT_TRUE(line.contains(QLatin1String("--events-file /tmp/x/events.jsonl"))) << line.toStdString();
  EXPECT_FALSE(line.contains(QLatin1String("--max-restarts"))) << line.toStdString();
  EXPECT_FALSE(line.contains(QLatin1String("--checkpoint"))) << line.toStdString();
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, true, 2, 15});
  line = ProcessRun::arguments(lab_->request(), QStringLiteral("/tmp/x/trace.json")).join(QLatin1Char(' '));
  EXPECT_TRUE(line.contains(QLatin1String("--max-restarts 1 -- train --ddp"))) << line.toStdString();
  EXPECT_TRUE(line.contains(QLatin1String("--checkpoint /tmp/x/checkpoints --checkpoint-every 1"))) << line.toStdString();
  EXPECT_TRUE(line.contains(QStringLiteral("--steps %1").arg(FaultLabPanel::kLabStepsWithCheckpoints))) << line.toStdString();
  EXPECT_TRUE(line.contains(QStringLiteral("--trace-steps %1").arg(FaultLabPanel::kLabTraceSteps))) << line.toStdString();
  // By hand the learner needs time to press "Send now": a longer job.
  lab_->setPlan(FaultPlan{1, FaultKind::Stop, 0, false, 2, 15});
  line = ProcessRun::arguments(lab_->request(), QStringLiteral("/tmp/x/trace.json")).join(QLatin1Char(' '));
  EXPECT_TRUE(line.contains(QStringLiteral("--steps %1").arg(FaultLabPanel::kLabSteps * FaultLabPanel::kByHandFactor))) << line.toStdString();
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, true, 2, 15});
  // The Python block's "# comment" is code, not a heading turned into text.
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("\n# PyTorch 1.13, started by"))) << lab_->lessonText().toStdString();
  // Before a run the lesson describes the plan, and claims nothing happened.
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("no fault has been sent yet: rank 1 gets SIGKILL"))) << lab_->lessonText().toStdString();
}

// A stand-in for dpv launch: starts one "worker" (a sleep) as rank 1, reports it as the launcher
// would, prints rank 0's step 1, waits for the worker and reports how it ended.
const char* kStandInLauncher = R"(#!/bin/bash
events=""; errors=""
while [ $# -gt 0 ]; do
  case "$1" in --events-file) events="$2"; shift ;; --error-file) errors="$2"; shift ;; esac; shift
done
sleep 30 & worker=$!
trap 'kill -9 $worker 2>/dev/null; exit 143' TERM
echo '{"event":"started","attempt":0,"rank":0,"local_rank":0,"pid":'$$'}' >> "$events"
echo '{"event":"started","attempt":0,"rank":1,"local_rank":1,"pid":'$worker'}' >> "$events"
echo "step 1/6  loss 0.5"
wait $worker; status=$?
sig=$((status - 128))
echo '{"event":"exited","attempt":0,"rank":1,"pid":'$worker',"exit_code":null,"signal":'$sig',"stopped_by_launcher":false}' >> "$events"
echo '{"event":"finished","ok":false,"attempts":1,"failed_rank":1,"message":"rank 1 (local rank 1, pid '$worker') was killed by signal '$sig'"}' >> "$events"
echo '{"error_class":"RuntimeError","message":"rank 1 was killed","rank":1}' > "$errors"
exit 1
)";

// The stand-in launcher as an executable `dpv` in `dir`; "" when it could not be written.
QString writeStandInLauncher(const QTemporaryDir& dir) {
  const QString fake = dir.filePath(QStringLiteral("dpv"));
  QFile f(fake);
  if (!dir.isValid() || !f.open(QIODevice::WriteOnly) || f.write(kStandInLauncher) < 0) return {};
  f.close();
  QFile::setPermissions(fake, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
  return fake;
}

TEST_F(FaultLabTest, WithAStandInLauncherTheLabKillsTheRankAndShowsTheVerdict) {
  QTemporaryDir dir;
  const QString fake = writeStandInLauncher(dir);
  ASSERT_FALSE(fake.isEmpty());
  // The panel runs page->processRequest() plus its own options; the stand-in gets them all.
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, false, 2, 15});
  ProcessRunRequest r = lab_->request();
  r.dpvPath = fake;
  const int before = finished_;
  lab_->startWith(r);
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 20000)) << "the lab's SIGKILL must end the stand-in's worker";
  ASSERT_TRUE(lab_->lab().has_value());
  EXPECT_TRUE(lab_->lab()->fault_sent());
  EXPECT_EQ(lab_->rankStatusText(1), QStringLiteral("killed by SIGKILL"));
  EXPECT_EQ(lab_->rankStatusText(0), QStringLiteral("running")) << "the stand-in never reports rank 0's exit";
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("failed rank 1"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("killed by signal 9"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("RuntimeError: rank 1 was killed"))) << page_->processStatus().toStdString();
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("No rank wrote its trace"))) << page_->processStatus().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("rank 1 of 2 got SIGKILL after step 1."))) << lab_->lessonText().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("naming rank 1 as the one that failed"))) << lab_->lessonText().toStdString();
}

// "Send now" with SIGSTOP: the rank is stopped (its process really is, state T), the row says so,
// and Cancel still ends the job and its stopped worker.
TEST_F(FaultLabTest, WithAStandInLauncherSendNowStopsTheRankAndCancelStillEndsIt) {
  QTemporaryDir dir;
  const QString fake = writeStandInLauncher(dir);
  ASSERT_FALSE(fake.isEmpty());
  lab_->setPlan(FaultPlan{1, FaultKind::Stop, 0, false, 2, 15});
  ProcessRunRequest r = lab_->request();
  r.dpvPath = fake;
  const int before = finished_;
  lab_->startWith(r);
  ASSERT_TRUE(waitUntil([&] { return lab_->rankStatusText(1) == QLatin1String("running"); }, 20000));
  EXPECT_FALSE(lab_->lab()->fault_sent()) << "by hand only";
  lab_->sendNow();
  ASSERT_TRUE(lab_->lab()->fault_sent());
  EXPECT_EQ(lab_->rankStatusText(1), QStringLiteral("stopped (SIGSTOP)"));
  const qint64 pid = lab_->lab()->job().ranks[1].pid;
  auto state = [pid] {
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly)) return QByteArray("gone");
    const QByteArray text = stat.readAll();
    return text.mid(text.lastIndexOf(')') + 2, 1);
  };
  EXPECT_TRUE(waitUntil([&] { return state() == "T"; }, 10000)) << state().constData();
  page_->cancelProcesses();
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 20000));
  EXPECT_TRUE(waitUntil([&] { return state() == "gone" || state() == "Z"; }, 10000)) << "the stopped worker is left behind: " << state().constData();
}

// The real launcher: two processes of dpv train --ddp, rank 1 killed by the lab after step 1.
TEST_F(FaultLabTest, FaultLabEndToEnd_KillRank1AfterStep1FailsNamingRank1) {
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, false, 2, 15});
  ProcessRunRequest r = lab_->request();
  const int before = finished_;
  lab_->startWith(r);
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 150000));
  EXPECT_TRUE(lab_->lab()->fault_sent()) << page_->processStatus().toStdString();
  EXPECT_EQ(lab_->rankStatusText(1), QStringLiteral("killed by SIGKILL"));
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("The launcher ended the job</b> (failed rank 1)"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("rank 1 (local rank 1, pid "))) << lab_->verdict().toStdString();
  // The launcher's SIGTERM ends rank 0 (dpv train, like a Python script, does not catch it).
  EXPECT_EQ(lab_->rankStatusText(0), QStringLiteral("killed by SIGTERM, stopped by the launcher"));
  EXPECT_TRUE(page_->processStatus().contains(QLatin1String("rank 1"))) << page_->processStatus().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("naming rank 1 as the one that failed"))) << lab_->lessonText().toStdString();
}

TEST_F(FaultLabTest, FaultLabEndToEnd_WithARestartTheJobSucceedsAfterOneRestart) {
  lab_->setPlan(FaultPlan{1, FaultKind::Kill, 1, true, 2, 15});
  ProcessRunRequest r = lab_->request();
  const int before = finished_;
  lab_->startWith(r);
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 150000));
  EXPECT_TRUE(lab_->lab()->fault_sent()) << page_->processStatus().toStdString();
  EXPECT_EQ(lab_->lab()->job().restarts, 1);
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("The job succeeded</b> after 1 restart"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->rankStatusText(1).contains(QLatin1String("restarted at attempt 1"))) << lab_->rankStatusText(1).toStdString();
  // Every step is checkpointed: the restarted ranks resume from the newest checkpoint, which is of a
  // step at or after the one the fault was sent at (rank 0 may have saved one more before the kill).
  ASSERT_TRUE(lab_->lab()->resumed_from().has_value()) << "rank 0 printed no resume line";
  const int resumed = *lab_->lab()->resumed_from();
  EXPECT_GE(resumed, 1);
  EXPECT_LT(resumed, FaultLabPanel::kLabStepsWithCheckpoints);
  EXPECT_TRUE(lab_->verdict().contains(QStringLiteral("resuming from the checkpoint of step %1").arg(resumed))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QStringLiteral("they resumed from the checkpoint of step %1").arg(resumed))) << lab_->lessonText().toStdString();
  // The merged trace of the successful attempt loads off the GUI thread after the job's end.
  EXPECT_TRUE(waitUntil([&] { return page_->showingOpenedTrace(); }, 60000)) << page_->processStatus().toStdString();
}

// SIGTERM: the rank exits by the signal, and the launcher ends the job naming it.
TEST_F(FaultLabTest, FaultLabEndToEnd_TermRank1AfterStep2FailsNamingRank1) {
  lab_->setPlan(FaultPlan{1, FaultKind::Term, 2, false, 2, 15});
  const int before = finished_;
  lab_->startWith(lab_->request());
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 150000));
  EXPECT_TRUE(lab_->lab()->fault_sent()) << page_->processStatus().toStdString();
  EXPECT_EQ(lab_->rankStatusText(1), QStringLiteral("killed by SIGTERM"));
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("The launcher ended the job</b> (failed rank 1)"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("SIGTERM asks the process to end"))) << lab_->lessonText().toStdString();
}

// SIGSTOP: nothing exits, so nothing is seen until rank 0's all-reduce times out (the lab's
// --timeout); then the launcher blames the stopped rank, not rank 0 whose error came first.
TEST_F(FaultLabTest, FaultLabEndToEnd_StopRank1AfterStep1IsSeenAtTheTimeoutAndBlamesRank1) {
  lab_->setPlan(FaultPlan{1, FaultKind::Stop, 1, false, 2, FaultLabPanel::kLabTimeoutS});
  const int before = finished_;
  lab_->startWith(lab_->request());
  ASSERT_TRUE(waitUntil([&] { return lab_->lab()->fault_sent(); }, 60000)) << page_->processStatus().toStdString();
  EXPECT_EQ(lab_->rankStatusText(1), QStringLiteral("stopped (SIGSTOP)"));
  ASSERT_TRUE(waitUntil([&] { return finished_ > before; }, 150000));
  EXPECT_TRUE(lab_->verdict().contains(QLatin1String("(failed rank 1)"))) << lab_->verdict().toStdString();
  EXPECT_TRUE(lab_->rankStatusText(1).contains(QLatin1String("stopped by the launcher"))) << lab_->rankStatusText(1).toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("until the collective's timeout (15 s in this run)"))) << lab_->lessonText().toStdString();
  EXPECT_TRUE(lab_->lessonText().contains(QLatin1String("naming rank 1 as the one that failed"))) << lab_->lessonText().toStdString();
}

}  // namespace
}  // namespace gui
