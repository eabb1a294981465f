// Chrome traces read back for the Timeline: any text either reads or throws dpv::Error, and every
// span points at a lane that exists.
#include "engine/error.h"
#include "engine/io/trace_lanes.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  TraceLanes lanes;
  try {
    lanes = read_trace_lanes(fuzz::input_text(data, size), "fuzz-trace.json");
  } catch (const Error&) {
    return 0;
  }
  for (const TraceSpan& s : lanes.spans)
    fuzz::require(s.lane >= 0 && static_cast<size_t>(s.lane) < lanes.lanes.size(), "spans point at lanes");
  return 0;
}
