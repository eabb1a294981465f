#include "course/lesson_template.h"

#include <optional>
#include <sstream>

#include "engine/error.h"

namespace dpv::course {

namespace {

struct Token {
  bool tag = false;     // a {{...}} placeholder; else plain text
  std::string text;     // the text, or the tag's inside without the braces ("#if has_batchnorm")
};

// An open {{#if}} / {{#unless}} block.
struct Block {
  bool unless = false;
  std::string name;
  bool condition = false;
  bool in_else = false;
  bool outer_shown = true;  // every enclosing block shows its current part
  bool shown() const { return outer_shown && (condition != unless) != in_else; }
};

class Renderer {
 public:
  Renderer(const std::string& lesson_id, const std::vector<NamedFact>* facts) : id_(lesson_id), facts_(facts) {}

  std::string render(const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      ++line_no_;
      render_line(line, first);
    }
    if (!blocks_.empty())
      fail("{{#" + std::string(blocks_.back().unless ? "unless " : "if ") + blocks_.back().name + "}}",
           "the block is never closed (line " + std::to_string(open_lines_.back()) + ")");
    return out_;
  }

 private:
  [[noreturn]] void fail(const std::string& placeholder, const std::string& what) const {
    throw Error("lesson '" + id_ + "', line " + std::to_string(line_no_) + ": " + placeholder + ": " + what,
                ErrorClass::ValueError);
  }

  bool shown() const { return blocks_.empty() || blocks_.back().shown(); }

  std::vector<Token> tokens(const std::string& line) const {
    std::vector<Token> out;
    size_t at = 0;
    while (at < line.size()) {
      const size_t open = line.find("{{", at);
      if (open == std::string::npos) {
        out.push_back({false, line.substr(at)});
        break;
      }
      if (open > at) out.push_back({false, line.substr(at, open - at)});
      const size_t close = line.find("}}", open + 2);
      if (close == std::string::npos) fail(line.substr(open), "'{{' without its '}}' on the same line");
      out.push_back({true, line.substr(open + 2, close - open - 2)});
      at = close + 2;
    }
    return out;
  }

  static bool is_block_tag(const Token& t) {
    return t.tag && (t.text.rfind("#", 0) == 0 || t.text.rfind("/", 0) == 0 || t.text == "else");
  }

  void render_line(const std::string& line, bool& first) {
    const std::vector<Token> parts = tokens(line);
    bool has_tags = false;
    std::string text;
    for (const Token& t : parts) {
      has_tags = has_tags || t.tag;
      if (!t.tag) {
        if (shown()) text += t.text;
      } else if (is_block_tag(t)) {
        block_tag(t.text);
      } else {
        const std::string v = value(t.text);
        if (shown()) text += v;
      }
    }
    // A line without tags is kept where it is shown (blank lines keep their paragraph breaks); a
    // line with tags only when something of it is shown, so a block of whole lines, or a line
    // holding only tags, leaves no blank line behind.
    const bool keep = has_tags ? text.find_first_not_of(" \t\r") != std::string::npos : shown();
    if (!keep) return;
    if (!first) out_ += '\n';
    out_ += text;
    first = false;
  }

  const NamedFact& fact(const std::string& name, const std::string& placeholder) const {
    if (facts_ == nullptr) fail(placeholder, "this lesson needs a run's facts and none were given");
    for (const NamedFact& f : *facts_)
      if (f.name == name) return f;
    fail(placeholder, "unknown fact '" + name + "' (lessons/README.md lists the facts)");
  }

  std::string value(const std::string& inside) const {
    const std::string placeholder = "{{" + inside + "}}";
    const NamedFact& f = fact(inside, placeholder);
    if (std::holds_alternative<bool>(f.value))
      fail(placeholder, "'" + inside + "' is a condition: use it in {{#if " + inside + "}} or {{#unless " + inside + "}}");
    if (const auto* n = std::get_if<int64_t>(&f.value)) return std::to_string(*n);
    return std::get<std::string>(f.value);
  }

  void block_tag(const std::string& inside) {
    const std::string placeholder = "{{" + inside + "}}";
    if (inside == "else") {
      if (blocks_.empty()) fail(placeholder, "{{else}} outside a block");
      if (blocks_.back().in_else) fail(placeholder, "a second {{else}} in one block");
      blocks_.back().in_else = true;
      return;
    }
    if (inside == "/if" || inside == "/unless") {
      const bool unless = inside == "/unless";
      if (blocks_.empty()) fail(placeholder, "closes a block that was never opened");
      if (blocks_.back().unless != unless)
        fail(placeholder, "closes {{#" + std::string(blocks_.back().unless ? "unless " : "if ") + blocks_.back().name + "}}");
      blocks_.pop_back();
      open_lines_.pop_back();
      return;
    }
    Block b;
    if (inside.rfind("#if ", 0) == 0) b.name = inside.substr(4);
    else if (inside.rfind("#unless ", 0) == 0) { b.unless = true; b.name = inside.substr(8); }
    else fail(placeholder, "not a block tag: use {{#if name}}, {{#unless name}}, {{else}}, {{/if}} or {{/unless}}");
    const NamedFact& f = fact(b.name, placeholder);
    const bool* condition = std::get_if<bool>(&f.value);
    if (condition == nullptr) fail(placeholder, "'" + b.name + "' is a value, not a condition");
    b.condition = *condition;
    b.outer_shown = shown();
    blocks_.push_back(b);
    open_lines_.push_back(line_no_);
  }

  std::string id_;
  const std::vector<NamedFact>* facts_;
  std::vector<Block> blocks_;
  std::vector<int> open_lines_;
  int line_no_ = 0;
  std::string out_;
};

}  // namespace

std::string render_lesson(const std::string& lesson_id, const std::string& text, const std::vector<NamedFact>& facts) {
  return Renderer(lesson_id, &facts).render(text);
}

std::string render_lesson(const std::string& lesson_id, const std::string& text, const LessonFacts& facts) {
  return render_lesson(lesson_id, text, fact_table(facts));
}

std::string render_lesson_without_run(const std::string& lesson_id, const std::string& text) {
  return Renderer(lesson_id, nullptr).render(text);
}

}  // namespace dpv::course
