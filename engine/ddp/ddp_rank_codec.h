#pragma once
// A DdpRankResult as bytes and back: how a launched rank sends what it computed to rank 0
// (through the process group, engine/process_groups/gather_bytes.h), so rank 0 can assemble the same
// `dpv step --ddp` output the in-process ranks give. Tensors travel as safetensors (exact bits),
// the rest (loss, BatchNorm statistics, buckets) as JSON with round-trip doubles.
#include <string>

#include "engine/ddp/ddp_rank.h"

namespace dpv {

std::string encode_rank_result(const DdpRankResult& r);
// Throws dpv::Error naming `source` ("rank 1's result") when the bytes are not an encoded result.
DdpRankResult decode_rank_result(const std::string& bytes, const std::string& source);

}  // namespace dpv
