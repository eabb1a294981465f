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
  put_prefixed(tensors, "optim/", r.optim);
  put_prefixed(tensors, "flatstate/", r.flat_state);
  if (r.flat_param.defined()) tensors.set("flat/param", r.flat_param);
  if (r.flat_grad.defined()) tensors.set("flat/grad", r.flat_grad);
  Json flat = Json::array();
  for (const FlatEntry& e : r.flat_layout.entries) flat.push_back({{"name", e.name}, {"offset", e.offset},
                                                                  {"numel", e.numel}, {"shape", e.shape}});
  Json bn = Json::array();
  for (const BatchNormStats& s : r.batchnorm)
    bn.push_back({{"layer", s.layer}, {"device", s.device}, {"mean", s.mean}, {"var", s.var}, {"count", s.count}});
  Json meta{{"rank", r.rank},
            {"loss", r.loss},
            {"batchnorm", bn},
            {"buckets", r.buckets},
            {"ready_order", r.ready_order},
            {"sample_indices", r.sample_indices},
            {"zero_stage", r.zero_stage},
            {"partition", r.partition},
            {"flat", flat},
            {"flat_numel", r.flat_layout.numel},
            {"flat_padded_numel", r.flat_layout.padded_numel},
            {"flat_world", r.flat_layout.world}};
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
    r.zero_stage = meta.at("zero_stage").get<int>();
    r.partition = meta.at("partition").get<ZeroPartition>();
    for (const Json& e : meta.at("flat"))
      r.flat_layout.entries.push_back({e.at("name").get<std::string>(), e.at("offset").get<int64_t>(),
                                       e.at("numel").get<int64_t>(), e.at("shape").get<Shape>()});
    r.flat_layout.numel = meta.at("flat_numel").get<int64_t>();
    r.flat_layout.padded_numel = meta.at("flat_padded_numel").get<int64_t>();
    r.flat_layout.world = meta.at("flat_world").get<int>();
    check(r.flat_layout.world >= 1 && r.flat_layout.padded_numel >= r.flat_layout.numel &&
              r.flat_layout.padded_numel % r.flat_layout.world == 0,
          source + " is not a rank result (a flat layout of " + std::to_string(r.flat_layout.padded_numel) +
              " elements over " + std::to_string(r.flat_layout.world) + " ranks)");
    r.optim = take_prefixed(tensors, "optim/");
    r.flat_state = take_prefixed(tensors, "flatstate/");
    if (const Tensor* t = tensors.find("flat/param")) r.flat_param = *t;
    if (const Tensor* t = tensors.find("flat/grad")) r.flat_grad = *t;
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + " is not a rank result: " + e.what());
  }
}

}  // namespace dpv
