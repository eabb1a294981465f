// dpv launch's --events-file read as typed values (course/launch_events.h): each event kind, a last
// line still being written, a line too long or not an event, the job's per-rank state, rank 0's
// progress and resume lines, the --error-file; and the fault lab's state machine
// (course/fault_facts.h) driven by prepared event lines.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "course/fault_facts.h"
#include "course/launch_events.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

const char* kStarted0 = R"({"event":"started","attempt":0,"rank":0,"local_rank":0,"pid":100})";
const char* kStarted1 = R"({"event":"started","attempt":0,"rank":1,"local_rank":1,"pid":101})";
const char* kKilled1 = R"({"event":"exited","attempt":0,"rank":1,"pid":101,"exit_code":null,"signal":9,"stopped_by_launcher":false})";
const char* kStopped0 = R"({"event":"exited","attempt":0,"rank":0,"pid":100,"exit_code":null,"signal":15,"stopped_by_launcher":true})";
const char* kRestarting = R"({"event":"restarting","attempt":1,"failed_rank":1,"max_restarts":1})";
const char* kStarted0b = R"({"event":"started","attempt":1,"rank":0,"local_rank":0,"pid":200})";
const char* kStarted1b = R"({"event":"started","attempt":1,"rank":1,"local_rank":1,"pid":201})";
const char* kFailed = R"({"event":"finished","ok":false,"attempts":1,"failed_rank":1,"message":"rank 1 was killed by SIGKILL"})";
const char* kOk = R"({"event":"finished","ok":true,"attempts":2,"failed_rank":-1,"message":""})";

TEST(LaunchEvents, ParsesEachKindAsTypedValues) {
  const LaunchEvent s = parse_launch_event(kStarted1);
  EXPECT_EQ(s.kind, LaunchEventKind::Started);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.pid, 101);
  const LaunchEvent x = parse_launch_event(kKilled1);
  EXPECT_EQ(x.kind, LaunchEventKind::Exited);
  EXPECT_FALSE(x.exit_code.has_value());
  EXPECT_EQ(x.signal, SIGKILL);
  EXPECT_FALSE(x.stopped_by_launcher);
  const LaunchEvent e = parse_launch_event(R"({"event":"exited","attempt":0,"rank":0,"pid":5,"exit_code":0,"signal":null,"stopped_by_launcher":false})");
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_FALSE(e.signal.has_value());
  const LaunchEvent r = parse_launch_event(kRestarting);
  EXPECT_EQ(r.kind, LaunchEventKind::Restarting);
  EXPECT_EQ(r.attempt, 1);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_EQ(r.max_restarts, 1);
  const LaunchEvent f = parse_launch_event(kFailed);
  EXPECT_EQ(f.kind, LaunchEventKind::Finished);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.failed_rank, 1);
  EXPECT_EQ(f.message, "rank 1 was killed by SIGKILL");
}

TEST(LaunchEvents, RefusesWhatIsNotAnEventSayingWhat) {
  auto error_of = [](const std::string& line) {
    try {
      parse_launch_event(line);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("{\"event\":\"started\"").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"exploded"})").find("unknown \"event\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"started","attempt":0,"rank":"one","local_rank":0,"pid":1})").find("\"rank\" is missing or not an integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"event":"started","attempt":0,"rank":99999999999,"local_rank":0,"pid":1})").find("in range"), std::string::npos);
}

TEST(LaunchEvents, TheReaderWaitsForAPartialLastLine) {
  LaunchEventsReader reader;
  const std::string text = std::string(kStarted0) + "\n" + kStarted1 + "\n";
  const size_t cut = std::string(kStarted0).size() + 10;  // inside the second line
  EXPECT_EQ(reader.feed(text.substr(0, cut)).size(), 1u);
  const std::vector<LaunchEvent> rest = reader.feed(text.substr(cut));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].rank, 1);
  EXPECT_TRUE(reader.problems().empty());
  EXPECT_EQ(reader.consumed(), text.size());
  EXPECT_TRUE(reader.feed(R"({"event":"fin)").empty()) << "half a line is not an event yet";
}

TEST(LaunchEvents, ALineTooLongOrBrokenIsSkippedAndTheNextOnesRead) {
  LaunchEventsReader reader;
  const std::string huge(kMaxLaunchEventLine + 10, 'x');
  reader.feed(huge.substr(0, 1000));
  reader.feed(huge.substr(1000));  // never held whole
  std::vector<LaunchEvent> events = reader.feed(std::string("\nnot json\n") + kStarted0 + "\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].pid, 100);
  ASSERT_EQ(reader.problems().size(), 2u);
  EXPECT_NE(reader.problems()[0].find("line 1: longer than"), std::string::npos) << reader.problems()[0];
  EXPECT_NE(reader.problems()[1].find("line 2:"), std::string::npos) << reader.problems()[1];
}

TEST(LaunchEvents, TheJobTracksEachRankThroughARestart) {
  LaunchJob job;
  for (const char* line : {kStarted0, kStarted1}) job.apply(parse_launch_event(line));
  EXPECT_EQ(job.running_pid(1), 101);
  job.apply(parse_launch_event(kKilled1));
  EXPECT_EQ(rank_status_text(job.ranks[1]), "killed by SIGKILL");
  EXPECT_FALSE(job.running_pid(1).has_value());
  job.apply(parse_launch_event(kStopped0));
  EXPECT_EQ(rank_status_text(job.ranks[0]), "killed by SIGTERM, stopped by the launcher");
  EXPECT_EQ(job.first_failed_rank, 1) << "the launcher's own stop is not the failure";
  for (const char* line : {kRestarting, kStarted0b, kStarted1b}) job.apply(parse_launch_event(line));
  EXPECT_EQ(job.restarts, 1);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.running_pid(1), 201);
  EXPECT_EQ(rank_status_text(job.ranks[1]), "running (restarted at attempt 1)");
  job.apply(parse_launch_event(R"({"event":"exited","attempt":1,"rank":1,"pid":201,"exit_code":0,"signal":null,"stopped_by_launcher":false})"));
  EXPECT_EQ(rank_status_text(job.ranks[1]), "exited 0 (restarted at attempt 1)");
  job.apply(parse_launch_event(kOk));
  ASSERT_TRUE(job.finished.has_value());
  EXPECT_TRUE(job.finished->ok);
}

// A hang: the stopped rank 1 exits by nobody's hand; rank 0's all-reduce times out and it exits
// first, on its own. The launcher blames rank 1, and its word replaces the guess from the exits.
TEST(LaunchEvents, TheRankTheLauncherBlamesWinsOverTheFirstExit) {
  LaunchJob job;
  for (const char* line : {kStarted0, kStarted1}) job.apply(parse_launch_event(line));
  job.apply(parse_launch_event(R"({"event":"exited","attempt":0,"rank":0,"pid":100,"exit_code":1,"signal":null,"stopped_by_launcher":false})"));
  EXPECT_EQ(job.first_failed_rank, 0) << "until the launcher speaks, the first rank that failed";
  EXPECT_FALSE(job.failed_rank_named);
  job.apply(parse_launch_event(R"({"event":"exited","attempt":0,"rank":1,"pid":101,"exit_code":null,"signal":15,"stopped_by_launcher":true})"));
  job.apply(parse_launch_event(R"({"event":"finished","ok":false,"attempts":1,"failed_rank":1,"message":"rank 1 was stopped by SIGSTOP and never arrived"})"));
  EXPECT_EQ(job.first_failed_rank, 1);
  EXPECT_TRUE(job.failed_rank_named);
  // With a restart, the rank named by the first restart stays the first failure.
  LaunchJob restarted;
  restarted.apply(parse_launch_event(R"({"event":"restarting","attempt":1,"failed_rank":1,"max_restarts":1})"));
  restarted.apply(parse_launch_event(R"({"event":"finished","ok":false,"attempts":2,"failed_rank":0,"message":"rank 0 failed"})"));
  EXPECT_EQ(restarted.first_failed_rank, 1);
}

TEST(LaunchEvents, ReadsProgressAndResumeLines) {
  EXPECT_EQ(progress_step("step 2/3  loss 0.5"), 2);
  EXPECT_EQ(progress_step("step  7/10  loss 0.5"), 7);
  EXPECT_FALSE(progress_step("dpv train --ddp: 2 ranks").has_value());
  EXPECT_FALSE(progress_step("step x/3").has_value());
  EXPECT_EQ(resumed_step("resumed from /tmp/c/step-2 (step 2)"), 2);
  EXPECT_FALSE(resumed_step("step 2/3").has_value());
}

TEST(LaunchEvents, ReadsTheLaunchersErrorFileBounded) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dpv-launch-events-test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "error.json").string();
  EXPECT_FALSE(read_launcher_error_file(path).has_value()) << "no file: the launcher wrote none";
  std::ofstream(path) << R"({"error_class": "RuntimeError", "message": "rank 1 failed", "rank": 1})";
  const std::optional<LauncherError> e = read_launcher_error_file(path);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->error_class, "RuntimeError");
  EXPECT_EQ(e->rank, 1);
  std::ofstream(path) << std::string(kMaxLauncherErrorFileBytes + 1, ' ');
  EXPECT_THROW(read_launcher_error_file(path), Error) << "over 1 MiB";
  std::ofstream(path) << "[]";
  EXPECT_THROW(read_launcher_error_file(path), Error);
  std::filesystem::remove_all(dir);
}

TEST(FaultLab, SendsTheFaultOnceAfterTheStepToTheFirstAttemptsRank) {
  FaultLab lab(FaultPlan{1, FaultKind::Kill, 1, true, 2, 15});
  lab.on_event(parse_launch_event(kStarted0));
  lab.on_output_line("step 1/3  loss 0.7");
  EXPECT_FALSE(lab.due().has_value()) << "rank 1 has not started";
  lab.on_event(parse_launch_event(kStarted1));
  ASSERT_TRUE(lab.due().has_value());
  EXPECT_EQ(lab.due()->pid, 101);
  EXPECT_EQ(lab.due()->signal, SIGKILL);
  lab.sent();
  EXPECT_FALSE(lab.due().has_value()) << "once";
  for (const char* line : {kKilled1, kStopped0, kRestarting, kStarted0b, kStarted1b}) lab.on_event(parse_launch_event(line));
  lab.on_output_line("resumed from /tmp/ckpt (step 1)");
  lab.on_event(parse_launch_event(kOk));
  const FaultFacts f = lab.facts(2.5);
  EXPECT_TRUE(f.fault_sent && f.killed && f.job_ok && f.resumed);
  EXPECT_EQ(f.restarts_used, 1);
  EXPECT_EQ(f.resumed_step, 1);
  EXPECT_EQ(f.failed_rank, 1);
  EXPECT_TRUE(f.others_stopped);
}

TEST(FaultLab, NowWaitsForTheRankAndAStopLeavesItStopped) {
  FaultLab lab(FaultPlan{0, FaultKind::Stop, 0, false, 2, 15});
  lab.on_output_line("step 3/3  loss 0.1");
  lab.on_event(parse_launch_event(kStarted0));
  EXPECT_FALSE(lab.due().has_value()) << "step 0: only by hand";
  lab.fire_now();
  ASSERT_TRUE(lab.due().has_value());
  EXPECT_EQ(lab.due()->signal, SIGSTOP);
  lab.sent();
  EXPECT_EQ(rank_status_text(lab.job().ranks[0]), "stopped (SIGSTOP)");
  lab.on_event(parse_launch_event(kFailed));
  EXPECT_FALSE(lab.facts(15).job_ok);
  EXPECT_TRUE(lab.facts(15).hung);
}

}  // namespace
}  // namespace dpv::course
