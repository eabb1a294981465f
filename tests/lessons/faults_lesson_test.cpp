// lessons/ddp/faults.md rendered from a few fault runs' facts (course/fault_facts.h): each sentence
// about the run appears exactly when its fact holds.
#include <gtest/gtest.h>

#include <string>

#include "course/fault_facts.h"
#include "course/lesson_template.h"
#include "course/lessons.h"
#include "course_test_util.h"

namespace dpv::course {
namespace {

std::string rendered(const FaultFacts& f) {
  return render_lesson("ddp/faults", load_lesson(testing::lessons_dir(), "ddp/faults"), fault_fact_table(f));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

FaultFacts killedRank1(bool restart) {
  FaultFacts f;
  f.rank = 1;
  f.signal = "SIGKILL";
  f.killed = true;
  f.after_step = 1;
  f.fault_sent = true;
  f.restart_allowed = restart;
  f.max_restarts = restart ? 1 : 0;
  f.finished = true;
  f.failed_rank = 1;
  f.others_stopped = true;
  f.seconds_to_end = 1.25;
  return f;
}

TEST(FaultsLesson, AKillWithoutRestartsEndsTheJobNamingTheRank) {
  const std::string t = rendered(killedRank1(false));
  EXPECT_TRUE(has(t, "rank 1 of 2 got SIGKILL after step 1.")) << t;
  EXPECT_TRUE(has(t, "A SIGKILL cannot be caught"));
  EXPECT_TRUE(has(t, "naming rank 1 as the one that failed, and stopped the other ranks itself. It ended 1.2 s after the fault.")) << t;
  EXPECT_TRUE(has(t, "With no restarts allowed"));
  EXPECT_FALSE(has(t, "The launcher restarted"));
  EXPECT_FALSE(has(t, "SIGSTOP does not end the process"));
  EXPECT_FALSE(has(t, "The job ended well"));
}

TEST(FaultsLesson, ARestartSaysTheRestartsUsedAndTheStepResumedFrom) {
  FaultFacts f = killedRank1(true);
  f.job_ok = true;
  f.restarts_used = 1;
  f.resumed = true;
  f.resumed_step = 1;
  const std::string t = rendered(f);
  EXPECT_TRUE(has(t, "The launcher restarted all 2 workers (1 of 1 restarts used), and they resumed from the checkpoint of step 1.")) << t;
  EXPECT_TRUE(has(t, "The job ended well 1.2 s after the fault."));
  EXPECT_FALSE(has(t, "The launcher stopped the job"));
  EXPECT_FALSE(has(t, "With no restarts allowed"));
}

TEST(FaultsLesson, AHangIsSeenAtTheTimeoutAndNothingIsClaimedBeforeTheFault) {
  FaultFacts f;
  f.rank = 0;
  f.signal = "SIGSTOP";
  f.hung = true;
  f.after_step = 0;
  f.timeout_s = 15;
  std::string t = rendered(f);
  EXPECT_TRUE(has(t, "no fault has been sent yet: rank 0 gets SIGSTOP\nwhen you press “Send now”.")) << t;
  EXPECT_FALSE(has(t, "SIGSTOP does not end the process")) << "not sent yet";
  f.fault_sent = true;
  t = rendered(f);
  EXPECT_TRUE(has(t, "rank 0 of 2 got SIGSTOP while it ran.")) << t;
  EXPECT_TRUE(has(t, "until the collective's timeout (15 s in this run)")) << t;
  EXPECT_FALSE(has(t, "A SIGKILL cannot be caught"));
  EXPECT_FALSE(has(t, "The launcher stopped the job")) << "not finished";
}

}  // namespace
}  // namespace dpv::course
