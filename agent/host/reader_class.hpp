// The scheduling class of the agent's reading thread, chosen from the rate the ring buffer
// fills at. Pure logic (no syscalls): probes/recorder.cpp applies what it decides.
//
// Why: under a load that keeps every CPU busy, each stretch the reader runs (the drain, the
// live analysis, the once-a-second /proc and cgroup reads) is a stretch a server thread waits
// for, and on a 2-CPU host that shows in the p99 of token gaps. As SCHED_IDLE the reader runs
// only where no normal thread wants the CPU (and a waking server thread preempts it at once;
// the scheduler's wake-up placement counts a CPU running only SCHED_IDLE work as idle), so
// while the ring holds many seconds of records it can afford to wait for a spare CPU. When the
// rate rises, or a drain finds the ring well filled, it goes back to SCHED_BATCH (a normal
// share, no wake-up preemption) so that nothing is lost. Leaving SCHED_IDLE needs CAP_SYS_NICE
// (sched(7)), so without it the reader stays SCHED_BATCH.
#pragma once

#include <cstdint>

namespace ld::host {

class ReaderClass {
 public:
  enum class Class { batch, idle };

  // ring_bytes: the ring buffer's size.
  explicit ReaderClass(uint64_t ring_bytes);

  // After a drain at now_ns that took `bytes` of records: the class the reader should have.
  Class after_drain(uint64_t now_ns, uint64_t bytes);

  Class current() const { return class_; }

  // Rates below this (bytes a second) let the reader idle: the ring then holds >= 10 s of
  // records at half fill, so a reader that waits a second for a spare CPU loses nothing.
  uint64_t idle_rate_limit() const { return ring_bytes_ / 2 / 10; }
  static constexpr uint64_t kWindowNs = 1'000'000'000;
  static constexpr int kQuietWindows = 3;  // quiet windows in a row before idling

 private:
  uint64_t ring_bytes_;
  Class class_ = Class::batch;  // from attach on: the first seconds decide
  uint64_t window_start_ns_ = 0;
  uint64_t window_bytes_ = 0;
  int quiet_windows_ = 0;
};

}  // namespace ld::host
