#pragma once
// Up-front checks of the memory a command will ask for, before any of it is allocated. Each names
// the option that asked, the bytes asked for and what for, in place of std::bad_alloc (or memory
// growing until the machine runs out) half way through.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/model_spec.h"
#include "engine/tensor.h"

namespace dpv::cli {

// The machine's physical memory in bytes: no single request of a command may exceed it.
int64_t machine_memory_bytes();

// Throws dpv::Error (RuntimeError) when `bytes` (nothing: more than 64 bits) exceeds the
// machine's memory: "<asked_by> asks for <bytes> bytes (<GiB>) for <what>, more than ...".
void check_bytes(std::optional<int64_t> bytes, const std::string& asked_by, const std::string& what);

// The data set `dpv train` generates: `samples` rows of the model's input, made as float64 rows
// then stored in the model's dtype, with int64 labels.
void check_dataset_bytes(const ModelSpec& spec, int64_t samples, const std::string& asked_by);
// The parameters, their gradients, momentum and one replica per device (`model_source` asked for
// those): what a step needs before any batch is read, so `dpv step` checks it first.
void check_parameter_bytes(const ModelSpec& spec, int devices, const std::string& model_source);
// One training step: parameters, gradients, one replica per device and momentum (`model_source`
// asked for those), and every layer's output and its gradient for `batch` rows (`batch_asked_by`).
// `sample`: one sample's input shape ([1, ...]) when a batch is given, else the shape the data set
// `dpv train` makes has (input_shape_of).
void check_step_bytes(const ModelSpec& spec, int64_t batch, int devices, const std::string& model_source,
                      const std::string& batch_asked_by, const std::optional<Shape>& sample = std::nullopt);

}  // namespace dpv::cli
