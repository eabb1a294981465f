#pragma once
// The one way stale replies are dropped. A page (or the engine controller) starts a new generation
// whenever what it asked for changes (new settings, a reset); every request carries the generation
// it was made in and every reply carries it back; a reply whose generation is no longer current is
// ignored. The counter may be read from a worker thread, so a worker can skip requests that are
// already stale before doing the work.
#include <QtGlobal>
#include <atomic>

namespace gui {

class Generation {
 public:
  // Starts a new generation (on the owner's thread) and returns it; replies of older ones are stale.
  quint64 next() { return value_.fetch_add(1) + 1; }
  // The current generation (0 before the first next()).
  quint64 current() const { return value_.load(); }
  // Whether a reply made in `generation` still counts. Safe from any thread.
  bool isCurrent(quint64 generation) const { return generation == value_.load(); }

 private:
  std::atomic<quint64> value_{0};
};

}  // namespace gui
