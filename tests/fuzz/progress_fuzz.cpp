// Quiz progress files: any text either loads or throws dpv::Error (which load_progress turns into
// "moved aside"); what loads round-trips through to_json.
#include "course/progress.h"
#include "engine/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  course::Progress p;
  try {
    p = course::Progress::from_json(fuzz::input_text(data, size), "progress.json");
  } catch (const Error&) {
    return 0;
  }
  const std::string json = p.to_json();
  const course::Progress again = course::Progress::from_json(json, "round trip");  // must not throw
  fuzz::require(again.to_json() == json, "progress round-trips through JSON");
  fuzz::require(again.score() == p.score() && again.answered() == p.answered(), "round trip keeps the score");
  return 0;
}
