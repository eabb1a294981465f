#pragma once
// The Reducer's gradient buckets (torch/csrc/distributed/c10d/reducer.cpp, PyTorch 1.13).
//
// compute_bucket_assignment_by_size walks the parameters in the order given, adds each one's
// numel * element_size bytes to the open bucket, and closes the bucket when its size reaches the
// current limit (the parameter that crosses the limit stays in it); the next bucket gets the next
// limit, the last limit repeats. Without a given order (construction) the buckets are sorted by
// their smallest parameter index; with the measured ready order (the rebuild) they are kept in
// that order.
//
// DDP's life cycle with find_unused_parameters=False:
//   iteration 1: ONE bucket with every parameter (limits [sys.maxsize]);
//   before the 2nd forward: rebuilt once in the order gradients became ready in iteration 1,
//   limits [1 MiB, bucket_cap_mb MiB]. Buckets are then launched strictly in index order.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "engine/tensor.h"

namespace dpv {

constexpr size_t kDdpFirstBucketBytes = 1024 * 1024;  // dist._DEFAULT_FIRST_BUCKET_BYTES
constexpr double kDdpDefaultBucketCapMb = 25.0;

struct BucketParam {
  int64_t numel = 0;
  DType dtype = DType::Float32;
  size_t bytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
};

struct BucketAssignment {
  std::vector<std::vector<size_t>> buckets;  // parameter indices per bucket, bucket 0 first
  std::vector<size_t> size_limits;           // the limit each bucket was filled against
};

// `order`: the parameter indices in the order to walk (empty: 0..P-1, then buckets sorted by their
// smallest index). Parameters of different dtypes never share a bucket.
BucketAssignment compute_bucket_assignment_by_size(const std::vector<BucketParam>& params,
                                                   const std::vector<size_t>& size_limits,
                                                   const std::vector<size_t>& order = {});

// bucket_cap_mb in bytes: int(bucket_cap_mb * 1024 * 1024) ("MB" means MiB).
size_t bucket_bytes_cap(double bucket_cap_mb);

// Iteration 1's single bucket (what DDP's constructor builds with find_unused_parameters=False).
BucketAssignment initial_buckets(const std::vector<BucketParam>& params);
// The one rebuild before the second forward: ready order, limits [first_bucket_bytes, cap]. The
// first limit is dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB), which PyTorch 1.13 reads when DDP is
// constructed, so a program may set it first ("User can set dist._DEFAULT_FIRST_BUCKET_BYTES to
// tune DDP first bucket", distributed.py).
BucketAssignment rebuilt_buckets(const std::vector<BucketParam>& params, const std::vector<size_t>& ready_order,
                                 double bucket_cap_mb, size_t first_bucket_bytes = kDdpFirstBucketBytes);

size_t bucket_bytes(const std::vector<BucketParam>& params, const std::vector<size_t>& bucket);

}  // namespace dpv
