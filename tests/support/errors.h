#pragma once
// What a call throws, for the tests that compare errors: the dpv::Error itself, its message, or
// its "Class: message" form. One set of helpers for every suite.
#include <optional>
#include <string>
#include <utility>

#include "engine/error.h"

namespace dpv::testing {

inline constexpr const char* kNoError = "<no error>";

// The dpv::Error `call` throws, or nothing when it returns.
template <typename F>
std::optional<Error> caught(F&& call) {
  try {
    std::forward<F>(call)();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// The dpv::Error `call` throws; when it throws none, an error whose message is kNoError (so a
// test comparing the message or the class fails and says so).
template <typename F>
Error error_thrown_by(F&& call) {
  return caught(std::forward<F>(call)).value_or(Error(kNoError));
}

// The message of the error `call` throws ("Expected more than 1 value ..."), or kNoError.
template <typename F>
std::string error_of(F&& call) {
  const auto e = caught(std::forward<F>(call));
  return e ? std::string(e->what()) : std::string(kNoError);
}

// The error as a traceback ends ("ValueError: Expected more than 1 value ..."), or kNoError.
template <typename F>
std::string full_error_of(F&& call) {
  const auto e = caught(std::forward<F>(call));
  return e ? e->full() : std::string(kNoError);
}

}  // namespace dpv::testing
