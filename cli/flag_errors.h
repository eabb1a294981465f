#pragma once
// The engine says what is wrong in its own terms ("CUDA is not available for device spec 'cuda'
// ..."); which command-line flag supplied the value is the CLI's to say. These wrap the one engine
// call that takes a flag's value and reword its dpv::Error (class, reason and site kept) with the
// flag in front, in the house form "--devices: ..." (as output_paths.h's "--trace: ...").
#include <memory>
#include <string>
#include <utility>

#include "engine/device.h"
#include "engine/error.h"

namespace dpv::cli {

// Runs `call` (an engine call on the value of `flag`) and rewords an engine error as "flag: ...".
template <typename Call>
decltype(auto) with_flag(const std::string& flag, Call&& call) {
  try {
    return std::forward<Call>(call)();
  } catch (const Error& e) {
    throw e.reworded(flag + ": " + e.what());
  }
}

// DeviceSet::create on the spec given to `flag` (--devices in every command that has devices).
inline std::shared_ptr<DeviceSet> devices_from_flag(const std::string& spec, const std::string& flag = "--devices") {
  return with_flag(flag, [&] { return DeviceSet::create(spec); });
}

}  // namespace dpv::cli
