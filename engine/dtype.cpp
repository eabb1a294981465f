#include "engine/dtype.h"

#include "engine/error.h"

namespace dpv {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
  }
  return 0;
}

const char* dtype_torch_name(DType t) {
  switch (t) {
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Int64: return "Long";
  }
  return "?";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "?";
}

const char* dtype_safetensors_code(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "float") return DType::Float32;
  if (name == "float64" || name == "double") return DType::Float64;
  if (name == "int64" || name == "long") return DType::Int64;
  throw Error("unknown dtype '" + name + "': use float32, float64 or int64", ErrorClass::ValueError);
}

DType parse_safetensors_dtype(const std::string& code) {
  if (code == "F32") return DType::Float32;
  if (code == "F64") return DType::Float64;
  if (code == "I64") return DType::Int64;
  throw Error("safetensors dtype '" + code + "' is not supported: save float32, float64 or int64 tensors",
              ErrorClass::ValueError);
}

}  // namespace dpv
