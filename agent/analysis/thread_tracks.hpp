// Per-thread scheduler states of the target's threads (running, runnable, blocked in X), for
// timeline exports such as the Perfetto trace. Built from the sched probe's off-CPU intervals,
// with the syscall, disk and GIL records naming what a blocked thread waited for.
//
// Only off-CPU intervals above the sched probe's threshold are itemised (shorter ones are
// summed in the kernel), so a "running" slice may contain short waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/thread_tracks.hpp"

struct ld_hdr;
struct ld_offcpu;
struct ld_syscall;
struct ld_gil_wait;

namespace ld::analysis {

// Feed every record of a trace (any order within a thread's interval), then finish() once.
class ThreadTrackBuilder {
 public:
  // Memory bound: off-CPU intervals kept per thread, and waits (syscalls, GIL) kept per thread
  // for naming them. Beyond either cap the thread's later records are dropped with a warning.
  explicit ThreadTrackBuilder(size_t max_intervals_per_thread = 200'000, size_t max_waits_per_thread = 50'000);

  void on_record(const ld_hdr& rec, size_t size);  // short or unknown records are ignored
  // `machine`: the traced host's uname machine (trace header host.machine), for syscall names.
  model::ThreadTracks finish(const std::string& machine = "x86_64");

 private:
  struct Interval {  // one ld_offcpu, trimmed to what the slices need
    uint64_t off_ns, wake_ns, on_ns;
    uint32_t syscall_nr;
    uint32_t other_tid;   // waker (blocked) or preempting task (preempted)
    uint32_t holder_tid;  // ran on the CPU just before the thread got it back
    bool preempted;
  };
  struct Wait {  // a timed syscall or GIL wait that may explain a blocked interval
    uint64_t start_ns, end_ns;
    std::string detail;
    int priority;  // the more specific explanation wins (a GIL wait over its futex wait)
  };
  struct Thread {
    uint32_t tgid = 0;
    std::vector<Interval> intervals;
    std::vector<Wait> waits;
    uint64_t longest_wait_ns = 0;
    uint64_t exit_ns = 0;
    bool truncated = false;
  };

  Thread& thread(const ld_hdr& rec);
  void add_offcpu(const ld_offcpu& ev);
  void add_syscall(const ld_syscall& ev, size_t size);
  void add_gil_wait(const ld_gil_wait& ev);
  void add_wait(const ld_hdr& rec, Wait wait);
  void remember_comm(uint32_t tid, const char* comm);
  std::string task_label(uint32_t tid) const;
  model::ThreadTrack build_track(uint32_t tid, Thread& t, const std::string& machine) const;
  std::string blocked_detail(const Interval& iv, const Thread& t, const std::string& machine) const;

  size_t max_intervals_;
  size_t max_waits_;
  std::map<uint32_t, Thread> threads_;     // by tid
  std::map<uint32_t, std::string> comms_;  // any task named by a record (waker, holder)
  uint64_t last_ts_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace ld::analysis
