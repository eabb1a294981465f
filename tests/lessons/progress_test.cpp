// Quiz progress: score and missed questions, the JSON round trip, and corrupt files moved aside.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "course_test_util.h"
#include "course/progress.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

TEST(Progress, ScoreAndMissedFollowTheLastAnswer) {
  Progress p;
  p.record("q1", "B", true);
  p.record("q2", "A", false);
  p.record("q3", "C", false);
  p.record("q3", "D", true);  // retried and right now
  p.record("q0", "A", false);
  EXPECT_EQ(p.answered(), 4);
  EXPECT_EQ(p.score(), 2);
  EXPECT_EQ(p.missed_ids({"q2", "q1", "q3"}), (std::vector<std::string>{"q2", "q0"}));
  EXPECT_EQ(p.missed_ids(), (std::vector<std::string>{"q0", "q2"}));
  ASSERT_NE(p.find("q3"), nullptr);
  EXPECT_EQ(p.find("q3")->chosen, "D");
  EXPECT_EQ(p.find("nope"), nullptr);
}

TEST(Progress, SavesAndLoadsAgain) {
  TempDir dir;
  const std::string path = progress_path(dir.file("data/sub"));
  Progress p;
  p.record("doc-1-purpose", "B", true);
  p.record("doc-4-dtype", "A", false);
  save_progress(path, p);
  ASSERT_TRUE(fs::exists(path));
  const ProgressLoad loaded = load_progress(path);
  EXPECT_EQ(loaded.message, "");
  EXPECT_EQ(loaded.progress.answers().size(), 2u);
  EXPECT_EQ(loaded.progress.score(), 1);
  EXPECT_EQ(loaded.progress.find("doc-4-dtype")->chosen, "A");
  EXPECT_FALSE(loaded.progress.find("doc-4-dtype")->correct);
}

TEST(Progress, MissingFileIsAFreshStartWithoutMessage) {
  TempDir dir;
  const ProgressLoad loaded = load_progress(progress_path(dir.str()));
  EXPECT_EQ(loaded.message, "");
  EXPECT_EQ(loaded.progress.answered(), 0);
}

void expect_moved_aside(const std::string& path, const std::string& bytes, const std::string& why) {
  SCOPED_TRACE(why);
  std::ofstream(path, std::ios::binary) << bytes;
  const ProgressLoad loaded = load_progress(path);
  EXPECT_EQ(loaded.progress.answered(), 0);
  EXPECT_NE(loaded.message.find("progress.json"), std::string::npos) << loaded.message;
  EXPECT_NE(loaded.message.find(why), std::string::npos) << loaded.message;
  ASSERT_FALSE(loaded.moved_to.empty());
  EXPECT_NE(loaded.moved_to.find("progress.json.corrupt-"), std::string::npos);
  EXPECT_TRUE(fs::exists(loaded.moved_to));
  EXPECT_FALSE(fs::exists(path));
  std::ifstream in(loaded.moved_to, std::ios::binary);
  std::ostringstream kept;
  kept << in.rdbuf();
  EXPECT_EQ(kept.str(), bytes);  // the bad bytes are kept for inspection
  fs::remove(loaded.moved_to);
}

TEST(Progress, CorruptFilesAreRenamedAsideWithAMessage) {
  TempDir dir;
  const std::string path = progress_path(dir.str());
  expect_moved_aside(path, "{\"format\": \"dpviz-quiz-progress\", \"answers\": {", "not valid JSON");
  expect_moved_aside(path, "{\"answers\": {}}", "not a dpviz quiz progress file");
  expect_moved_aside(path, "{\"format\": \"dpviz-quiz-progress\", \"answers\": {\"q\": {\"chosen\": 3}}}", "answer for 'q'");
  expect_moved_aside(path, std::string("\0\x01\x02", 3), "not valid JSON");
}

TEST(Progress, WrongTypesAndHugeNumbersAreCorruptNotExceptions) {
  // Each of these once threw a JSON library exception out of the loader (it promises never to).
  TempDir dir;
  const std::string path = progress_path(dir.str());
  expect_moved_aside(path, "{\"format\": 1}", "not a dpviz quiz progress file");
  expect_moved_aside(path, "{\"format\": null, \"answers\": []}", "not a dpviz quiz progress file");
  expect_moved_aside(path, "1e999", "not valid JSON");
  expect_moved_aside(path, "{\"format\": \"dpviz-quiz-progress\", \"version\": 1e999, \"answers\": {}}",
                     "not valid JSON");
  expect_moved_aside(path, "{\"format\": \"dpviz-quiz-progress\", \"answers\": {\"q\": [1e999]}}", "not valid JSON");
  expect_moved_aside(path, "{\"format\": \"dpviz-quiz-progress\", \"answers\": {\"q\": [true]}}", "answer for 'q'");
}

TEST(Progress, AFolderInThePlaceOfTheFileIsReportedNotFatal) {
  TempDir dir;
  const std::string path = progress_path(dir.str());
  fs::create_directories(fs::path(path) / "inner");
  const ProgressLoad loaded = load_progress(path);
  EXPECT_EQ(loaded.progress.answered(), 0);
  EXPECT_NE(loaded.message.find("is a folder"), std::string::npos) << loaded.message;
  EXPECT_THROW(save_progress(path, Progress{}), Error);
}

TEST(Progress, SavingAfterACorruptFileWorks) {
  TempDir dir;
  const std::string path = progress_path(dir.str());
  std::ofstream(path) << "garbage";
  ProgressLoad loaded = load_progress(path);
  ASSERT_FALSE(loaded.message.empty());
  loaded.progress.record("q", "A", true);
  save_progress(path, loaded.progress);
  EXPECT_EQ(load_progress(path).progress.score(), 1);
}

}  // namespace
}  // namespace dpv::course
