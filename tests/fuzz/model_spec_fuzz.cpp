// Model spec JSON: any text either parses or throws dpv::Error; a parsed spec builds a model and
// survives a round trip (to JSON and back gives the same JSON).
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_spec.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  ModelSpec spec;
  try {
    spec = parse_model_spec(fuzz::input_text(data, size), "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  const std::string json = model_spec_to_json(spec);
  const ModelSpec again = parse_model_spec(json, "round trip");  // must not throw
  fuzz::require(model_spec_to_json(again) == json, "a spec round-trips through JSON");
  const Model model(spec);
  fuzz::require(!model.describe().empty(), "a parsed spec describes itself");
  // Shapes for a small input: either computed or a dpv::Error (a layer that does not fit).
  const LayerSpec& first = spec.layers.front();
  try {
    if (first.kind == LayerKind::Conv2d) (void)model.activation_shapes({2, first.in_channels, 8, 8});
    if (first.kind == LayerKind::Linear) (void)model.activation_shapes({2, first.in_features});
  } catch (const Error&) {
  }
  return 0;
}
