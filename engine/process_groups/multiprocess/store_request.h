#pragma once
// dpv's store wire format (the store hosted by rank 0, tcp_store.h), apart from any socket: the
// client encodes a request here and the server decodes the bytes a client sent with the same code,
// so the decoding can be tested and fuzzed as a pure function of the bytes.
//
// A request, in host byte order (every rank of a job runs the same build on the same machine kind):
//   u8 command, u32 key count, keys (u32 length + bytes each), u64 value length + bytes, i64 number.
// Every length is checked against its limit before anything is allocated for it, so a client that
// claims a gigabyte costs only the bytes it really sends.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/process_groups/multiprocess/store.h"

namespace dpv::dist {

enum StoreCommand : uint8_t { kStoreHello = 1, kStoreSet, kStoreGet, kStoreAdd, kStoreCheck, kStoreWait };

inline constexpr uint64_t kMaxStoreValueBytes = uint64_t{1} << 30;  // far above any rendezvous value
inline constexpr uint32_t kMaxStoreKeys = 1u << 16;                  // a wait names one key per rank at most
inline constexpr uint32_t kMaxStoreKeyBytes = 1u << 16;              // keys are names such as "dpv/rank/3"

struct StoreRequest {
  uint8_t command = 0;  // a StoreCommand
  std::vector<std::string> keys;
  Bytes value;
  int64_t number = 0;  // the world size (hello), the delta (add) or the wait in milliseconds (get, wait)
};

// The request's bytes. Throws dpv::Error for a key or value over its limit, naming it and the limit.
Bytes encode_request(const StoreRequest& request);

// What the bytes received so far hold.
struct DecodedRequest {
  enum class Outcome : uint8_t { kRequest, kNeedMore, kMalformed };
  Outcome outcome = Outcome::kNeedMore;
  StoreRequest request;  // kRequest: the request
  size_t consumed = 0;   // kRequest: how many of the bytes it took (the rest starts the next one)
  uint64_t missing = 0;  // kNeedMore: how many more bytes must arrive before anything more can be decoded
  std::string problem;   // kMalformed: what is wrong ("a key of 70000 bytes, over the limit of 65536")
};

// Decodes the request at the start of data[0, size). Never reads past size, never allocates for a
// length that has not arrived, and asks for no byte beyond the request's end.
DecodedRequest decode_request(const char* data, size_t size);

}  // namespace dpv::dist
