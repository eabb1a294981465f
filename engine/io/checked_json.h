#pragma once
// The one way the engine and its front ends parse JSON. nlohmann's parser is iterative, but much of
// what follows a parse is not (dump() in a message, a copy, a comparison): a document nested 200,000
// deep would overflow the stack there. So every document is measured first, without building
// anything: its size and its nesting depth are bounded before nlohmann sees a byte, and every parse
// failure is a dpv::Error naming the source.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace dpv {

// The deepest nesting any of our formats uses is 4 (a trace event's args); 64 leaves room for
// foreign tools' trace arguments and stays far from any stack's limit.
inline constexpr int kMaxJsonDepth = 64;

// Throws dpv::Error (ValueError) "<source>: ..." when `text` is longer than max_bytes or nests
// arrays and objects deeper than kMaxJsonDepth; says where and what the limit is. Strings are
// skipped correctly (a '[' inside a string is text), so only real nesting counts.
void check_json_limits(std::string_view text, const std::string& source, uint64_t max_bytes);

// The parser's failure as "<source>: not valid JSON (at byte N): ...", with unprintable bytes
// replaced (nlohmann quotes the last bytes it read; a binary file would put them on the terminal).
Error json_parse_error(const nlohmann::json::exception& error, const std::string& source);

// A value as an error message quotes it: its JSON text, cut to `max_chars` with "... (N characters)"
// after, so a megabyte-long value does not become a megabyte-long message. Only for values of a
// parsed (so depth-checked) document: dump() recurses.
template <class Json>
std::string json_excerpt(const Json& value, size_t max_chars = 80) {
  const std::string text = value.dump();
  if (text.size() <= max_chars) return text;
  return text.substr(0, max_chars) + "... (" + std::to_string(text.size()) + " characters)";
}

// Parses `text` into Json (nlohmann::json or nlohmann::ordered_json) after check_json_limits.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& source, uint64_t max_bytes) {
  check_json_limits(text, source, max_bytes);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, and out_of_range for 1e400
    throw json_parse_error(error, source);
  }
}

}  // namespace dpv
