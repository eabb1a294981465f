// The Network page's real shaped link (gui/network/worker.h runs `dpv lab network` as a child):
// with a stand-in dpv (a shell script that records its arguments and writes a report the real lab
// wrote, tests/fixtures/network) the page runs exactly the command it shows and draws rank 0's
// step; a delay without netem is run simulated with the lab's typed finding as the reason; Stop
// sends the child SIGTERM; without the privilege the choice is off and says why. Then, where this
// process has CAP_NET_ADMIN, the real lab itself: two namespaces, a shaped veth pair, none left.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <QFile>
#include <QProcess>
#include <QPushButton>
#include <QTemporaryDir>

#include "course/network_real.h"
#include "engine/netmodel/net_admin.h"
#include "gui/network/page.h"
#include "gui/network/timeline_chart.h"
#include "gui/runtime/process_run.h"
#include "gui_test_support.h"

namespace gui {
namespace {

const QString kReport = QStringLiteral(DPV_TEST_DATA_DIR "/network/lab_report_real.json");

// A stand-in for dpv: appends its arguments (one a line, then "----") to calls.txt and copies the
// real lab's report to the path after --json, or with `hang` waits until a signal ends it.
class FakeDpv {
 public:
  explicit FakeDpv(bool hang = false) {
    QFile script(path());
    EXPECT_TRUE(script.open(QIODevice::WriteOnly));
    const QString calls = dir_.filePath(QStringLiteral("calls.txt"));
    QString text = QStringLiteral("#!/bin/sh\nprintf '%s\\n' \"$@\" ---- >> '%1'\n").arg(calls);
    if (hang) text += QStringLiteral("exec sleep 600\n");  // SIGTERM ends sleep, and so the child
    text += QStringLiteral("prev=\nfor a in \"$@\"; do\n  [ \"$prev\" = --json ] && cp '%1' \"$a\"\n  prev=$a\n"
                           "done\nexit 0\n").arg(kReport);
    script.write(text.toUtf8());
    script.close();
    script.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
  }
  QString path() const { return dir_.filePath(QStringLiteral("dpv")); }
  // Each call's arguments, in order.
  QList<QStringList> calls() const {
    QFile f(dir_.filePath(QStringLiteral("calls.txt")));
    QList<QStringList> out;
    if (!f.open(QIODevice::ReadOnly)) return out;
    QStringList current;
    for (const QString& line : QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'))) {
      if (line == QStringLiteral("----")) out << current, current.clear();
      else if (!line.isEmpty()) current << line;
    }
    return out;
  }
  dpv::course::RealLinkFacts facts() const { return {true, path().toStdString(), "", std::nullopt}; }

 private:
  QTemporaryDir dir_;
};

// A simulated point that takes no time: what the page shows when the real link cannot run.
dpv::course::NetworkLabPoint cannedPoint(const dpv::course::NetworkLabSetup& setup, const dpv::netmodel::Link& link) {
  dpv::course::NetworkLabPoint p;
  p.link = link;
  p.world = setup.world;
  p.steps.resize(1);
  p.last_step_by_rank.resize(static_cast<size_t>(setup.world));
  p.summary.steps_measured = 1;
  p.summary.step_s = p.summary.predicted_step_s = 0.01;
  p.summary.ratio = 1;
  return p;
}

std::vector<std::string> toStd(const QStringList& list) {
  std::vector<std::string> out;
  for (const QString& s : list) out.push_back(s.toStdString());
  return out;
}

TEST(NetworkRealLink, RunsTheShownCommandAndDrawsRankZero) {
  FakeDpv dpv;
  NetworkPage page(nullptr, nullptr, cannedPoint, dpv.facts());
  ASSERT_TRUE(page.realLinkOffered());
  page.setModel(QStringLiteral("mlp-large"), 2, 1);
  page.setLink(2, 0);  // 1 Gbit/s, no delay: the fixture's point
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 30000));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
  ASSERT_TRUE(page.result());
  EXPECT_FALSE(page.result()->simulated);
  EXPECT_TRUE(page.simulatedText().startsWith(QStringLiteral("Real shaped link: 2 network namespaces")))
      << page.simulatedText().toStdString();
  EXPECT_EQ(page.timeline()->rankCount(), 1);  // the lab logs rank 0 only: no invented rows
  EXPECT_EQ(page.timeline()->countBars(0, NetworkTimelineChart::BarKind::Bucket),
            static_cast<int>(page.result()->last_step_by_rank[0].buckets.size()));
  EXPECT_TRUE(page.statusText().contains(QStringLiteral("rank 0's last step")));

  const QList<QStringList> calls = dpv.calls();
  ASSERT_EQ(calls.size(), 1);
  const QStringList& args = calls[0];
  const qsizetype json = args.indexOf(QStringLiteral("--json"));
  ASSERT_GE(json, 0);
  const NetworkRequest r = page.request();
  EXPECT_EQ(toStd(args), dpv::course::lab_network_arguments(r.setup, "mlp-large", r.link, args[json + 1].toStdString()));
  // The page's command is the same builder's, without the report's path.
  EXPECT_EQ(page.commandText().toStdString(),
            "Over a real link (as root): sudo " +
                dpv::course::shell_command("dpv", dpv::course::lab_network_arguments(r.setup, "mlp-large", r.link, "")));
}

TEST(NetworkRealLink, ADelayWithoutNetemRunsSimulatedAndSaysWhy) {
  FakeDpv dpv;  // its report says netem false, as this kernel's lab found
  NetworkPage page(nullptr, nullptr, cannedPoint, dpv.facts());
  page.setModel(QStringLiteral("mlp-large"), 2, 1);
  page.setLink(2, 2);  // 2 ms: needs netem
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 30000));
  ASSERT_TRUE(page.result()) << page.errorText().toStdString();
  EXPECT_TRUE(page.result()->simulated);
  EXPECT_TRUE(page.simulatedText().contains(QStringLiteral("Not the real link: this kernel has no netem qdisc")))
      << page.simulatedText().toStdString();
  ASSERT_EQ(dpv.calls().size(), 1);  // the probe: one step, no delay
  EXPECT_TRUE(dpv.calls()[0].contains(QStringLiteral("0ms")));
  // Known now: the next delayed run asks no probe.
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 30000));
  EXPECT_EQ(dpv.calls().size(), 1);
  EXPECT_TRUE(page.result()->simulated);
}

TEST(NetworkRealLink, StopSendsTheLabSigterm) {
  FakeDpv dpv(true);
  NetworkPage page(nullptr, nullptr, cannedPoint, dpv.facts());
  page.setModel(QStringLiteral("mlp-large"), 2, 1);
  page.setLink(2, 0);
  bool stopped = false;
  QObject::connect(&page, &NetworkPage::stoppedShown, [&] { stopped = true; });
  page.run();
  ASSERT_TRUE(waitUntil([&] { return page.statusText().startsWith(QStringLiteral("Running on the real shaped link")); }, 30000));
  ASSERT_TRUE(waitUntil([&] { return dpv.calls().size() == 1; }, 30000));  // the child runs
  page.cancel();
  ASSERT_TRUE(waitUntil([&] { return stopped; }, 30000));
  EXPECT_TRUE(page.statusText().startsWith(QStringLiteral("Stopped: the lab got SIGTERM"))) << page.statusText().toStdString();
  EXPECT_FALSE(page.result());
  EXPECT_TRUE(page.runButton()->isEnabled());
}

TEST(NetworkRealLink, WithoutThePrivilegeTheChoiceIsOffAndTheResultSaysWhy) {
  NetworkPage page(nullptr, nullptr, cannedPoint, dpv::course::RealLinkFacts{false, "/usr/bin/dpv", "", std::nullopt});
  EXPECT_FALSE(page.realLinkOffered());
  EXPECT_TRUE(page.realLinkToolTip().contains(QStringLiteral("CAP_NET_ADMIN")));
  page.setModel(QStringLiteral("simple"), 2, 25);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 30000));
  ASSERT_TRUE(page.result());
  EXPECT_TRUE(page.simulatedText().contains(QStringLiteral("Not the real link: the app lacks CAP_NET_ADMIN")));
}

// The lab namespaces `ip netns list` names now (dpvlabA<pid>, dpvlabB<pid>).
QStringList labNamespaces() {
  QProcess ip;
  ip.start(QStringLiteral("ip"), {QStringLiteral("netns"), QStringLiteral("list")});
  if (!ip.waitForFinished(10000)) return {QStringLiteral("(ip did not answer)")};
  QStringList names;
  for (const QString& line : QString::fromUtf8(ip.readAllStandardOutput()).split(QLatin1Char('\n')))
    if (line.startsWith(QStringLiteral("dpvlab"))) names << line.section(QLatin1Char(' '), 0, 0);
  return names;
}

pid_t labPid(const QString& name) { return static_cast<pid_t>(name.mid(7).toLong()); }

// This test's own labs: their namespaces carry the pid of a lab this process started. Other labs
// on the machine (another test binary's) are left out.
QStringList ownLabNamespaces() {
  QStringList own;
  for (const QString& name : labNamespaces()) {
    QFile stat(QStringLiteral("/proc/%1/stat").arg(labPid(name)));
    // Field 4 of /proc/<pid>/stat is the parent's pid (the name in field 2 has no spaces: "(dpv)").
    if (stat.open(QIODevice::ReadOnly) &&
        QString::fromLatin1(stat.readAll()).section(QLatin1Char(' '), 3, 3).toLong() == ::getpid())
      own << name;
  }
  return own;
}

// Namespaces that came since `before` and whose lab no longer runs: what a lab of this test left.
QStringList leftSince(const QStringList& before) {
  QStringList left;
  for (const QString& name : labNamespaces())
    if (!before.contains(name) && ::kill(labPid(name), 0) != 0 && errno == ESRCH) left << name;
  return left;
}

TEST(NetworkRealLink, TheRealLabEndToEnd) {
  if (!dpv::netmodel::has_net_admin()) GTEST_SKIP() << "this process lacks CAP_NET_ADMIN: the real lab needs root";
  const QString exe = ProcessRun::findDpv();
  if (exe.isEmpty()) GTEST_SKIP() << "no dpv binary beside the tests";
  NetworkPage page(nullptr, nullptr, cannedPoint, dpv::course::RealLinkFacts{true, exe.toStdString(), "", std::nullopt});
  page.setModel(QStringLiteral("simple"), 2, 25);
  page.setLink(2, 0);  // 1 Gbit/s, no delay: tbf alone, netem or not
  const QStringList before = labNamespaces();
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }, 180000));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
  ASSERT_TRUE(page.result());
  EXPECT_FALSE(page.result()->simulated) << page.simulatedText().toStdString();
  EXPECT_EQ(page.timeline()->rankCount(), 1);
  EXPECT_GT(page.result()->summary.step_s, 0);
  EXPECT_TRUE(page.simulatedText().contains(QStringLiteral("tc tbf at 1gbit")));
  EXPECT_TRUE(leftSince(before).isEmpty()) << leftSince(before).join(QLatin1Char(' ')).toStdString();

  // Stop mid-run: a slow link (10 Mbit/s) keeps the job busy; the lab removes its namespaces.
  bool stopped = false;
  QObject::connect(&page, &NetworkPage::stoppedShown, [&] { stopped = true; });
  page.setModel(QStringLiteral("mlp-large"), 2, 25);
  page.setLink(0, 0);
  page.run();
  QStringList own;
  ASSERT_TRUE(waitUntil([&] { return !(own = ownLabNamespaces()).isEmpty() || !page.running(); }, 60000));
  ASSERT_TRUE(page.running()) << "the slow run ended before it could be stopped";
  page.cancel();
  ASSERT_TRUE(waitUntil([&] { return stopped; }, 60000));
  for (const QString& name : own) EXPECT_FALSE(labNamespaces().contains(name)) << name.toStdString();
  EXPECT_TRUE(leftSince(before).isEmpty()) << leftSince(before).join(QLatin1Char(' ')).toStdString();
}

}  // namespace
}  // namespace gui
