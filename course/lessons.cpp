#include "course/lessons.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "engine/error.h"
#include "engine/io/input_file.h"

namespace dpv::course {
namespace fs = std::filesystem;

namespace {

// Ids are short relative names: letters, digits, '-', '_' and '/' between parts. This keeps a
// page from reading outside the lessons folder by accident ("../", absolute paths).
bool is_plain_id(const std::string& id) {
  if (id.empty() || id.front() == '/' || id.back() == '/') return false;
  std::istringstream parts(id);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace

std::string utf8_problem(const std::string& bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) { ++i; continue; }
    int extra = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) { extra = 1; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { extra = 2; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { extra = 3; cp = c & 0x07; }
    else return "invalid UTF-8 lead byte at byte " + std::to_string(i);
    if (i + static_cast<size_t>(extra) >= n) return "truncated UTF-8 sequence at byte " + std::to_string(i);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = s[i + static_cast<size_t>(k)];
      if ((cc & 0xC0) != 0x80) return "invalid UTF-8 continuation byte at byte " + std::to_string(i + static_cast<size_t>(k));
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are not UTF-8.
    if ((extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return "invalid UTF-8 sequence at byte " + std::to_string(i);
    i += static_cast<size_t>(extra) + 1;
  }
  return {};
}

std::string load_lesson(const std::string& lessons_dir, const std::string& id) {
  if (!is_plain_id(id)) throw Error("lesson id '" + id + "' is not a plain relative name like 'stages/scatter'", ErrorClass::ValueError);
  const fs::path path = fs::path(lessons_dir) / (id + ".md");
  const std::string where = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("lesson file '" + where + "' is missing", ErrorClass::FileNotFoundError);
  if (fs::is_directory(path, ec)) throw Error("lesson file '" + where + "' is a folder, not a file", ErrorClass::IsADirectoryError);
  std::string bytes = read_file(where, kLessonInput);
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error("lesson file '" + where + "' is empty", ErrorClass::ValueError);
  if (const std::string problem = utf8_problem(bytes); !problem.empty())
    throw Error("lesson file '" + where + "' is not valid UTF-8: " + problem, ErrorClass::UnicodeDecodeError);
  // A UTF-8 byte-order mark is legal but would show up as a stray character in the page.
  if (bytes.rfind("\xEF\xBB\xBF", 0) == 0) bytes.erase(0, 3);
  return bytes;
}

const std::vector<std::string>& stage_lesson_names() {
  static const std::vector<std::string> names = {"scatter", "replicate",    "forward",  "gather", "loss",
                                                 "grad_scatter", "backward", "reduce_grads", "step"};
  return names;
}

const std::vector<std::string>& ddp_topic_lesson_names() {
  // "faults": the Timeline page's fault lab, written from the lab's run (course/fault_facts.h).
  static const std::vector<std::string> names = {"sampler", "buckets", "ring", "dp-vs-ddp", "faults"};
  return names;
}

const std::vector<std::string>& ddp_stage_lesson_names() {
  static const std::vector<std::string> names = {"construct", "sample",   "broadcast_buffers", "forward",
                                                 "loss",      "backward", "finalize",          "step"};
  return names;
}

const std::vector<std::string>& zero_stage_lesson_names() {
  static const std::vector<std::string> names = {"gather_params", "free_params",      "backward",
                                                 "reduce_scatter", "broadcast_params", "step"};
  return names;
}

const std::vector<std::string>& zero_topic_lesson_names() {
  static const std::vector<std::string> names = {"overview", "zero1", "fsdp", "memory"};
  return names;
}

const std::vector<std::string>& network_lesson_names() {
  static const std::vector<std::string> names = {"alpha-beta", "overlap", "compression"};
  return names;
}

const std::vector<std::string>& lesson_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v = {"intro"};
    for (const auto& s : stage_lesson_names()) v.push_back("stages/" + s);
    for (const auto& s : ddp_stage_lesson_names()) v.push_back("ddp/stages/" + s);
    v.push_back("batchnorm-lab");
    v.push_back("timeline");
    for (const auto& s : ddp_topic_lesson_names()) v.push_back("ddp/" + s);
    for (const auto& s : zero_stage_lesson_names()) v.push_back("zero/stages/" + s);
    for (const auto& s : zero_topic_lesson_names()) v.push_back("zero/" + s);
    for (const auto& s : network_lesson_names()) v.push_back("network/" + s);
    return v;
  }();
  return ids;
}

std::vector<std::string> check_lessons(const std::string& lessons_dir) {
  std::vector<std::string> problems;
  for (const auto& id : lesson_ids()) {
    try {
      (void)load_lesson(lessons_dir, id);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

std::string find_lessons_dir(const std::string& exe_dir) {
  if (const char* env = std::getenv("DPVIZ_LESSONS"); env != nullptr && *env != '\0') {
    std::error_code ec;
    const fs::path dir = fs::absolute(env, ec);
    if (!fs::is_regular_file(dir / "intro.md", ec))
      throw Error("DPVIZ_LESSONS names " + dir.string() + ", which holds no intro.md: point it at the lessons/ "
                  "folder of a dpviz checkout or installation, or unset it");
    return dir.lexically_normal().string();
  }
  std::string tried;
  fs::path base = fs::path(exe_dir);
  for (int up = 0; up <= 3; ++up) {
    const fs::path candidate = base / "share" / "dpviz" / "lessons";
    std::error_code ec;
    if (fs::is_regular_file(candidate / "intro.md", ec)) return fs::weakly_canonical(candidate, ec).string();
    tried += (tried.empty() ? "" : ", ") + candidate.lexically_normal().string();
    if (!base.has_parent_path() || base.parent_path() == base) break;
    base = base.parent_path();
  }
  throw Error("the lessons were not found (tried " + tried + "); install dpviz with `cmake --install`, run it "
              "from its build tree, or set DPVIZ_LESSONS to the lessons/ folder");
}

}  // namespace dpv::course
