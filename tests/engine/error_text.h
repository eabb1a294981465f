#pragma once
// The message of the dpv::Error a call throws, or "<no error>": tests compare error texts.
#include <string>

#include "engine/error.h"

namespace dpv::testing {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dpv::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace dpv::testing
