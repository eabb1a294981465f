#include "engine/process_groups/comm_control.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "engine/error.h"

namespace dpv {
namespace {

std::string seconds_text(CommControl::Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

CommControl::CommControl(std::string backend, int rank, int world_size, std::chrono::milliseconds timeout,
                         std::function<void()> abort)
    : backend_(std::move(backend)), rank_(rank), world_size_(world_size), timeout_(timeout), abort_(std::move(abort)) {}

std::string CommControl::where() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_);
}

void CommControl::check_usable(const std::string& what) const {
  if (!aborted_) return;
  throw Error(backend_ + " " + what + " on " + where() + ": the NCCL group was aborted after " + abort_reason_ +
                  "; restart the job (an aborted communicator cannot be used again)",
              ErrorClass::RuntimeError, ErrorReason::GroupAborted);
}

void CommControl::abort_once(std::string reason) {
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = std::move(reason);
  if (abort_) abort_();
}

void CommControl::wait(const std::string& what, Clock::time_point deadline, const std::function<CommPoll()>& poll,
                       const std::string& what_to_check) {
  check_usable(what);
  const Clock::time_point started = deadline - timeout_;
  // Polls often at first (a collective of a few bytes takes microseconds), then every millisecond
  // at most, so a long wait does not keep a core busy.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    const CommPoll p = poll();
    if (p.state == CommPoll::State::Done) return;
    const Clock::time_point now = Clock::now();
    if (p.state == CommPoll::State::Failed) {
      abort_once(what + " failed (" + p.error + ")");
      throw Error(backend_ + " " + what + " failed on " + where() + " after " + seconds_text(now - started) + ": " +
                  p.error + "; " + what_to_check + ". The NCCL group was aborted: restart the job");
    }
    if (now >= deadline) {
      abort_once(what + " timed out after " + seconds_text(now - started));
      throw Error(backend_ + " " + what + " on " + where() + " timed out after " + seconds_text(now - started) +
                  " waiting for its peers: " + what_to_check +
                  ", or raise the timeout if a rank is only slow. The NCCL group was aborted: restart the job")
          .about_settings({"DPV_TIMEOUT"});
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

Error CommControl::abort_after(const std::string& what, const std::string& error) {
  abort_once(what + " failed (" + error + ")");
  return Error(backend_ + " " + what + " failed on " + where() + ": " + error +
               ". The NCCL group was aborted: restart the job");
}

void CommControl::close(const CommTeardown& calls, bool on_error) noexcept {
  if (on_error) abort_once("the rank stopped on an error");
  if (!aborted_) {
    try {
      const Clock::time_point deadline = deadline_from_now();
      if (calls.finalize) calls.finalize();
      // Finalize waits for the collectives still queued; a peer gone for good must not hang the exit.
      if (calls.poll) wait("finalize", deadline, calls.poll, "check that every rank reached the end of the job");
    } catch (...) {
      abort_once("finalize failed");  // wait aborted already when it threw; an exception of finalize itself lands here
    }
    if (!aborted_ && calls.destroy_comm) calls.destroy_comm();
  }
  if (calls.free_buffers) calls.free_buffers();
  if (calls.destroy_stream) calls.destroy_stream();
}

void throw_not_on_device(const char* op) {
  throw Error(std::string("nccl ") + op +
              ": the tensor must be on this rank's GPU (NCCL moves GPU tensors; use the gloo backend "
              "for CPU tensors, DPV_BACKEND=gloo)")
      .about_settings({"DPV_BACKEND"});
}

void require_device_tensor(const Tensor& t, const char* op) {
  if (!t.defined() || t.device() == nullptr) throw_not_on_device(op);
}

}  // namespace dpv
