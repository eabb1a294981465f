#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dpv {

enum class DType { Float32, Float64, Int64 };

size_t dtype_size(DType t);
// PyTorch's scalar type names, as they appear in its error messages: "Float", "Double", "Long".
const char* dtype_torch_name(DType t);
// Lower-case names used in model specs and the app: "float32", "float64", "int64".
const char* dtype_name(DType t);
// safetensors dtype codes: "F32", "F64", "I64".
const char* dtype_safetensors_code(DType t);
// Parses "float32"/"float64"/"int64" (also "float"/"double"/"long"); throws dpv::Error otherwise.
DType parse_dtype(const std::string& name);
// Parses a safetensors code; throws dpv::Error for codes the engine does not hold.
DType parse_safetensors_dtype(const std::string& code);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }

}  // namespace dpv
