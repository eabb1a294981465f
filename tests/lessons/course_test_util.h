#pragma once
// Helpers for the course tests: the source tree's lessons folder and scratch folders.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace dpv::course::testing {

inline std::string lessons_dir() { return std::string(DPV_LESSONS_SOURCE_DIR); }
inline std::string quiz_dir() { return lessons_dir() + "/quiz"; }

// Words separated by white space, as the lesson length rules count them.
inline int word_count(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  int n = 0;
  while (in >> word) ++n;
  return n;
}

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("dpv-course-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace dpv::course::testing
