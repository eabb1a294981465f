#pragma once
// The practice quiz as plain data, read from lessons/quiz/*.json (format: lessons/README.md).
// Loading never stops at the first bad file: every question that validates is kept, and each
// problem is reported with the file (and question) it came from, so the rest of the course works.
#include <optional>
#include <string>
#include <vector>

namespace dpv::course {

struct QuizOption {
  std::string label;  // "A", "B", ... by position
  std::string text;
  // What a scenario reports when this option is the true one ("3,3,3,1", "[8, 10]", "sum").
  // Empty for options no scenario can imply.
  std::string value;
  // Said when this option is chosen, under the verdict ("B works too: the same class ...").
  std::string feedback;
  // Counted as a right answer although `correct` names another option (the question's canonical
  // answer): a spelling that works as well. Needs `feedback` saying why.
  bool also_correct = false;
};

// Something the engine can run to show (and prove) the answer.
struct QuizScenario {
  std::string type;         // one of scenario_types() (engine/course/scenario.h)
  std::string params_json;  // the "params" object, as JSON text
};

// Where a question comes from (the quiz file's "origin": "document" or "dpviz", the default).
enum class QuizOrigin { Dpviz, Document };

struct QuizQuestion {
  std::string id;
  std::string difficulty;   // easy, medium, hard
  std::string prompt;
  std::string code;         // optional: shown as code
  std::vector<QuizOption> options;  // 2 to 6
  std::string correct;      // a label of `options`
  std::vector<std::string> solution;  // worked steps
  std::string quick_check;
  std::string hint;
  std::vector<std::string> mistakes;  // common mistakes
  std::optional<QuizScenario> scenario;
  std::string link;         // optional page id: iteration, bnlab, sample
  QuizOrigin origin = QuizOrigin::Dpviz;  // Document for the source document's questions
  std::string section;      // "dp" (nn.DataParallel, the default) or "ddp" (DistributedDataParallel)
  std::string source;       // the file it came from (for messages)

  const QuizOption* option(const std::string& label) const;
  int correct_index() const;  // index of the correct option in `options`, -1 if none
  // Whether answering `label` counts as right: the correct option, or one marked also_correct.
  bool accepts(const std::string& label) const;
};

struct QuizLoadResult {
  std::vector<QuizQuestion> questions;  // in file-name order, then the order inside each file
  std::vector<std::string> problems;    // "quiz/07-bad.json: question 'x': options: ..."
};

// Difficulties and page ids a question may name.
const std::vector<std::string>& quiz_difficulties();
const std::vector<std::string>& quiz_link_pages();
// Sections of the quiz, in the order the page shows them: "dp", "ddp".
const std::vector<std::string>& quiz_sections();
// "DataParallel" / "DistributedDataParallel": a section's heading.
std::string quiz_section_title(const std::string& section);

// Parses one quiz file: a question object, or {"questions": [ ... ]}. Questions that fail
// validation are left out and described in `problems`, each naming `source`.
QuizLoadResult parse_quiz_file(const std::string& json_text, const std::string& source);

// Loads every *.json file of `quiz_dir` in file-name order. Duplicate ids keep the first one.
// A missing folder is a problem, not an exception.
QuizLoadResult load_quiz(const std::string& quiz_dir);

// What a question's scenario says about the run it stands for, for a page that shows that run:
// its devices ("devices": 1 to 8 simulated GPUs; 0 when it names none or more), batch ("batch", or
// the first dimension of "input_shape"; 0 when it names none), model ("preset", when that is a
// preset's name; empty otherwise) and BatchNorm mode ("sync_bn", when named). Parameters that
// are not valid JSON name nothing.
struct ScenarioSetup {
  int devices = 0;
  int batch = 0;
  std::string preset;
  std::optional<bool> sync_bn;
};
ScenarioSetup scenario_setup(const QuizScenario& scenario);

// Label of the option at `index`: 0 -> "A".
std::string option_label(int index);

}  // namespace dpv::course
