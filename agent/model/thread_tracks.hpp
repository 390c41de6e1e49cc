// Per-thread scheduler states of the target's threads (running, runnable, blocked in X), for
// timeline exports such as the Perfetto trace. Built from the sched probe's off-CPU intervals,
// with the syscall, disk and GIL records naming what a blocked thread waited for.
//
// Only off-CPU intervals above the sched probe's threshold are itemised (shorter ones are
// summed in the kernel), so a "running" slice may contain short waits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ld::model {

enum class ThreadState { kRunning, kRunnable, kBlocked };
const char* thread_state_name(ThreadState state);  // "running" | "runnable" | "blocked"

struct ThreadSlice {
  uint64_t start_ns = 0;  // CLOCK_MONOTONIC
  uint64_t end_ns = 0;
  ThreadState state = ThreadState::kRunning;
  std::string detail;  // "blocked in futex", "fsync /var/log/app.log", "preempted by cc1 (812)"
};

struct ThreadTrack {
  uint32_t tid = 0;
  uint32_t tgid = 0;
  std::string name;                 // comm when some record named it, else ""
  std::vector<ThreadSlice> slices;  // by start, non-overlapping
  bool truncated = false;           // more intervals than the cap: later ones were dropped
};

struct ThreadTracks {
  std::vector<ThreadTrack> threads;  // by tgid, then tid
  std::vector<std::string> warnings;
};

}  // namespace ld::model
