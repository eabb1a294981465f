#pragma once
// The control flow of a communicator whose calls return at once and finish later, as NCCL's in its
// non-blocking mode (ncclConfig_t blocking = 0), kept apart from the library so the CPU tests can
// drive it with fakes (only engine/cuda sees NCCL's types):
//   - every operation (joining the group, a collective, the finalize before destroy) has one
//     deadline, taken before the library is called, and is polled against it: a peer that never
//     arrives makes the operation fail at the deadline instead of hanging the job;
//   - a failure or an expired deadline aborts the communicator once, and every later call fails
//     with an error that names that first cause (an aborted communicator cannot be used again);
//   - the teardown runs in its one safe order: the communicator (finalized and destroyed, or
//     nothing after an abort), then the group's own buffers, then its stream.
// PyTorch's NCCL process group does the same with its watchdog and NCCL_ASYNC_ERROR_HANDLING.
#include <chrono>
#include <functional>
#include <string>

#include "engine/tensor.h"

namespace dpv {

// One look at an operation in flight.
struct CommPoll {
  enum class State { Done, Pending, Failed };
  State state = State::Pending;
  std::string error;  // Failed: what the library said
  static CommPoll done() { return {State::Done, {}}; }
  static CommPoll pending() { return {State::Pending, {}}; }
  static CommPoll failed(std::string error) { return {State::Failed, std::move(error)}; }
};

// The calls of a teardown, made by CommControl::close in their order; tests pass fakes that log.
struct CommTeardown {
  std::function<void()> finalize;        // starts flushing the communicator (ncclCommFinalize)
  std::function<CommPoll()> poll;        // how far the finalize is (ncclCommGetAsyncError)
  std::function<void()> destroy_comm;    // ncclCommDestroy
  std::function<void()> free_buffers;    // the group's own device memory and events
  std::function<void()> destroy_stream;  // the group's own stream
};

class CommControl {
 public:
  using Clock = std::chrono::steady_clock;
  // `backend` and the rank name the group in messages ("nccl", rank 1 of 4); `abort` aborts the
  // communicator (ncclCommAbort), called at most once.
  CommControl(std::string backend, int rank, int world_size, std::chrono::milliseconds timeout,
              std::function<void()> abort);

  // The deadline of an operation about to start: take it before calling the library.
  Clock::time_point deadline_from_now() const { return Clock::now() + timeout_; }
  // Throws the error of an aborted group: "the NCCL group was aborted after <reason>; restart the job".
  void check_usable(const std::string& what) const;
  // Polls until the operation is done. On a failure, or once `deadline` has passed with the
  // operation still pending, aborts the communicator and throws a dpv::Error that says which
  // operation, after how long, and `what_to_check`.
  void wait(const std::string& what, Clock::time_point deadline, const std::function<CommPoll()>& poll,
            const std::string& what_to_check);
  // Aborts the communicator after a failure seen outside wait (an enqueue call that returned an
  // error) and returns the error to throw, which names `what` and `error`.
  Error abort_after(const std::string& what, const std::string& error);
  bool aborted() const { return aborted_; }
  // Never throws: a finalize that fails or outlives the deadline aborts the communicator instead.
  // `on_error`: the rank is stopping on an error (the group destroyed while an exception unwinds),
  // so its peers may never finalize: abort at once, as PyTorch 1.13's ~ProcessGroupNCCL does.
  void close(const CommTeardown& calls, bool on_error = false) noexcept;

 private:
  std::string where() const;  // "rank 1 of 4"
  void abort_once(std::string reason);

  std::string backend_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  std::function<void()> abort_;
  bool aborted_ = false;
  std::string abort_reason_;  // "all_reduce timed out after 30.0 s"
};

// The check the NCCL process group makes on every tensor it is given, shared with the tests'
// stand-in for it (tests/support/device_only_group.h) so a caller that hands the group host memory
// fails on the CPU as it would on the GPU (PyTorch's NCCL group rejects CPU tensors too): throws
// unless `t` lives on a device, not in plain host memory. `op`: "all_gather".
void require_device_tensor(const Tensor& t, const char* op);
// The error of that check, for the NCCL group when the device is not one of its GPUs.
[[noreturn]] void throw_not_on_device(const char* op);

}  // namespace dpv
