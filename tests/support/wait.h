#pragma once
// Waiting for a condition, never for a fixed time: for the suites without a Qt event loop (the
// GUI suites use gui::waitUntil, QTest::qWaitFor underneath).
#include <chrono>
#include <thread>
#include <utility>

namespace dpv::testing {

// Polls `condition` until it holds or `timeout` passes; returns whether it holds. The timeout
// only bounds a failing test: a passing one returns as soon as the condition is true.
template <typename F>
bool wait_until(F&& condition, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dpv::testing
