// The app's start-up files from the fault campaign: a quiz file nested 200,000 deep crashed the
// app (a stack overflow after the parse), and a FIFO as the progress, lesson or quiz file kept it
// from ever starting (the read waited for a writer). Each is now a reported problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "course/lessons.h"
#include "course/progress.h"
#include "course/quiz.h"
#include "course_test_util.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

using testing::TempDir;

std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(depth, '}');
}

void make_fifo(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
}

TEST(HostileCourseFiles, ADeeplyNestedQuizFileIsAProblemNamingTheFileAndTheLimit) {
  const QuizLoadResult r = parse_quiz_file("{\"questions\": [" + nested_objects(200000) + "]}", "deep.json");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("deep.json: JSON nested more than 64 levels"), std::string::npos) << r.problems[0];
  EXPECT_TRUE(r.questions.empty());
}

TEST(HostileCourseFiles, AFifoAsQuizFileIsAProblemNotAHang) {
  TempDir dir;
  make_fifo(dir.file("quiz/01-pipe.json"));
  const QuizLoadResult r = load_quiz(dir.file("quiz"));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("01-pipe.json' is a FIFO (named pipe), not a regular file"), std::string::npos)
      << r.problems[0];
}

TEST(HostileCourseFiles, AFifoAsProgressFileIsReportedAndSetAside) {
  TempDir dir;
  const std::string path = progress_path(dir.str());
  make_fifo(path);
  const ProgressLoad loaded = load_progress(path);
  EXPECT_EQ(loaded.progress.answered(), 0);
  EXPECT_NE(loaded.message.find("is a FIFO (named pipe), not a regular file"), std::string::npos) << loaded.message;
}

TEST(HostileCourseFiles, AFifoAsLessonFileIsAnErrorNotAHang) {
  TempDir dir;
  make_fifo(dir.file("stages/pipe.md"));
  try {
    (void)load_lesson(dir.str(), "stages/pipe");
    ADD_FAILURE() << "a FIFO was read as a lesson";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe), not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpv::course
