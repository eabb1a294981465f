#pragma once
// How many of this process's CPUs are free for its own threads now: of the CPUs it may run on, how
// many the machine actually gives it while other processes run too.
//
// What the engine does with it: a stage's independent per-device jobs run on at most as many
// threads as this process may use CPUs (usable_cpus: never more busy threads than cores, so cpu:4 on
// two CPUs runs its jobs on two threads, each taking the next job left, instead of four threads
// taking turns). The free cores under another program's load are reported (`dpv bench`, the app's
// speed-up pages) but do not cut the threads further: measured on 2 cores with a busy `yes`, one
// thread was no faster than two (large MLP 0.95x against 0.94x of one device), and after the
// engine's own threads outnumbered the cores, the cut stayed for a while and made quiet two-device
// runs as slow as one (CNN 0.97x against 1.86x).
//
// How it knows, on Linux: the run-queue wait of this process's own threads (/proc/self/task/*/schedstat:
// time runnable but not running). Threads that wait for a CPU while others of this process run mean
// the machine gives it fewer cores than it keeps busy, whatever the other processes' priorities: the
// CPUs it then gets on average (its CPU time over the interval) are its free cores. Threads that do
// not wait say nothing about cores they do not use, so about once a second the full count is tried
// again for a sample's length. The CPUs come from sched_getaffinity. Elsewhere, or when /proc cannot
// be read: every usable CPU is free.
#include <chrono>
#include <cstdint>
#include <functional>

namespace dpv {

// One reading: this process's threads' CPU time and run-queue wait so far, summed over its threads.
struct CoreSample {
  unsigned usable = 1;       // CPUs this process may run on
  int64_t wall_ns = 0;       // when it was read (steady clock)
  int64_t cpu_ns = 0;        // time this process's threads ran
  int64_t wait_ns = 0;       // time they were runnable but waited for a CPU
  bool readable = false;     // false: no schedstat here, nothing known of the load
};

// What the engine acts on.
struct CoreLoad {
  unsigned usable = 1;   // CPUs this process may run on
  unsigned free = 1;     // of those, how many its threads can count on now (1..usable)
  double waiting = 0;    // over the last sample: this process's threads waiting for a CPU, on average
  double running = 0;    // over the last sample: its threads running, on average
  unsigned free_cores() const { return free; }
  // Other programs hold some of the CPUs: this process's threads waited while it got fewer than all.
  bool cores_taken() const { return free < usable; }
  // How many threads `jobs` independent jobs run on: min(jobs, usable CPUs), at least 1.
  int threads_for(int jobs) const;
};

class FreeCores {
 public:
  using Clock = std::chrono::steady_clock;
  // A fresh sample is taken at most this often; reading /proc costs tens of microseconds.
  static constexpr auto kSampleEvery = std::chrono::milliseconds(100);
  // Threads waiting for a CPU, on average over a sample, above which cores are short: a stage that
  // waits for a thread set aside for a time slice costs milliseconds.
  static constexpr double kShortOfCores = 0.25;
  // Below this, nothing waits: after kTryAgainAfter with fewer threads than CPUs, all are tried again.
  static constexpr double kNothingWaits = 0.05;
  static constexpr auto kTryAgainAfter = std::chrono::seconds(1);

  // The current figure; samples again when the last sample is older than kSampleEvery, so a
  // figure over a run wants a call before it and one after. Thread-safe (one thread samples, the
  // others read the last figure). Reads /proc: for reports, not for every stage.
  static CoreLoad now();
  // The CPUs this process may run on, read once (cheap: every stage's hand-off asks); a test
  // reader's figure while one is set.
  static unsigned usable_cpus();
  // Samples at once, whatever the age of the last sample.
  static CoreLoad sample_now();
  // The reading itself, from /proc (exposed for tests and for `dpv devices`).
  static CoreSample read_machine();
  // Tests: replace the reader (nullptr: the real one) and forget what was learnt.
  static void set_reader_for_testing(std::function<CoreSample()> reader);
};

}  // namespace dpv
