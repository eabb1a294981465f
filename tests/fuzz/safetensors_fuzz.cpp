// safetensors: any bytes either parse or throw dpv::Error (anything else escaping is a crash), and
// what parses survives a round trip: save -> load gives the same names, dtypes, shapes and bytes,
// and saving that again gives the same file.
#include <cstring>

#include "engine/error.h"
#include "engine/io/safetensors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv;
  TensorMap loaded;
  try {
    loaded = parse_safetensors(fuzz::input_text(data, size), "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  const std::string saved = serialize_safetensors(loaded);
  const TensorMap again = parse_safetensors(saved, "round trip");  // must not throw
  fuzz::require(again.items().size() == loaded.items().size(), "round trip keeps every tensor");
  for (const auto& [name, t] : loaded.items()) {
    const Tensor& u = again.at(name, "round trip");
    fuzz::require(u.dtype() == t.dtype(), "round trip keeps the dtype");
    fuzz::require(u.shape() == t.shape(), "round trip keeps the shape");
    fuzz::require(u.nbytes() == t.nbytes() && (t.nbytes() == 0 || std::memcmp(u.raw(), t.raw(), t.nbytes()) == 0),
                  "round trip keeps the bytes");
  }
  fuzz::require(serialize_safetensors(again) == saved, "saving a loaded file again gives the same bytes");
  return 0;
}
