// load_lesson: the file's text, or a dpv::Error naming the file and the problem.
#include <gtest/gtest.h>

#include "course_test_util.h"
#include "course/lessons.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

using testing::TempDir;

std::string error_of(const std::string& dir, const std::string& id) {
  try {
    (void)load_lesson(dir, id);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LessonLoader, ReadsAFileByIdAndStripsTheByteOrderMark) {
  TempDir dir;
  dir.write("intro.md", "# Intro\nDataParallel \xE2\x80\x94 one line.\n");
  dir.write("stages/scatter.md", "\xEF\xBB\xBF# Scatter\n");
  EXPECT_EQ(load_lesson(dir.str(), "intro"), "# Intro\nDataParallel \xE2\x80\x94 one line.\n");
  EXPECT_EQ(load_lesson(dir.str(), "stages/scatter"), "# Scatter\n");
}

TEST(LessonLoader, MissingEmptyAndInvalidFilesNameTheFile) {
  TempDir dir;
  dir.write("empty.md", "  \n\t\n");
  dir.write("latin1.md", "caf\xE9\n");
  dir.write("truncated.md", "ok \xE2\x80");
  dir.write("surrogate.md", "\xED\xA0\x80");
  std::string e = error_of(dir.str(), "gone");
  EXPECT_NE(e.find(dir.file("gone.md")), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  e = error_of(dir.str(), "empty");
  EXPECT_NE(e.find("empty.md' is empty"), std::string::npos) << e;
  e = error_of(dir.str(), "latin1");
  EXPECT_NE(e.find("latin1.md' is not valid UTF-8"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 3"), std::string::npos) << e;
  EXPECT_NE(error_of(dir.str(), "truncated").find("truncated UTF-8"), std::string::npos);
  EXPECT_NE(error_of(dir.str(), "surrogate").find("not valid UTF-8"), std::string::npos);
}

TEST(LessonLoader, RejectsIdsThatLeaveTheFolder) {
  TempDir dir;
  EXPECT_NE(error_of(dir.str(), "../secret").find("not a plain relative name"), std::string::npos);
  EXPECT_NE(error_of(dir.str(), "/etc/passwd").find("not a plain relative name"), std::string::npos);
  EXPECT_NE(error_of(dir.str(), "").find("not a plain relative name"), std::string::npos);
}

TEST(LessonLoader, AFolderOrUnreadableFileIsAnError) {
  TempDir dir;
  dir.write("stages/x.md/inner.md", "x");
  EXPECT_NE(error_of(dir.str(), "stages/x").find("is a folder"), std::string::npos);
}

TEST(LessonLoader, CheckLessonsListsEveryMissingLesson) {
  TempDir dir;
  dir.write("intro.md", "# Intro\n");
  const auto problems = check_lessons(dir.str());
  EXPECT_EQ(problems.size(), lesson_ids().size() - 1);
}

TEST(Utf8, AcceptsValidAndRejectsOverlongSequences) {
  EXPECT_EQ(utf8_problem("plain ascii"), "");
  EXPECT_EQ(utf8_problem("\xCE\xB3 \xE2\x88\x92 \xF0\x9F\x99\x82"), "");  // γ − 🙂
  EXPECT_NE(utf8_problem("\xC0\xAF"), "");          // overlong '/'
  EXPECT_NE(utf8_problem("\xE0\x80\xAF"), "");      // overlong, three bytes
  EXPECT_NE(utf8_problem("\xF4\x90\x80\x80"), "");  // past U+10FFFF
  EXPECT_NE(utf8_problem("\x80"), "");              // stray continuation byte
}

}  // namespace
}  // namespace dpv::course
