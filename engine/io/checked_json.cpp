#include "engine/io/checked_json.h"

#include <cctype>

#include "engine/io/input_file.h"

namespace dpv {

void check_json_limits(std::string_view text, const std::string& source, uint64_t max_bytes) {
  check(text.size() <= max_bytes,
        source + ": " + std::to_string(text.size()) + " bytes of JSON is over the " + describe_bytes(max_bytes) +
            " limit (is it the right file?)",
        ErrorClass::ValueError);
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;  // the escaped character is text, a quote included
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      check(++depth <= kMaxJsonDepth,
            source + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep (at byte " +
                std::to_string(i) + "); no dpviz file nests that deep (is it the right file?)",
            ErrorClass::ValueError);
    } else if (ch == ']' || ch == '}') {
      --depth;  // unbalanced closers are the parser's to report
    }
  }
}

Error json_parse_error(const nlohmann::json::exception& error, const std::string& source) {
  std::string why = error.what();
  for (auto& ch : why)
    if (!std::isprint(static_cast<unsigned char>(ch))) ch = '?';
  if (const auto* parse = dynamic_cast<const nlohmann::json::parse_error*>(&error))
    return Error(source + ": not valid JSON (at byte " + std::to_string(parse->byte) + "): " + why, ErrorClass::ValueError);
  return Error(source + ": not valid JSON: " + why, ErrorClass::ValueError);
}

}  // namespace dpv
