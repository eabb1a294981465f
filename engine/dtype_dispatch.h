#pragma once
// Calls f with a typed null pointer (float* or double*) for a floating dtype, so backends write
// each op once as a template: dispatch_float(t.dtype(), "relu", [&](auto* tag) { using T = ...; }).
#include <string>

#include "engine/dtype.h"
#include "engine/error.h"

namespace dpv {

template <typename F>
void dispatch_float(DType dtype, const char* op, F&& f) {
  if (dtype == DType::Float32)
    f(static_cast<float*>(nullptr));
  else if (dtype == DType::Float64)
    f(static_cast<double*>(nullptr));
  else
    throw Error(std::string(op) + " expects a floating tensor, got int64");
}

}  // namespace dpv
