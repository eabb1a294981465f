// Quiz files: parse_quiz_file never throws; every problem names the file, and every question it
// returns has what the quiz page relies on (an id, 2 to 6 options, a correct option among them),
// and its scenario's setup (what the app previews from the params: 1e400 devices, say) is computed
// without undefined behaviour.
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
    if (q.scenario) {
      const course::ScenarioSetup setup = course::scenario_setup(*q.scenario);
      fuzz::require(setup.devices >= 0 && setup.devices <= 8 && setup.batch >= 0, "a scenario's setup is in range");
    }
  }
  return 0;
}
