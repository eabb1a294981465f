#pragma once
// RAII for an NCCL group: the constructor calls ncclGroupStart, end() calls ncclGroupEnd and
// reports its error, and the destructor ends a group that end() did not (an exception between
// the two), so no later NCCL call on this thread nests in a group left open.
//
// No NCCL or CUDA types here: the group calls come through a seam (two function pointers
// returning 0 on success), so tests/kernel_math drives the guard with a fake NCCL that fails and
// checks that the group always ends. engine/cuda/cuda_collectives.cpp passes the real calls.
#include <string>

#include "engine/error.h"

namespace dpv {

struct GroupCalls {
  int (*start)();                       // ncclGroupStart; 0 = success
  int (*end)();                         // ncclGroupEnd; 0 = success
  std::string (*describe)(int status);  // the error text of a status
};

class GroupGuard {
 public:
  explicit GroupGuard(const GroupCalls& calls) : calls_(calls) {
    const int status = calls_.start();
    if (status != 0) throw Error("ncclGroupStart failed: " + calls_.describe(status));
    open_ = true;
  }
  // Ends the group, launching what it holds; throws when the launch fails.
  void end() {
    if (!open_) return;
    open_ = false;
    const int status = calls_.end();
    if (status != 0) throw Error("ncclGroupEnd failed: " + calls_.describe(status));
  }
  // On an exception: ends the group (what it holds is launched or dropped by NCCL), ignoring a
  // second error so the first one reaches the caller.
  ~GroupGuard() {
    if (open_) calls_.end();
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  bool open() const { return open_; }

 private:
  GroupCalls calls_;
  bool open_ = false;
};

}  // namespace dpv
