#pragma once
// A small tensor: shape, dtype, device, shared storage with an offset (views for chunks).
// Only what the modules need; not a general framework. Data is host memory for host tensors and
// simulated CPU devices, device memory for CUDA devices (then data() is a device pointer).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/index.h"

namespace dpv {

class Device;
using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);        // "[8, 10]"
std::string torch_size_str(const Shape& s);   // "torch.Size([8, 10])"

// Owns one allocation, on the host (device == nullptr) or on a device.
struct Storage {
  Storage(size_t bytes, std::shared_ptr<Device> device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<Device> device;  // null: host memory
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised tensor on `device` (null: host).
  static Tensor empty(const Shape& shape, DType dtype, std::shared_ptr<Device> device = nullptr);
  static Tensor zeros(const Shape& shape, DType dtype, std::shared_ptr<Device> device = nullptr);
  static Tensor full(const Shape& shape, DType dtype, double value, std::shared_ptr<Device> device = nullptr);
  // Host tensor from values (converted to dtype).
  static Tensor from_doubles(const Shape& shape, DType dtype, const std::vector<double>& values);
  static Tensor from_int64(const Shape& shape, const std::vector<int64_t>& values);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(ix(i < 0 ? i + ndim() : i)); }
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return ix(numel()) * dtype_size(dtype_); }
  Device* device() const { return storage_ ? storage_->device.get() : nullptr; }
  const std::shared_ptr<Device>& device_ptr() const;
  bool on_host_memory() const;  // host tensor or simulated CPU device: data() is readable here
  // Index of the device in its set, -1 for host tensors.
  int device_index() const;
  std::string device_name() const;  // "cpu" for host tensors, else Device::name()

  void* raw() const { return static_cast<char*>(storage_->data) + offset_bytes_; }
  template <typename T> T* data() const { return static_cast<T*>(raw()); }
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

  // Views sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;  // rows [begin, end) of dim 0
  Tensor reshape(const Shape& shape) const;

  // Copies.
  Tensor to(std::shared_ptr<Device> device) const;  // null: to host
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same dtype and numel; any devices

  // Host copy of the first `max_count` values as doubles (for snapshots, tests and printing);
  // from a device only those values are copied.
  std::vector<double> to_doubles(size_t max_count = SIZE_MAX) const;
  std::vector<int64_t> to_int64() const;
  double item() const;  // one-element tensors

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::Float32;
};

}  // namespace dpv
