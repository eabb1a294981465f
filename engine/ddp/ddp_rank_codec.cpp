#include "engine/ddp/ddp_rank_codec.h"

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/safetensors.h"

namespace dpv {
namespace {

using Json = nlohmann::json;

// A rank's metadata lists its sample indices: 8 digits each for a 100-million-sample epoch stays
// far under this.
constexpr uint64_t kMaxRankMetadataBytes = uint64_t{1} << 30;

void put_prefixed(TensorMap& out, const std::string& prefix, const TensorMap& in) {
  for (const auto& [name, t] : in.items()) out.set(prefix + name, t);
}

TensorMap take_prefixed(const TensorMap& all, const std::string& prefix) {
  TensorMap out;
  for (const auto& [name, t] : all.items())
    if (name.rfind(prefix, 0) == 0) out.set(name.substr(prefix.size()), t);
  return out;
}

}  // namespace

std::string encode_rank_result(const DdpRankResult& r) {
  TensorMap tensors;
  if (r.output.defined()) tensors.set("output", r.output);
  put_prefixed(tensors, "state/", r.state);
  put_prefixed(tensors, "grad/", r.grads);
  Json bn = Json::array();
  for (const BatchNormStats& s : r.batchnorm)
    bn.push_back({{"layer", s.layer}, {"device", s.device}, {"mean", s.mean}, {"var", s.var}, {"count", s.count}});
  Json meta{{"rank", r.rank},
            {"loss", r.loss},
            {"batchnorm", bn},
            {"buckets", r.buckets},
            {"ready_order", r.ready_order},
            {"sample_indices", r.sample_indices}};
  const std::string tensor_bytes = serialize_safetensors(tensors);
  const std::string meta_bytes = meta.dump();
  std::string out(8, '\0');
  const uint64_t n = tensor_bytes.size();
  std::memcpy(out.data(), &n, 8);
  return out + tensor_bytes + meta_bytes;
}

DdpRankResult decode_rank_result(const std::string& bytes, const std::string& source) {
  uint64_t n = 0;
  check(bytes.size() >= 8, source + " is not a rank result (" + std::to_string(bytes.size()) + " bytes)");
  std::memcpy(&n, bytes.data(), 8);
  check(n <= bytes.size() - 8, source + " is not a rank result (a tensor block past its end)");
  const TensorMap tensors = parse_safetensors(bytes.substr(8, n), source);
  Json meta;
  try {
    meta = parse_json<Json>(std::string_view(bytes).substr(8 + n), source + " (its metadata)", kMaxRankMetadataBytes);
    DdpRankResult r;
    r.rank = meta.at("rank").get<int>();
    r.loss = meta.at("loss").get<double>();
    if (const Tensor* o = tensors.find("output")) r.output = *o;
    r.state = take_prefixed(tensors, "state/");
    r.grads = take_prefixed(tensors, "grad/");
    for (const Json& s : meta.at("batchnorm")) {
      BatchNormStats b;
      b.layer = s.at("layer").get<int>();
      b.device = s.at("device").get<int>();
      b.mean = s.at("mean").get<std::vector<double>>();
      b.var = s.at("var").get<std::vector<double>>();
      b.count = s.at("count").get<double>();
      r.batchnorm.push_back(std::move(b));
    }
    r.buckets = meta.at("buckets").get<std::vector<std::vector<std::string>>>();
    r.ready_order = meta.at("ready_order").get<std::vector<size_t>>();
    r.sample_indices = meta.at("sample_indices").get<std::vector<int64_t>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + " is not a rank result: " + e.what());
  }
}

}  // namespace dpv
