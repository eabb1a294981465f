#include "engine/free_cores.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#ifdef __linux__
#include <dirent.h>
#include <sched.h>
#endif

namespace dpv {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(FreeCores::Clock::now().time_since_epoch()).count();
}

#ifdef __linux__
unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Adds one thread's /proc/self/task/<tid>/schedstat ("run_ns wait_ns timeslices") to the sample.
// False when it cannot be read (the thread may have ended since the listing: that is not an error).
bool add_thread(const char* tid, CoreSample& s) {
  char path[96];  // snprintf: GCC 12 warns falsely (-Wrestrict) on std::string concatenation here
  if (std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", tid) >= static_cast<int>(sizeof path)) return false;
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  long long run = 0, wait = 0;
  const bool ok = std::fscanf(f, "%lld %lld", &run, &wait) == 2;
  std::fclose(f);
  if (ok) {
    s.cpu_ns += run;
    s.wait_ns += wait;
  }
  return ok;
}

CoreSample read_proc() {
  CoreSample s;
  s.usable = usable_cpus();
  s.wall_ns = steady_ns();
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return s;
  while (const dirent* entry = readdir(dir))
    if (entry->d_name[0] != '.' && add_thread(entry->d_name, s)) s.readable = true;
  closedir(dir);
  return s;
}
#else
CoreSample read_proc() {
  CoreSample s;
  s.usable = std::max(1u, std::thread::hardware_concurrency());
  s.wall_ns = steady_ns();
  return s;
}
#endif

// What was learnt. Readers load the atomics; one thread at a time samples (under `sampling`).
struct State {
  std::atomic<int64_t> sampled_at{0};  // the last sample's wall_ns; 0: never
  std::atomic<unsigned> usable{1};
  std::atomic<unsigned> free{0};       // 0: not known yet (every usable CPU)
  std::atomic<double> waiting{0};
  std::atomic<double> running{0};
  std::mutex sampling;  // try-locked by now(): a reader that finds it taken uses the last figure
  CoreSample last;      // under `sampling`
  int64_t changed_at = 0;  // when `free` last changed (under `sampling`)
  std::mutex reader_mutex;
  std::function<CoreSample()> reader;  // tests; empty: read_proc
  std::atomic<unsigned> reader_usable{0};  // the test reader's CPUs; 0: no reader
};

State& state() {
  static State s;
  return s;
}

CoreSample read_now(State& s) {
  std::lock_guard lock(s.reader_mutex);
  return s.reader ? s.reader() : read_proc();
}

// The free cores after a sample: cut to the CPUs the process got when its threads waited for one,
// all of them again once nothing has waited for a while. Caller holds `sampling`.
unsigned next_free(State& s, unsigned usable, unsigned free, double waiting, double running, int64_t now) {
  if (waiting > FreeCores::kShortOfCores) return std::clamp(static_cast<unsigned>(std::lround(running)), 1u, usable);
  const int64_t try_again = std::chrono::duration_cast<std::chrono::nanoseconds>(FreeCores::kTryAgainAfter).count();
  if (waiting < FreeCores::kNothingWaits && free < usable && now - s.changed_at >= try_again) return usable;
  return std::min(free, usable);
}

void fold_sample(State& s) {
  const CoreSample sample = read_now(s);
  const unsigned usable = std::max(1u, sample.usable);
  unsigned free = s.free.load(std::memory_order_relaxed);
  if (free == 0) free = usable;
  double waiting = 0, running = 0;
  const int64_t elapsed = sample.wall_ns - s.last.wall_ns;
  if (sample.readable && s.last.readable && elapsed > 0) {
    // A thread that ended since the last sample takes its counts with it: a negative delta is 0.
    waiting = static_cast<double>(std::max<int64_t>(0, sample.wait_ns - s.last.wait_ns)) / static_cast<double>(elapsed);
    running = static_cast<double>(std::max<int64_t>(0, sample.cpu_ns - s.last.cpu_ns)) / static_cast<double>(elapsed);
    const unsigned next = next_free(s, usable, free, waiting, running, sample.wall_ns);
    if (next != free) s.changed_at = sample.wall_ns;
    free = next;
  } else if (!sample.readable) {
    free = usable;  // nothing known: assume what the affinity allows
  }
  s.last = sample;
  s.usable.store(usable, std::memory_order_relaxed);
  s.free.store(free, std::memory_order_relaxed);
  s.waiting.store(waiting, std::memory_order_relaxed);
  s.running.store(running, std::memory_order_relaxed);
  s.sampled_at.store(std::max<int64_t>(1, sample.wall_ns), std::memory_order_release);
}

CoreLoad current(const State& s) {
  CoreLoad load;
  load.usable = s.usable.load(std::memory_order_relaxed);
  const unsigned free = s.free.load(std::memory_order_relaxed);
  load.free = free == 0 ? load.usable : std::min(free, load.usable);
  load.waiting = s.waiting.load(std::memory_order_relaxed);
  load.running = s.running.load(std::memory_order_relaxed);
  return load;
}

}  // namespace

int CoreLoad::threads_for(int jobs) const { return std::max(1, std::min(jobs, static_cast<int>(usable))); }

CoreLoad FreeCores::now() {
  State& s = state();
  const int64_t last = s.sampled_at.load(std::memory_order_acquire);
  const int64_t every = std::chrono::duration_cast<std::chrono::nanoseconds>(kSampleEvery).count();
  if (last == 0 || steady_ns() - last >= every) {
    std::unique_lock lock(s.sampling, std::try_to_lock);
    if (lock.owns_lock()) fold_sample(s);
  }
  return current(s);
}

CoreLoad FreeCores::sample_now() {
  State& s = state();
  std::lock_guard lock(s.sampling);
  fold_sample(s);
  return current(s);
}

CoreSample FreeCores::read_machine() { return read_proc(); }

unsigned FreeCores::usable_cpus() {
  static const unsigned affinity = std::max(1u, read_proc().usable);
  const unsigned testing = state().reader_usable.load(std::memory_order_relaxed);
  return testing > 0 ? testing : affinity;
}

void FreeCores::set_reader_for_testing(std::function<CoreSample()> reader) {
  State& s = state();
  std::lock_guard sampling(s.sampling);
  {
    std::lock_guard lock(s.reader_mutex);
    s.reader = std::move(reader);
    s.reader_usable.store(s.reader ? std::max(1u, s.reader().usable) : 0, std::memory_order_relaxed);
  }
  s.last = CoreSample{};
  s.changed_at = 0;
  s.free.store(0, std::memory_order_relaxed);
  s.waiting.store(0, std::memory_order_relaxed);
  s.running.store(0, std::memory_order_relaxed);
  s.sampled_at.store(0, std::memory_order_release);
}

}  // namespace dpv
