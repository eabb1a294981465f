// `dpv trace merge`: per-rank Chrome traces joined into one. The input is up to four traces
// separated by NUL bytes. Any texts either merge or throw dpv::Error (a JSON library exception
// escaping is a crash), and what merges is a trace again: it merges once more on its own (unless
// the merge's one extra level of nesting passes the depth limit), and the
// Timeline's loader reads it or says why in a dpv::Error.
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/io/trace_lanes.h"
#include "engine/io/trace_merge.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  const std::string text = fuzz::input_text(data, size);
  std::vector<std::string> traces, names;
  for (size_t start = 0; traces.size() < 4;) {
    const size_t end = text.find('\0', start);
    traces.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    names.push_back("rank" + std::to_string(traces.size() - 1) + ".json");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::string merged;
  try {
    merged = merge_chrome_traces(traces, names);
  } catch (const Error&) {
    return 0;
  }
  try {
    (void)merge_chrome_traces({merged}, {"merged.json"});
  } catch (const Error& e) {
    // The merge is a trace; only a bare-array input nested to the limit comes out one level deeper.
    fuzz::require(std::string(e.what()).find("nested more than") != std::string::npos, "the merge is a trace");
  }
  try {
    (void)read_trace_lanes(merged, "merged.json");
  } catch (const Error&) {
  }
  return 0;
}
