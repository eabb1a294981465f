#include "engine/process_groups/multiprocess/store_request.h"

#include <cstring>

#include "engine/error.h"

namespace dpv::dist {
namespace {

template <typename T>
void put(Bytes& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

// Reads fields front to back; a field that has not fully arrived sets `missing` and stops.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  size_t offset() const { return offset_; }
  uint64_t missing() const { return missing_; }
  // True once `n` more bytes are there; otherwise records how many are missing.
  bool has(uint64_t n) {
    if (size_ - offset_ >= n) return true;
    missing_ = n - (size_ - offset_);
    return false;
  }
  template <typename T>
  bool number(T& v) {
    if (!has(sizeof(T))) return false;
    std::memcpy(&v, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  // Skips `n` bytes known to be there, returning where they start.
  const char* take(size_t n) {
    const char* p = data_ + offset_;
    offset_ += n;
    return p;
  }

 private:
  const char* data_;
  size_t size_;
  size_t offset_ = 0;
  uint64_t missing_ = 0;
};

DecodedRequest need_more(const Reader& r) {
  DecodedRequest d;
  d.missing = r.missing();
  return d;
}

DecodedRequest malformed(std::string problem) {
  DecodedRequest d;
  d.outcome = DecodedRequest::Outcome::kMalformed;
  d.problem = std::move(problem);
  return d;
}

}  // namespace

Bytes encode_request(const StoreRequest& request) {
  if (request.keys.size() > kMaxStoreKeys)
    throw Error(std::to_string(request.keys.size()) + " keys in one store request, over the limit of " +
                std::to_string(kMaxStoreKeys));
  Bytes out;
  put<uint8_t>(out, request.command);
  put<uint32_t>(out, static_cast<uint32_t>(request.keys.size()));
  for (const std::string& k : request.keys) {
    if (k.size() > kMaxStoreKeyBytes)
      throw Error("store key '" + k.substr(0, 40) + "...' is " + std::to_string(k.size()) +
                  " bytes, over the store's limit of " + std::to_string(kMaxStoreKeyBytes) + " bytes for a key");
    put<uint32_t>(out, static_cast<uint32_t>(k.size()));
    out.insert(out.end(), k.begin(), k.end());
  }
  if (request.value.size() > kMaxStoreValueBytes)
    throw Error("a store value of " + std::to_string(request.value.size()) + " bytes is over the store's limit of " +
                std::to_string(kMaxStoreValueBytes) + " bytes");
  put<uint64_t>(out, request.value.size());
  out.insert(out.end(), request.value.begin(), request.value.end());
  put<int64_t>(out, request.number);
  return out;
}

DecodedRequest decode_request(const char* data, size_t size) {
  Reader r(data, size);
  // Pass 1: every length checked and every byte present, nothing copied (the server decodes again
  // as each step of a long value arrives, so this pass must stay cheap).
  uint8_t command = 0;
  if (!r.number(command)) return need_more(r);
  if (command < kStoreHello || command > kStoreWait)
    return malformed("unknown command " + std::to_string(command) + " (not dpv's store protocol)");
  uint32_t key_count = 0;
  if (!r.number(key_count)) return need_more(r);
  if (key_count > kMaxStoreKeys)
    return malformed(std::to_string(key_count) + " keys, over the limit of " + std::to_string(kMaxStoreKeys));
  for (uint32_t i = 0; i < key_count; ++i) {
    uint32_t length = 0;
    if (!r.number(length)) return need_more(r);
    if (length > kMaxStoreKeyBytes)
      return malformed("a key of " + std::to_string(length) + " bytes, over the limit of " +
                       std::to_string(kMaxStoreKeyBytes));
    if (!r.has(length)) return need_more(r);
    r.take(length);
  }
  uint64_t value_size = 0;
  if (!r.number(value_size)) return need_more(r);
  if (value_size > kMaxStoreValueBytes)
    return malformed("a value of " + std::to_string(value_size) + " bytes, over the limit of " +
                     std::to_string(kMaxStoreValueBytes));
  if (!r.has(value_size + sizeof(int64_t))) return need_more(r);

  // Pass 2: all of it is there; copy it out.
  Reader full(data, size);
  DecodedRequest d;
  d.outcome = DecodedRequest::Outcome::kRequest;
  full.number(d.request.command);
  full.number(key_count);
  d.request.keys.reserve(key_count);
  for (uint32_t i = 0; i < key_count; ++i) {
    uint32_t length = 0;
    full.number(length);
    d.request.keys.emplace_back(full.take(length), length);
  }
  full.number(value_size);
  const char* value = full.take(value_size);
  d.request.value.assign(value, value + value_size);
  full.number(d.request.number);
  d.consumed = full.offset();
  return d;
}

}  // namespace dpv::dist
