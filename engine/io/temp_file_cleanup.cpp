#include "engine/io/temp_file_cleanup.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace dpv {
namespace {

// A fixed table, because a signal handler may not allocate or lock: each slot is free, being
// filled, or holds a path the handler may unlink.
constexpr int kSlots = 32;
enum SlotState : int { kFree = 0, kFilling = 1, kReady = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[sizeof kSignals / sizeof kSignals[0]];

void unlink_all_then_pass_on(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kReady) ::unlink(slot.path);
  }
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& previous = g_previous[i];
    if (previous.sa_flags & SA_SIGINFO) {
      previous.sa_sigaction(sig, info, context);  // a program's own handler runs as before
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
      previous.sa_handler(sig);
    } else {
      // The default action: restore it and raise again. The signal is blocked while this handler
      // runs, so it is delivered (and ends the process by that signal) as soon as we return.
      ::sigaction(sig, &previous, nullptr);
      ::raise(sig);
    }
  }
  errno = saved_errno;
}

void install_handlers() {
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    struct sigaction previous {};
    ::sigaction(kSignals[i], nullptr, &previous);
    // An ignored signal stays ignored (nohup); a program's own handler is chained, not replaced.
    if (previous.sa_handler == SIG_IGN) continue;
    g_previous[i] = previous;
    struct sigaction action {};
    action.sa_sigaction = unlink_all_then_pass_on;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

}  // namespace

int remember_temp_file(const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, install_handlers);
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kReady, std::memory_order_release);
    return i;
  }
  return -1;
}

void forget_temp_file(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[slot].state.store(kFree, std::memory_order_release);
}

}  // namespace dpv
