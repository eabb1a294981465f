// compute_bucket_assignment_by_size and the two bucket layouts DDP uses.
#include "engine/ddp/buckets.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

#include "engine/error.h"

namespace dpv {

BucketAssignment compute_bucket_assignment_by_size(const std::vector<BucketParam>& params,
                                                   const std::vector<size_t>& size_limits,
                                                   const std::vector<size_t>& order) {
  check(!size_limits.empty(), "compute_bucket_assignment_by_size: no bucket size limits");
  check(order.empty() || order.size() == params.size(),
        "compute_bucket_assignment_by_size: the order lists " + std::to_string(order.size()) + " indices for " +
            std::to_string(params.size()) + " parameters");
  struct Open {
    std::vector<size_t> indices;
    size_t size = 0;
    size_t limit = 0;
    size_t limit_index = 0;
  };
  // One open bucket per dtype (reducer.cpp keys by dtype and device; one device per rank here).
  std::map<DType, Open> open;
  std::vector<std::pair<std::vector<size_t>, size_t>> result;
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t index = order.empty() ? i : order[i];
    check(index < params.size(), "compute_bucket_assignment_by_size: parameter index " + std::to_string(index) +
                                     " out of range");
    const BucketParam& p = params[index];
    auto [it, fresh] = open.try_emplace(p.dtype);
    Open& b = it->second;
    b.indices.push_back(index);
    b.size += p.bytes();
    b.limit = size_limits[b.limit_index];
    if (b.size >= b.limit) {
      result.emplace_back(std::move(b.indices), b.limit);
      const size_t next = b.limit_index + 1 < size_limits.size() ? b.limit_index + 1 : b.limit_index;
      b = Open{};
      b.limit_index = next;
    }
  }
  for (auto& [dtype, b] : open)
    if (!b.indices.empty()) result.emplace_back(std::move(b.indices), b.limit);
  if (order.empty()) {
    std::stable_sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
      return *std::min_element(a.first.begin(), a.first.end()) < *std::min_element(b.first.begin(), b.first.end());
    });
  }
  BucketAssignment out;
  for (auto& [indices, limit] : result) {
    out.buckets.push_back(std::move(indices));
    out.size_limits.push_back(limit);
  }
  return out;
}

size_t bucket_bytes_cap(double bucket_cap_mb) {
  check(bucket_cap_mb > 0, "bucket_cap_mb must be positive, got " + std::to_string(bucket_cap_mb), ErrorClass::ValueError);
  return static_cast<size_t>(bucket_cap_mb * 1024.0 * 1024.0);
}

BucketAssignment initial_buckets(const std::vector<BucketParam>& params) {
  return compute_bucket_assignment_by_size(params, {static_cast<size_t>(std::numeric_limits<int64_t>::max())});
}

BucketAssignment rebuilt_buckets(const std::vector<BucketParam>& params, const std::vector<size_t>& ready_order,
                                 double bucket_cap_mb, size_t first_bucket_bytes) {
  check(first_bucket_bytes > 0, "dist._DEFAULT_FIRST_BUCKET_BYTES must be positive", ErrorClass::ValueError);
  return compute_bucket_assignment_by_size(params, {first_bucket_bytes, bucket_bytes_cap(bucket_cap_mb)}, ready_order);
}

size_t bucket_bytes(const std::vector<BucketParam>& params, const std::vector<size_t>& bucket) {
  size_t total = 0;
  for (size_t i : bucket) total += params.at(i).bytes();
  return total;
}

}  // namespace dpv
