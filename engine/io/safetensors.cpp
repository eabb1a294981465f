#include "engine/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the official reader's limit
constexpr size_t kSizeField = 8;                   // the u64 header length
constexpr size_t kDataAlignment = 8;               // the official writer pads the header to this
// The most dimensions a tensor may have: PyTorch's own kernels stop at 25 (MAX_DIMS in
// TensorIterator); 64 leaves room and refuses a corrupt header's 100,000-entry shape at once.
constexpr size_t kMaxRank = 64;

// One tensor entry of the header, checked.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the start of the data section
};

std::string quoted(const std::string& name) { return "'" + name + "'"; }

std::string offsets_str(uint64_t begin, uint64_t end) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...).
  std::string out = "[";
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += "]";
  return out;
}

// A JSON value that must be a non-negative integer (shape entries, offsets).
bool as_count(const Json& value, uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

Entry parse_entry(const std::string& source, const std::string& name, const Json& info, uint64_t data_size) {
  const std::string where = source + ": tensor " + quoted(name);
  check(info.is_object(), where + ": expected an object with dtype, shape and data_offsets, got " +
                              std::string(info.type_name()));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    check(info.contains(field), where + ": missing '" + field + "'");

  Entry e;
  e.name = name;
  const Json& dtype = info["dtype"];
  check(dtype.is_string(), where + ": 'dtype' must be a string such as \"F32\", got " + std::string(dtype.type_name()));
  try {
    e.dtype = parse_safetensors_dtype(dtype.get<std::string>());
  } catch (const Error& err) {
    throw err.reworded(where + ": " + err.what());
  }

  const Json& shape = info["shape"];
  check(shape.is_array(), where + ": 'shape' must be a list of sizes, got " + std::string(shape.type_name()));
  check(shape.size() <= kMaxRank, where + ": shape has " + std::to_string(shape.size()) + " dimensions, more than " +
                                      std::to_string(kMaxRank) + " (corrupt header; no tensor has that many)");
  // numel * itemsize must fit in the file, so any product above the file size is already wrong;
  // checking against int64 keeps the arithmetic exact before that comparison. The messages are
  // built only on failure: building them for every entry made a long shape quadratic.
  uint64_t numel = 1;
  e.shape.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t size = 0;
    if (!as_count(shape[i], size))
      throw Error(where + ": shape entry " + std::to_string(i) + " is " + json_excerpt(shape[i]) +
                  ", not a non-negative integer");
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(where + ": shape entry " + std::to_string(i) + " (" + std::to_string(size) + ") is too large");
    e.shape.push_back(static_cast<int64_t>(size));
    uint64_t product = 0;
    if (__builtin_mul_overflow(numel, size, &product) || product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(where + ": shape " + json_excerpt(shape) + " has more elements than can be addressed (corrupt header)");
    numel = product;
  }
  uint64_t nbytes = 0;
  check(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes),
        where + ": shape " + json_excerpt(shape) + " is too large (corrupt header)");

  const Json& offsets = info["data_offsets"];
  check(offsets.is_array() && offsets.size() == 2 && as_count(offsets[0], e.begin) && as_count(offsets[1], e.end),
        where + ": 'data_offsets' must be two non-negative integers [begin, end], got " + json_excerpt(offsets));
  check(e.begin <= e.end, where + ": data_offsets " + offsets_str(e.begin, e.end) + " end before they begin");
  const uint64_t span = e.end - e.begin;
  check(span == nbytes, where + ": shape " + shape_str(e.shape) + " " + dtype_name(e.dtype) + " needs " +
                            std::to_string(nbytes) + " bytes but data_offsets " + offsets_str(e.begin, e.end) +
                            " span " + std::to_string(span) + " bytes");
  check(e.end <= data_size, source + ": tensor " + quoted(name) + " claims " + std::to_string(span) +
                                " bytes at offset " + std::to_string(e.begin) + " but the file holds only " +
                                std::to_string(data_size) + " bytes of data (truncated or corrupt file)");
  return e;
}

void check_metadata(const std::string& source, const Json& metadata) {
  check(metadata.is_object(), source + ": '__metadata__' must be an object of strings, got " +
                                  std::string(metadata.type_name()));
  for (const auto& [key, value] : metadata.items())
    check(value.is_string(), source + ": '__metadata__' entry " + quoted(key) + " must be a string, got " +
                                 std::string(value.type_name()));
}

// The official format indexes the whole data section exactly once: no overlaps, no holes,
// nothing after the last tensor. Entries come back sorted by their data offsets.
void check_layout(const std::string& source, std::vector<Entry>& entries, uint64_t data_size) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered) {
      throw Error(source + ": tensors " + quoted(previous->name) + " " + offsets_str(previous->begin, previous->end) +
                  " and " + quoted(e.name) + " " + offsets_str(e.begin, e.end) +
                  " overlap in the data section (corrupt file)");
    }
    if (e.begin > covered) {
      throw Error(source + ": data bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                  ") belong to no tensor (the safetensors format allows no holes; corrupt file)");
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size) {
    throw Error(source + ": the file has " + std::to_string(data_size - covered) +
                " bytes after the last tensor's data (corrupt file or not a safetensors file)");
  }
}

uint64_t read_u64_le(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

TensorMap parse_safetensors(const std::string& bytes, const std::string& source) {
  return parse_safetensors_file(bytes, source).tensors;
}

SafetensorsFile parse_safetensors_file(const std::string& bytes, const std::string& source) {
  check(bytes.size() >= kSizeField, source + ": " + std::to_string(bytes.size()) +
                                        " bytes is too short for a safetensors file (it starts with an 8-byte header size)");
  const uint64_t header_size = read_u64_le(bytes.data());
  const uint64_t after_size_field = bytes.size() - kSizeField;
  check(header_size <= kMaxHeaderBytes, source + ": header size " + std::to_string(header_size) +
                                            " bytes is over the 100 MB limit (not a safetensors file, or corrupt)");
  check(header_size <= after_size_field,
        source + ": header claims " + std::to_string(header_size) + " bytes but the file has only " +
            std::to_string(after_size_field) + " bytes after the size field (truncated or not a safetensors file)");
  check(header_size >= 2 && bytes[kSizeField] == '{',
        source + ": the header does not start with '{' (not a safetensors file)");

  const std::string_view header_text(bytes.data() + kSizeField, header_size);
  const Json header = parse_json<Json>(header_text, source + ": the header", kMaxHeaderBytes);
  check(header.is_object(), source + ": the header must be a JSON object, got " + std::string(header.type_name()));

  const uint64_t data_size = after_size_field - header_size;
  std::vector<Entry> entries;
  SafetensorsFile out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      check_metadata(source, info);
      for (const auto& [key, value] : info.items()) out.metadata.emplace(key, value.get<std::string>());
      continue;
    }
    entries.push_back(parse_entry(source, name, info, data_size));
  }
  check_layout(source, entries, data_size);

  const char* data = bytes.data() + kSizeField + header_size;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw(), data + e.begin, e.end - e.begin);
    // Header keys are unique (a JSON object), so append: TensorMap::set's search made 100k tensors quadratic.
    out.tensors.items().emplace_back(e.name, std::move(t));
  }
  return out;
}

TensorMap load_safetensors(const std::string& path) { return parse_safetensors(read_file(path, kSafetensorsInput), path); }

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  // Host copies of tensors that live in device memory; host-readable ones are used in place.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const auto& [name, t] : tensors.items()) {
    check(name != "__metadata__", "cannot save a tensor named '__metadata__': the safetensors format reserves it",
          ErrorClass::ValueError);
    check(t.defined(), "cannot save tensor '" + name + "': it is undefined", ErrorClass::ValueError);
    host.push_back(t.on_host_memory() ? t : t.to(nullptr));
  }

  // Data in TensorMap order, so reading the file returns the same order. The object is written
  // entry by entry: ordered_json's operator[] searches its keys linearly, quadratic for 100k
  // tensors, and TensorMap names are unique already.
  std::string header_text = "{";
  uint64_t offset = 0;
  try {
    if (!metadata.empty()) {
      OrderedJson meta = OrderedJson::object();
      for (const auto& [key, value] : metadata) meta[key] = value;
      header_text += "\"__metadata__\":" + meta.dump();
    }
    for (size_t i = 0; i < host.size(); ++i) {
      const Tensor& t = host[i];
      OrderedJson shape = OrderedJson::array();
      for (int64_t d : t.shape()) shape.push_back(d);
      OrderedJson entry = OrderedJson::object();
      entry["dtype"] = dtype_safetensors_code(t.dtype());
      entry["shape"] = std::move(shape);
      entry["data_offsets"] = OrderedJson::array({offset, offset + t.nbytes()});
      if (header_text.size() > 1) header_text += ',';
      header_text += OrderedJson(tensors.items()[i].first).dump() + ":" + entry.dump();
      offset += t.nbytes();
    }
  } catch (const OrderedJson::type_error& err) {
    throw Error(std::string("cannot save: a tensor name or metadata text is not valid UTF-8 (") + err.what() + ")",
                ErrorClass::ValueError);
  }
  header_text += '}';
  // Spaces after the JSON so the data starts 8-byte aligned, as the official writer does.
  header_text.append((kDataAlignment - header_text.size() % kDataAlignment) % kDataAlignment, ' ');

  std::string out;
  out.reserve(kSizeField + header_text.size() + offset);
  const uint64_t header_size = header_text.size();
  out.append(reinterpret_cast<const char*>(&header_size), sizeof header_size);
  out += header_text;
  for (const Tensor& t : host)
    if (t.nbytes() > 0) out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace dpv
