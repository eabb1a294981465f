#include "course/progress.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv::course {
namespace fs = std::filesystem;
using nlohmann::json;

void Progress::record(const std::string& question_id, const std::string& chosen, bool correct) {
  answers_[question_id] = AnswerRecord{chosen, correct};
}

const AnswerRecord* Progress::find(const std::string& question_id) const {
  auto it = answers_.find(question_id);
  return it == answers_.end() ? nullptr : &it->second;
}

int Progress::score() const {
  return static_cast<int>(std::count_if(answers_.begin(), answers_.end(), [](const auto& a) { return a.second.correct; }));
}

std::vector<std::string> Progress::missed_ids(const std::vector<std::string>& order) const {
  std::vector<std::string> out;
  std::set<std::string> listed;
  for (const auto& id : order) {
    const AnswerRecord* a = find(id);
    if (a && !a->correct && listed.insert(id).second) out.push_back(id);
  }
  for (const auto& [id, a] : answers_)  // std::map: sorted
    if (!a.correct && !listed.count(id)) out.push_back(id);
  return out;
}

std::string Progress::to_json() const {
  json answers = json::object();
  for (const auto& [id, a] : answers_) answers[id] = {{"chosen", a.chosen}, {"correct", a.correct}};
  return json{{"format", "dpviz-quiz-progress"}, {"version", 1}, {"answers", answers}}.dump(2) + "\n";
}

Progress Progress::from_json(const std::string& text, const std::string& source) {
  const json doc = parse_json(text, source, kProgressInput.max_bytes);
  // Types are checked before any value is read: json's typed reads throw on a mismatch.
  const auto format = doc.is_object() ? doc.find("format") : doc.end();
  if (!doc.is_object() || format == doc.end() || !format->is_string() ||
      format->get<std::string>() != "dpviz-quiz-progress")
    throw Error(source + ": not a dpviz quiz progress file (no \"format\": \"dpviz-quiz-progress\")", ErrorClass::ValueError);
  if (!doc.contains("answers") || !doc.at("answers").is_object())
    throw Error(source + ": 'answers' must be an object", ErrorClass::ValueError);
  Progress p;
  for (const auto& [id, a] : doc.at("answers").items()) {
    if (!a.is_object() || !a.contains("chosen") || !a.at("chosen").is_string() || !a.contains("correct") ||
        !a.at("correct").is_boolean())
      throw Error(source + ": answer for '" + id + "' needs \"chosen\" (a label) and \"correct\" (true/false)", ErrorClass::ValueError);
    p.record(id, a.at("chosen").get<std::string>(), a.at("correct").get<bool>());
  }
  return p;
}

std::string progress_path(const std::string& data_dir) { return (fs::path(data_dir) / "progress.json").string(); }

namespace {

std::string timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Moves a bad progress file out of the way so the next save starts clean and the old bytes are
// kept for whoever wants to look at them.
std::string move_aside(const std::string& path, std::string& note) {
  std::string target = path + ".corrupt-" + timestamp();
  std::error_code ec;
  for (int n = 1; fs::exists(target, ec) && n < 100; ++n) target = path + ".corrupt-" + timestamp() + "-" + std::to_string(n);
  fs::rename(path, target, ec);
  if (ec) {
    note = " It could not be moved aside (" + ec.message() + "); it will be replaced on the next save.";
    return {};
  }
  note = " It was renamed to '" + target + "'.";
  return target;
}

}  // namespace

ProgressLoad load_progress(const std::string& path) {
  ProgressLoad out;
  std::error_code ec;
  if (!fs::exists(path, ec) && !ec) return out;  // first run: nothing saved yet
  std::string problem;
  std::string text;
  if (fs::is_directory(path, ec)) {
    problem = "is a folder, not a file";
  } else {
    try {
      text = read_file(path, kProgressInput);
    } catch (const Error& e) {
      problem = std::string("cannot be read: ") + e.what();
    }
  }
  if (problem.empty()) {
    try {
      out.progress = Progress::from_json(text, path);
      return out;
    } catch (const Error& e) {
      problem = std::string("is corrupt: ") + e.what();
    } catch (const std::exception& e) {  // this loader never throws: anything else is a bad file too
      problem = std::string("is corrupt: ") + e.what();
    }
  }
  std::string note;
  if (!fs::is_directory(path, ec)) out.moved_to = move_aside(path, note);
  else note = " Remove or rename the folder so progress can be saved.";
  out.message = "The quiz progress file '" + path + "' " + problem + ". Starting with no saved answers." + note;
  return out;
}

void save_progress(const std::string& path, const Progress& progress) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw Error("cannot create the folder '" + parent.string() + "' for quiz progress: " + ec.message(), ErrorClass::OSError);
  write_file_atomic(path, progress.to_json());
}

}  // namespace dpv::course
