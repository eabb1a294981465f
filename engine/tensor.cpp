#include "engine/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"

namespace dpv {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  // Called for every numel() and nbytes(): the messages are built only when a check fails.
  for (int64_t d : s) {
    if (d < 0) throw Error("negative dimension in shape " + shape_str(s), ErrorClass::ValueError);
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error("shape " + shape_str(s) + " is too large", ErrorClass::ValueError);
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string torch_size_str(const Shape& s) { return "torch.Size(" + shape_str(s) + ")"; }

Storage::Storage(size_t nbytes, std::shared_ptr<Device> dev) : bytes(nbytes), device(std::move(dev)) {
  if (bytes == 0) return;
  if (device) {
    data = device->backend().allocate(bytes);
    device->memory().add(static_cast<int64_t>(bytes));
  } else {
    // 64-byte alignment suits BLAS kernels; aligned_alloc wants a size multiple of the alignment.
    data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  }
}

Storage::~Storage() {
  if (!data) return;
  if (device) {
    device->backend().release(data, bytes);
    device->memory().sub(static_cast<int64_t>(bytes));
  } else {
    std::free(data);
  }
}

Tensor Tensor::empty(const Shape& shape, DType dtype, std::shared_ptr<Device> device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(ix(shape_numel(shape)) * dtype_size(dtype),
                                         std::move(device));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, std::shared_ptr<Device> device) {
  return full(shape, dtype, 0.0, std::move(device));
}

namespace {
void fill_host(void* p, DType dtype, int64_t n, double value) {
  switch (dtype) {
    case DType::Float32: std::fill_n(static_cast<float*>(p), n, static_cast<float>(value)); break;
    case DType::Float64: std::fill_n(static_cast<double*>(p), n, value); break;
    case DType::Int64: std::fill_n(static_cast<int64_t*>(p), n, static_cast<int64_t>(value)); break;
  }
}
}  // namespace

Tensor Tensor::full(const Shape& shape, DType dtype, double value, std::shared_ptr<Device> device) {
  Tensor t = empty(shape, dtype, std::move(device));
  if (t.device())
    t.device()->backend().fill(t, value);
  else
    fill_host(t.raw(), dtype, t.numel(), value);
  return t;
}

Tensor Tensor::from_doubles(const Shape& shape, DType dtype, const std::vector<double>& values) {
  Tensor t = empty(shape, dtype);
  check(static_cast<int64_t>(values.size()) == t.numel(),
        "from_doubles: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::Float32: t.data<float>()[i] = static_cast<float>(values[i]); break;
      case DType::Float64: t.data<double>()[i] = values[i]; break;
      case DType::Int64: t.data<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
    }
  }
  return t;
}

Tensor Tensor::from_int64(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t = empty(shape, DType::Int64);
  check(static_cast<int64_t>(values.size()) == t.numel(),
        "from_int64: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

const std::shared_ptr<Device>& Tensor::device_ptr() const {
  static const std::shared_ptr<Device> none;
  return storage_ ? storage_->device : none;
}

bool Tensor::on_host_memory() const { return !device() || device()->kind() == DeviceKind::Cpu; }

int Tensor::device_index() const { return device() ? device()->index() : -1; }

std::string Tensor::device_name() const { return device() ? device()->name() : "cpu"; }

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  check(ndim() >= 1, "chunk expects at least a 1-dimensional tensor");
  if (begin < 0 || begin > end || end > shape_[0])
    throw Error("slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of range for " +
                shape_str(shape_));
  Tensor t = *this;
  t.shape_[0] = end - begin;
  int64_t row = shape_numel(shape_) / std::max<int64_t>(shape_[0], 1);
  t.offset_bytes_ += ix(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel())
    throw Error("shape '" + shape_str(shape) + "' is invalid for input of size " + std::to_string(numel()));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

namespace {
// The backend that performs a copy between two places: a CUDA side's, else a simulated device's
// (a memcpy, but one its backend sees, as a GPU's would), else none: host to host is a memcpy.
Backend* copy_backend(Device* a, Device* b) {
  if (a && a->kind() == DeviceKind::Cuda) return &a->backend();
  if (b && b->kind() == DeviceKind::Cuda) return &b->backend();
  if (a) return &a->backend();
  if (b) return &b->backend();
  return nullptr;
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  if (src.dtype() != dtype_ || src.numel() != numel())
    throw Error("copy_from: source " + shape_str(src.shape()) + " " + dtype_name(src.dtype()) + " does not match " +
                shape_str(shape_) + " " + dtype_name(dtype_));
  if (nbytes() == 0) return;
  if (Backend* be = copy_backend(device(), src.device()))
    be->copy(raw(), device(), src.raw(), src.device(), nbytes());
  else
    std::memcpy(raw(), src.raw(), nbytes());
}

Tensor Tensor::to(std::shared_ptr<Device> dev) const {
  Tensor t = empty(shape_, dtype_, std::move(dev));
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const { return to(device_ptr()); }

std::vector<double> Tensor::to_doubles(size_t max_count) const {
  const size_t n = std::min(ix(numel()), max_count);
  // Only the values kept travel: a device tensor copies its first n elements, not all of it.
  const Tensor host = device() ? reshape({numel()}).slice0(0, static_cast<int64_t>(n)).to(nullptr) : *this;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DType::Float32: out[i] = host.data<float>()[i]; break;
      case DType::Float64: out[i] = host.data<double>()[i]; break;
      case DType::Int64: out[i] = static_cast<double>(host.data<int64_t>()[i]); break;
    }
  }
  return out;
}

std::vector<int64_t> Tensor::to_int64() const {
  check(dtype_ == DType::Int64, std::string("expected an int64 tensor, got ") + dtype_name(dtype_));
  const Tensor host = device() ? to(nullptr) : *this;
  return std::vector<int64_t>(host.data<int64_t>(), host.data<int64_t>() + numel());
}

double Tensor::item() const {
  check(numel() == 1, "a Tensor with " + std::to_string(numel()) + " elements cannot be converted to Scalar");
  return to_doubles(1)[0];
}

}  // namespace dpv
