// Lesson files: the UTF-8 check every lesson and quiz text goes through. It never throws, and
// what it accepts holds no byte that can never appear in UTF-8.
#include "course/lessons.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  const std::string problem = course::utf8_problem(fuzz::input_text(data, size));
  if (!problem.empty()) return 0;
  for (size_t i = 0; i < size; ++i)
    fuzz::require(data[i] != 0xC0 && data[i] != 0xC1 && data[i] < 0xF5, "accepted text is UTF-8");
  // A lead byte is followed by exactly its continuation bytes.
  for (size_t i = 0; i < size;) {
    const uint8_t c = data[i];
    const size_t extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    fuzz::require(c < 0x80 || c >= 0xC2, "no stray continuation byte");
    fuzz::require(i + extra < size, "no truncated sequence");
    for (size_t k = 1; k <= extra; ++k) fuzz::require((data[i + k] & 0xC0) == 0x80, "continuation bytes follow");
    i += extra + 1;
  }
  return 0;
}
