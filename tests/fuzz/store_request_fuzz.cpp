// The store server's request decoding (decode_request), fed any bytes as one client's stream, as
// the server does: decode, consume what a request took, decode again. It never throws or reads past
// the bytes; "need more" asks for at least one byte and never for one past the request (so the
// server never waits for bytes a client owes it only later); a decoded request encodes back to
// exactly the bytes it took.
#include <cstring>

#include "engine/process_groups/multiprocess/store_request.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpv::dist;
  using Outcome = DecodedRequest::Outcome;
  const char* bytes = reinterpret_cast<const char*>(data);
  size_t at = 0;
  while (at < size) {
    const DecodedRequest d = decode_request(bytes + at, size - at);
    if (d.outcome == Outcome::kMalformed) {
      dpv::fuzz::require(!d.problem.empty(), "a malformed request says what is wrong");
      return 0;
    }
    if (d.outcome == Outcome::kNeedMore) {
      dpv::fuzz::require(d.missing >= 1, "need more asks for at least a byte");
      return 0;
    }
    dpv::fuzz::require(d.consumed >= 1 && d.consumed <= size - at, "a request takes bytes that are there");
    // Every shorter prefix of this request needs more, and never more than the rest of it.
    for (size_t n : {size_t{0}, d.consumed / 2, d.consumed - 1}) {
      const DecodedRequest part = decode_request(bytes + at, n);
      dpv::fuzz::require(part.outcome == Outcome::kNeedMore, "a prefix of a request needs more");
      dpv::fuzz::require(part.missing >= 1 && part.missing <= d.consumed - n, "need more stays within the request");
    }
    const Bytes again = encode_request(d.request);  // within the limits: must not throw
    dpv::fuzz::require(again.size() == d.consumed && std::memcmp(again.data(), bytes + at, d.consumed) == 0,
                       "a decoded request encodes back to its bytes");
    at += d.consumed;
  }
  return 0;
}
