#pragma once
// Quiz progress: the last answer to each question, saved as JSON in the user's data folder.
// A corrupt or unreadable file is moved aside and reported, never fatal.
#include <map>
#include <string>
#include <vector>

namespace dpv::course {

struct AnswerRecord {
  std::string chosen;   // option label
  bool correct = false;
};

class Progress {
 public:
  void record(const std::string& question_id, const std::string& chosen, bool correct);
  void clear() { answers_.clear(); }
  const AnswerRecord* find(const std::string& question_id) const;
  const std::map<std::string, AnswerRecord>& answers() const { return answers_; }
  int answered() const { return static_cast<int>(answers_.size()); }
  int score() const;  // questions whose last answer was correct
  // Ids answered wrongly, in `order` (the quiz's order); ids not in `order` follow, sorted.
  std::vector<std::string> missed_ids(const std::vector<std::string>& order = {}) const;

  std::string to_json() const;
  // Throws dpv::Error naming `source` when the text is not a progress file.
  static Progress from_json(const std::string& text, const std::string& source);

 private:
  std::map<std::string, AnswerRecord> answers_;
};

struct ProgressLoad {
  Progress progress;
  std::string message;  // empty when all went well; else what happened (file renamed aside, ...)
  std::string moved_to; // where a corrupt file was moved, if it was
};

// The progress file inside a data folder.
std::string progress_path(const std::string& data_dir);
// Missing file: empty progress, no message. Corrupt or unreadable: renamed to
// "<path>.corrupt-<YYYYMMDD-HHMMSS>", empty progress, and a message saying so.
ProgressLoad load_progress(const std::string& path);
// Atomic write (dpv::write_file_atomic); creates the folder. Throws dpv::Error on failure.
void save_progress(const std::string& path, const Progress& progress);

}  // namespace dpv::course
