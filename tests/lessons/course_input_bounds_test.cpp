// The course's files against their bounds (hostile_course_files_test.cpp has a quiz nested in
// objects and FIFOs): progress nested 200,000 deep as arrays and as objects, a quiz nested as
// arrays, each kind one byte over its limit (a sparse file, no byte written) and a folder where a
// file belongs. Each is a reported problem naming the file, never a crash or a read.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "course/lessons.h"
#include "course/progress.h"
#include "course/quiz.h"
#include "course_test_util.h"
#include "engine/error.h"
#include "engine/io/input_file.h"

namespace dpv::course {
namespace {

using testing::TempDir;

constexpr size_t kHostileDepth = 200000;

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  return s + "1" + std::string(depth, '}');
}

// A sparse file of the kind's limit plus one byte.
std::string one_byte_over(const TempDir& dir, const std::string& name, const InputKind& kind) {
  const std::string p = dir.write(name, "");
  EXPECT_EQ(::truncate(p.c_str(), static_cast<off_t>(kind.max_bytes + 1)), 0) << p;
  return p;
}

std::string over_limit_text(const std::string& path, const InputKind& kind) {
  return "'" + path + "' is " + std::to_string(kind.max_bytes + 1) + " bytes, over the " +
         describe_bytes(kind.max_bytes) + " limit for a " + kind.name;
}

TEST(CourseInputBounds, ProgressNested200000DeepIsRefusedNamingTheFileAndTheLimit) {
  for (const std::string& deep : {nested_arrays(kHostileDepth), nested_objects(kHostileDepth)}) {
    const std::string text = "{\"format\": \"dpviz-quiz-progress\", \"version\": 1, \"answers\": {\"q\": " + deep + "}}";
    try {
      (void)Progress::from_json(text, "progress.json");
      ADD_FAILURE() << "a progress file nested 200,000 deep loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("progress.json: JSON nested more than 64 levels"), std::string::npos)
          << e.what();
    }
    TempDir dir;
    const std::string path = dir.write("progress.json", text);
    const ProgressLoad loaded = load_progress(path);
    EXPECT_EQ(loaded.progress.answered(), 0);
    EXPECT_NE(loaded.message.find("JSON nested more than 64 levels"), std::string::npos) << loaded.message;
    EXPECT_FALSE(loaded.moved_to.empty());  // set aside, so the next save does not lose it
  }
}

TEST(CourseInputBounds, AQuizNestedAsArraysIsAProblemNamingTheFile) {
  const QuizLoadResult r = parse_quiz_file("{\"questions\": " + nested_arrays(kHostileDepth) + "}", "deep.json");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("deep.json: JSON nested more than 64 levels"), std::string::npos) << r.problems[0];
}

TEST(CourseInputBounds, EveryCourseFileOneByteOverItsLimitIsRefusedNamingTheLimit) {
  TempDir dir;
  const std::string quiz = one_byte_over(dir, "quiz/01-big.json", kQuizInput);
  const QuizLoadResult r = load_quiz(dir.file("quiz"));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(over_limit_text(quiz, kQuizInput)), std::string::npos) << r.problems[0];

  const std::string lesson = one_byte_over(dir, "lessons/stages/big.md", kLessonInput);
  try {
    (void)load_lesson(dir.file("lessons"), "stages/big");
    ADD_FAILURE() << "a lesson over the limit was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(over_limit_text(lesson, kLessonInput)), std::string::npos) << e.what();
  }

  const std::string progress = one_byte_over(dir, "data/progress.json", kProgressInput);
  const ProgressLoad loaded = load_progress(progress);
  EXPECT_NE(loaded.message.find(over_limit_text(progress, kProgressInput)), std::string::npos) << loaded.message;
}

TEST(CourseInputBounds, AFolderWhereACourseFileBelongsIsAProblem) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("quiz/02-folder.json"));
  const QuizLoadResult r = load_quiz(dir.file("quiz"));
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("Is a directory: '" + dir.file("quiz/02-folder.json") + "'"), std::string::npos)
      << r.problems[0];
  std::filesystem::create_directories(dir.file("lessons/stages/folder.md"));
  try {
    (void)load_lesson(dir.file("lessons"), "stages/folder");
    ADD_FAILURE() << "a folder was read as a lesson";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::IsADirectoryError) << e.what();
  }
  std::filesystem::create_directories(dir.file("data/progress.json"));
  const ProgressLoad loaded = load_progress(dir.file("data/progress.json"));
  EXPECT_NE(loaded.message.find("is a folder, not a file"), std::string::npos) << loaded.message;
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("data/progress.json")));  // left where it is
}

}  // namespace
}  // namespace dpv::course
