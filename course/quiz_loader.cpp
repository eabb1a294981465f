// Reads and validates lessons/quiz/*.json. Every check names the file, the question and the field,
// so a course author can fix a file from the message alone.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "course/lessons.h"
#include "course/quiz.h"
#include "course/scenario.h"
#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace fs = std::filesystem;
using nlohmann::json;

const QuizOption* QuizQuestion::option(const std::string& label) const {
  for (const auto& o : options)
    if (o.label == label) return &o;
  return nullptr;
}

int QuizQuestion::correct_index() const {
  for (size_t i = 0; i < options.size(); ++i)
    if (options[i].label == correct) return static_cast<int>(i);
  return -1;
}

bool QuizQuestion::accepts(const std::string& label) const {
  const QuizOption* o = option(label);
  return o && (label == correct || o->also_correct);
}

const std::vector<std::string>& quiz_difficulties() {
  static const std::vector<std::string> d = {"easy", "medium", "hard"};
  return d;
}

const std::vector<std::string>& quiz_link_pages() {
  static const std::vector<std::string> p = {"iteration", "bnlab", "sample"};
  return p;
}

const std::vector<std::string>& quiz_sections() {
  static const std::vector<std::string> s = {"dp", "ddp"};
  return s;
}

std::string quiz_section_title(const std::string& section) {
  return section == "ddp" ? "DistributedDataParallel" : "DataParallel";
}

std::string option_label(int index) { return std::string(1, static_cast<char>('A' + index)); }

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    out += i ? sep : "";
    out += v[i];
  }
  return out;
}

// Field readers: each throws dpv::Error with the field's name and what was expected.
std::string text_field(const json& q, const char* key, bool required) {
  if (!q.contains(key)) {
    if (required) throw Error(std::string("'") + key + "' is missing");
    return {};
  }
  const json& v = q.at(key);
  if (!v.is_string()) throw Error(std::string("'") + key + "' must be a string, not " + v.type_name());
  std::string s = v.get<std::string>();
  if (required && s.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(std::string("'") + key + "' is empty");
  return s;
}

// A list of strings; a single string is accepted as a list of one.
std::vector<std::string> text_list(const json& q, const char* key, bool required) {
  if (!q.contains(key)) {
    if (required) throw Error(std::string("'") + key + "' is missing");
    return {};
  }
  const json& v = q.at(key);
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) throw Error(std::string("'") + key + "' must be a list of strings, not " + v.type_name());
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      throw Error(std::string("'") + key + "' item " + std::to_string(i + 1) + " must be a string");
    out.push_back(v[i].get<std::string>());
  }
  if (required && out.empty()) throw Error(std::string("'") + key + "' is empty");
  return out;
}

std::vector<QuizOption> read_options(const json& q) {
  if (!q.contains("options")) throw Error("'options' is missing");
  const json& v = q.at("options");
  if (!v.is_array()) throw Error(std::string("'options' must be a list, not ") + v.type_name());
  if (v.size() < 2 || v.size() > 6)
    throw Error("'options' must hold 2 to 6 options, found " + std::to_string(v.size()));
  std::vector<QuizOption> options;
  for (size_t i = 0; i < v.size(); ++i) {
    QuizOption o;
    o.label = option_label(static_cast<int>(i));
    const std::string where = "option " + std::to_string(i + 1);
    if (v[i].is_string()) {
      o.text = v[i].get<std::string>();
    } else if (v[i].is_object()) {
      try {
        o.text = text_field(v[i], "text", true);
        o.value = text_field(v[i], "value", false);
        o.feedback = text_field(v[i], "feedback", false);
        if (v[i].contains("also_correct")) {
          if (!v[i].at("also_correct").is_boolean()) throw Error("'also_correct' must be true or false");
          o.also_correct = v[i].at("also_correct").get<bool>();
        }
        if (o.also_correct && o.feedback.empty())
          throw Error("'also_correct' needs a \"feedback\" that says why this option works too");
        for (const auto& key : v[i].items()) {
          static const std::set<std::string> known = {"text", "value", "label", "feedback", "also_correct"};
          if (!known.count(key.key())) throw Error("unknown field '" + key.key() + "' (a typo?)");
        }
        const std::string label = text_field(v[i], "label", false);
        if (!label.empty() && label != o.label)
          throw Error("its label is '" + label + "' but options are labelled by position, so it must be '" + o.label + "'");
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
    } else {
      throw Error(where + " must be a string or an object with \"text\"");
    }
    if (o.text.find_first_not_of(" \t\r\n") == std::string::npos) throw Error(where + " has no text");
    options.push_back(std::move(o));
  }
  return options;
}

QuizQuestion read_question(const json& q, const std::string& source) {
  if (!q.is_object()) throw Error(std::string("a question must be a JSON object, not ") + q.type_name());
  QuizQuestion out;
  out.source = source;
  out.id = text_field(q, "id", true);
  for (char c : out.id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      throw Error("'id' may hold only letters, digits, '-', '_' and '.'");
  out.difficulty = text_field(q, "difficulty", true);
  if (!contains(quiz_difficulties(), out.difficulty))
    throw Error("'difficulty' is '" + out.difficulty + "'; expected one of " + join(quiz_difficulties()));
  out.prompt = text_field(q, "prompt", true);
  out.code = text_field(q, "code", false);
  out.options = read_options(q);
  out.correct = text_field(q, "correct", true);
  if (out.correct_index() < 0)
    throw Error("'correct' is '" + out.correct + "' but the options are labelled A to " +
                option_label(static_cast<int>(out.options.size()) - 1));
  if (out.option(out.correct)->also_correct)
    throw Error("option " + out.correct + " is the 'correct' one; 'also_correct' is for other options that work too");
  out.solution = text_list(q, "solution", true);
  out.quick_check = text_field(q, "quick_check", true);
  out.hint = text_field(q, "hint", true);
  out.mistakes = text_list(q, "mistakes", true);
  out.link = text_field(q, "link", false);
  if (!out.link.empty() && !contains(quiz_link_pages(), out.link))
    throw Error("'link' is '" + out.link + "'; expected one of " + join(quiz_link_pages()));
  const std::string origin = text_field(q, "origin", false);
  if (origin == "document")
    out.origin = QuizOrigin::Document;
  else if (origin.empty() || origin == "dpviz")
    out.origin = QuizOrigin::Dpviz;
  else
    throw Error("'origin' is '" + origin + "'; expected document or dpviz");
  out.section = text_field(q, "section", false);
  if (out.section.empty()) out.section = "dp";
  if (!contains(quiz_sections(), out.section))
    throw Error("'section' is '" + out.section + "'; expected one of " + join(quiz_sections()));
  if (q.contains("scenario")) {
    const json& s = q.at("scenario");
    if (!s.is_object()) throw Error("'scenario' must be an object with \"type\" and \"params\"");
    QuizScenario sc;
    try {
      sc.type = text_field(s, "type", true);
    } catch (const Error& e) {
      throw Error(std::string("scenario: ") + e.what());
    }
    const json params = s.contains("params") ? s.at("params") : json::object();
    if (!params.is_object()) throw Error("scenario: 'params' must be an object");
    sc.params_json = params.dump();
    if (const std::string problem = scenario_problem(sc); !problem.empty()) throw Error("scenario: " + problem);
    // A scenario that implies an answer needs options that say which value each one stands for.
    if (std::none_of(out.options.begin(), out.options.end(), [](const QuizOption& o) { return !o.value.empty(); }))
      throw Error("scenario: no option has a \"value\", so the engine's answer cannot be matched to an option");
    if (out.option(out.correct)->value.empty())
      throw Error("scenario: the correct option " + out.correct + " has no \"value\" for the engine's answer to match");
    out.scenario = std::move(sc);
  }
  for (const auto& key : q.items()) {
    static const std::set<std::string> known = {"id", "difficulty", "prompt", "code", "options", "correct",
                                                "solution", "quick_check", "hint", "mistakes", "scenario",
                                                "link", "origin", "section", "title", "comment"};
    if (!known.count(key.key())) throw Error("unknown field '" + key.key() + "' (a typo?)");
  }
  for (const auto* text : {&out.prompt, &out.code, &out.quick_check, &out.hint})
    if (const std::string p = utf8_problem(*text); !p.empty()) throw Error(p);
  return out;
}

std::string question_name(const json& q, size_t index) {
  if (q.is_object() && q.contains("id") && q.at("id").is_string()) return "question '" + q.at("id").get<std::string>() + "'";
  return "question " + std::to_string(index + 1);
}

}  // namespace

QuizLoadResult parse_quiz_file(const std::string& json_text, const std::string& source) {
  QuizLoadResult result;
  if (const std::string p = utf8_problem(json_text); !p.empty()) {
    result.problems.push_back(source + ": not valid UTF-8: " + p);
    return result;
  }
  json doc;
  try {
    doc = parse_json(json_text, source, kQuizInput.max_bytes);
  } catch (const Error& e) {
    result.problems.push_back(e.what());
    return result;
  }
  std::vector<const json*> items;
  if (doc.is_object() && doc.contains("questions")) {
    const json& list = doc.at("questions");
    if (!list.is_array()) {
      result.problems.push_back(source + ": 'questions' must be a list of question objects");
      return result;
    }
    if (list.empty()) result.problems.push_back(source + ": 'questions' is empty");
    for (const auto& q : list) items.push_back(&q);
  } else if (doc.is_object()) {
    items.push_back(&doc);
  } else {
    result.problems.push_back(source + ": expected a question object or {\"questions\": [...]}, found " + doc.type_name());
    return result;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      QuizQuestion q = read_question(*items[i], source);
      if (!seen.insert(q.id).second) throw Error("id '" + q.id + "' is used twice in this file");
      result.questions.push_back(std::move(q));
    } catch (const Error& e) {
      result.problems.push_back(source + ": " + question_name(*items[i], i) + ": " + e.what());
    } catch (const std::exception& e) {  // json's own exceptions and anything else: one question's problem
      result.problems.push_back(source + ": " + question_name(*items[i], i) + ": " + e.what());
    }
  }
  return result;
}

QuizLoadResult load_quiz(const std::string& quiz_dir) {
  QuizLoadResult result;
  std::error_code ec;
  if (!fs::is_directory(quiz_dir, ec)) {
    result.problems.push_back("quiz folder '" + quiz_dir + "' is missing");
    return result;
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(quiz_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") files.push_back(it->path());
  if (ec) result.problems.push_back("quiz folder '" + quiz_dir + "' cannot be listed: " + ec.message());
  std::sort(files.begin(), files.end());
  std::set<std::string> ids;
  for (const auto& path : files) {
    const std::string source = path.string();
    std::string text;
    try {
      text = read_file(source, kQuizInput);
    } catch (const Error& e) {
      result.problems.push_back(e.what());
      continue;
    }
    QuizLoadResult one = parse_quiz_file(text, source);
    for (auto& p : one.problems) result.problems.push_back(std::move(p));
    for (auto& q : one.questions) {
      if (!ids.insert(q.id).second) {
        result.problems.push_back(source + ": question '" + q.id + "': id already used by an earlier file; skipped");
        continue;
      }
      result.questions.push_back(std::move(q));
    }
  }
  if (files.empty() && result.problems.empty()) result.problems.push_back("quiz folder '" + quiz_dir + "' holds no .json files");
  return result;
}

namespace {

// A JSON number that is a whole int, else 0 (what a missing or odd parameter counts as).
int whole_int(const json& v) {
  if (!v.is_number()) return 0;
  const double d = v.get<double>();
  const bool whole = d == static_cast<double>(static_cast<int64_t>(d));
  return whole && d >= std::numeric_limits<int>::min() && d <= std::numeric_limits<int>::max() ? static_cast<int>(d) : 0;
}

}  // namespace

ScenarioSetup scenario_setup(const QuizScenario& scenario) {
  ScenarioSetup setup;
  json params;
  try {
    params = parse_json(scenario.params_json, "the scenario's params", kQuizInput.max_bytes);
  } catch (const Error&) {
    return setup;  // scenario_problem says why; a setup is only a preview
  }
  if (!params.is_object()) return setup;
  const auto field = [&](const char* name) { return params.contains(name) ? params.at(name) : json(); };
  const int devices = whole_int(field("devices"));
  setup.devices = devices >= 1 && devices <= 8 ? devices : 0;
  int batch = whole_int(field("batch"));
  if (batch < 1) {
    const json shape = field("input_shape");
    batch = shape.is_array() && !shape.empty() ? whole_int(shape.front()) : 0;
  }
  setup.batch = std::max(batch, 0);
  const json preset = field("preset");
  const auto presets = preset_names();
  if (preset.is_string() && std::find(presets.begin(), presets.end(), preset.get<std::string>()) != presets.end())
    setup.preset = preset.get<std::string>();
  if (params.contains("sync_bn")) setup.sync_bn = params.at("sync_bn").is_boolean() && params.at("sync_bn").get<bool>();
  return setup;
}

}  // namespace dpv::course
