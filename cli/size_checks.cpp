#include "cli/size_checks.h"

#include <unistd.h>

#include "cli/format.h"
#include "engine/checked_math.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"

namespace dpv::cli {

int64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return INT64_MAX;  // unknown: only the 64-bit bound applies
  return checked_mul(static_cast<int64_t>(pages), static_cast<int64_t>(page)).value_or(INT64_MAX);
}

void check_bytes(std::optional<int64_t> bytes, const std::string& asked_by, const std::string& what) {
  const int64_t memory = machine_memory_bytes();
  if (bytes && *bytes <= memory) return;
  const std::string amount = bytes ? std::to_string(*bytes) + " bytes (" + strf("%.1f", *bytes / 1073741824.0) + " GiB)"
                                   : std::string("more than 2^63 bytes");
  throw Error(asked_by + " asks for " + amount + " for " + what + ", more than this machine's memory (" +
                  strf("%.1f", memory / 1073741824.0) + " GiB); use a smaller size",
              ErrorClass::RuntimeError);
}

namespace {

// Elements of one sample of the model's input.
int64_t sample_elements(const ModelInputShape& s) {
  return s.image ? size_or_throw(checked_mul(checked_mul(s.channels, s.height), s.width), "the input image")
                 : s.features;
}

Shape one_sample_shape(const ModelInputShape& s) {
  return s.image ? Shape{1, s.channels, s.height, s.width} : Shape{1, s.features};
}

}  // namespace

void check_dataset_bytes(const ModelSpec& spec, int64_t samples, const std::string& asked_by) {
  const ModelInputShape s = input_shape_of(spec);
  const int64_t width = sample_elements(s);
  // Per row: the float64 row being made, its copy in the model's dtype, and an int64 label.
  const auto per_row = checked_add(checked_mul(width, 8 + static_cast<int64_t>(dtype_size(spec.dtype))), 8);
  check_bytes(checked_mul(per_row, samples), asked_by,
              "the built-in data set (" + std::to_string(samples) + " samples of " + std::to_string(width) + " values)");
}

void check_parameter_bytes(const ModelSpec& spec, int devices, const std::string& model_source) {
  const Model model(spec);
  std::optional<int64_t> parameters = 0;
  for (const TensorDecl& d : model.state_decls()) {
    std::optional<int64_t> n = 1;
    for (int64_t dim : d.shape) n = checked_mul(n, dim);
    parameters = checked_add(parameters, n);
  }
  // The state on device 0, its gradients and momentum, and one replica per device.
  const int64_t element = static_cast<int64_t>(dtype_size(spec.dtype));
  check_bytes(checked_mul(checked_mul(parameters, element), 3 + devices), model_source,
              "the parameters, their gradients, momentum and " + std::to_string(devices) + " replica(s)");
}

namespace {

// Elements of a shape (nothing: more than 64 bits).
std::optional<int64_t> elements(const Shape& shape) {
  std::optional<int64_t> n = 1;
  for (int64_t dim : shape) n = checked_mul(n, dim);
  return n;
}

}  // namespace

void check_step_bytes(const ModelSpec& spec, int64_t batch, int devices, const std::string& model_source,
                      const std::string& batch_asked_by, const std::optional<Shape>& sample) {
  check_parameter_bytes(spec, devices, model_source);
  const Model model(spec);
  const int64_t element = static_cast<int64_t>(dtype_size(spec.dtype));
  const Shape one = sample ? *sample : one_sample_shape(input_shape_of(spec));
  std::vector<Shape> activations;
  try {
    activations = model.activation_shapes(one);
  } catch (const Error&) {
    // A given batch the model cannot take: the step refuses it in PyTorch's words, before any
    // activation is allocated. A shape of our own choosing must fit.
    if (sample) return;
    throw;
  }
  std::optional<int64_t> per_sample = elements(one);
  for (const Shape& shape : activations) per_sample = checked_add(per_sample, elements(shape));
  // Each layer's output and the gradient flowing back through it.
  check_bytes(checked_mul(checked_mul(per_sample, 2 * element), batch), batch_asked_by,
              "the activations and their gradients of one step (" + std::to_string(batch) + " samples)");
}

}  // namespace dpv::cli
