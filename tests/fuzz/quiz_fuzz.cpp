// Quiz files: parse_quiz_file never throws; every problem names the file, and every question it
// returns has what the quiz page relies on (an id, 2 to 6 options, a correct option among them).
#include "course/quiz.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  const course::QuizLoadResult r = course::parse_quiz_file(fuzz::input_text(data, size), "fuzz.json");
  for (const std::string& p : r.problems) fuzz::require(p.rfind("fuzz.json", 0) == 0, "problems name the file");
  for (const course::QuizQuestion& q : r.questions) {
    fuzz::require(!q.id.empty(), "a question has an id");
    fuzz::require(q.options.size() >= 2 && q.options.size() <= 6, "2 to 6 options");
    fuzz::require(q.correct_index() >= 0, "the correct option exists");
  }
  return 0;
}
