#include "analysis/thread_tracks.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "analysis/record_view.hpp"
#include "analysis/thread_queries.hpp"
#include "events.h"
#include "model/syscalls.hpp"

namespace ld::analysis {

using namespace model;
namespace {

constexpr uint32_t kNoSyscall = ~0u;
constexpr size_t kMaxThreads = 10'000;  // a fork-happy target must not grow this without bound

// The syscalls a server thread blocks or spends time in (arch/x86/entry/syscalls/syscall_64.tbl).
std::string mib_text(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  return fmt::format("{} KiB", (bytes + 1023) / 1024);
}

// What a timed syscall record says the thread was doing; "" for kinds that explain no wait.
std::string syscall_detail(const ld_syscall& ev, const std::string& path) {
  const std::string on_path = path.empty() ? "" : " " + path;
  switch (ev.kind) {
    case LD_SYS_MMAP: return "mmap " + mib_text(ev.arg0);
    case LD_SYS_MUNMAP: return "munmap " + mib_text(ev.arg0);
    case LD_SYS_BRK: return "brk " + mib_text(ev.arg0);
    case LD_SYS_MREMAP: return "mremap " + mib_text(ev.arg0);
    case LD_SYS_MADVISE: return "madvise " + mib_text(ev.arg0);
    case LD_SYS_FSYNC: return "fsync" + on_path;
    case LD_SYS_FDATASYNC: return "fdatasync" + on_path;
    case LD_SYS_SYNC_FILE_RANGE: return "sync_file_range" + on_path;
    case LD_SYS_MSYNC: return "msync";
    case LD_SYS_SYNC: return "sync";
    case LD_SYS_SYNCFS: return "syncfs" + on_path;
    case LD_SYS_DIRTY_THROTTLE: return "dirty-page throttling (balance_dirty_pages)";
    case LD_SYS_WRITE:
    case LD_SYS_PWRITE64:
    case LD_SYS_WRITEV:
    case LD_SYS_PWRITEV:
    case LD_SYS_PWRITEV2:
      return fmt::format("{} {}{}", syscall_kind_name(ev.kind), mib_text(ev.arg1), path.empty() ? "" : " to " + path);
    case LD_SYS_FUTEX_WAIT: return fmt::format("futex wait on {:#x}", ev.arg0);
    case LD_SYS_FUTEX_LOCK_PI: return fmt::format("futex lock_pi on {:#x}", ev.arg0);
    default: return "";  // MEM_AGG sums many calls, FUTEX_WAKE does not wait
  }
}

// A disk record's path: path_len bytes after the fixed part, never past the record.
std::string syscall_path(const ld_syscall& ev, size_t size) {
  const size_t room = size - sizeof(ld_syscall);
  const size_t len = std::min<size_t>(ev.path_len, room);
  const char* bytes = reinterpret_cast<const char*>(&ev) + sizeof(ld_syscall);
  return std::string(bytes, strnlen(bytes, len));
}

}  // namespace

ThreadTrackBuilder::ThreadTrackBuilder(size_t max_intervals_per_thread, size_t max_waits_per_thread)
    : max_intervals_(max_intervals_per_thread), max_waits_(max_waits_per_thread) {}

ThreadTrackBuilder::Thread& ThreadTrackBuilder::thread(const ld_hdr& rec) {
  auto [it, added] = threads_.try_emplace(rec.tid);
  if (added) it->second.tgid = rec.tgid;
  return it->second;
}

void ThreadTrackBuilder::on_record(const ld_hdr& rec, size_t size) {
  if (size < sizeof(ld_hdr) || rec.size > size) return;
  last_ts_ = std::max(last_ts_, rec.ts_ns);
  if (rec.tid == 0) return;  // user-space records (stacks, samples of /proc) name no thread
  if (threads_.size() >= kMaxThreads && !threads_.count(rec.tid)) {
    dropped_++;
    return;
  }
  switch (rec.type) {
    case LD_EV_OFFCPU:
      if (auto* ev = record_as<ld_offcpu>(rec, size)) add_offcpu(*ev);
      break;
    case LD_EV_SYSCALL:
      if (auto* ev = record_as<ld_syscall>(rec, size)) add_syscall(*ev, size);
      break;
    case LD_EV_GIL_WAIT:
      if (auto* ev = record_as<ld_gil_wait>(rec, size)) add_gil_wait(*ev);
      break;
    case LD_EV_TASK_EXIT:
      if (record_as<ld_task_exit>(rec, size)) thread(rec).exit_ns = rec.ts_ns;
      break;
    default: break;
  }
}

void ThreadTrackBuilder::remember_comm(uint32_t tid, const char* comm) {
  if (tid == 0 || comm[0] == '\0') return;
  if (comms_.size() >= kMaxThreads && !comms_.count(tid)) return;
  comms_[tid] = std::string(comm, strnlen(comm, LD_COMM_LEN));  // not NUL-terminated when full
}

void ThreadTrackBuilder::add_offcpu(const ld_offcpu& ev) {
  remember_comm(ev.waker_tid, ev.waker_comm);
  remember_comm(ev.holder_tid, ev.holder_comm);
  Thread& t = thread(ev.hdr);
  if (ev.on_ns < ev.off_ns) return;  // inconsistent clocks: nothing sensible to draw
  if (t.intervals.size() >= max_intervals_) {
    t.truncated = true;
    dropped_++;
    return;
  }
  const bool preempted = ev.kind == LD_OFF_PREEMPTED;
  t.intervals.push_back(
      {ev.off_ns, preempted ? 0 : ev.wake_ns, ev.on_ns, ev.syscall_nr, ev.waker_tid, ev.holder_tid, preempted});
}

void ThreadTrackBuilder::add_wait(const ld_hdr& rec, Wait wait) {
  if (wait.detail.empty() || wait.end_ns <= wait.start_ns) return;
  Thread& t = thread(rec);
  if (t.waits.size() >= max_waits_) {
    t.truncated = true;
    dropped_++;
    return;
  }
  t.longest_wait_ns = std::max(t.longest_wait_ns, wait.end_ns - wait.start_ns);
  t.waits.push_back(std::move(wait));
}

void ThreadTrackBuilder::add_syscall(const ld_syscall& ev, size_t size) {
  const uint64_t start =
      ev.kind == LD_SYS_DIRTY_THROTTLE ? ev.start_ns : ev.hdr.ts_ns - std::min(ev.hdr.ts_ns, ev.dur_ns);
  add_wait(ev.hdr, {start, ev.hdr.ts_ns, syscall_detail(ev, syscall_path(ev, size)), 1});
}

void ThreadTrackBuilder::add_gil_wait(const ld_gil_wait& ev) {
  if (ev.kind != LD_GIL_WAIT_ONE) return;  // summed short waits have no single place in time
  add_wait(ev.hdr, {ev.start_ns, ev.hdr.ts_ns, "waiting for the GIL", 2});
}

std::string ThreadTrackBuilder::task_label(uint32_t tid) const {
  auto it = comms_.find(tid);
  if (it == comms_.end()) return fmt::format("tid {}", tid);
  return fmt::format("{} ({})", it->second, tid);
}

// The wait that overlaps the blocked interval most names it; a GIL wait beats the futex
// wait it is made of.
std::string ThreadTrackBuilder::blocked_detail(const Interval& iv, const Thread& t, const std::string& machine) const {
  const std::vector<Wait>& waits = t.waits;  // sorted by start
  const Wait* best = nullptr;
  uint64_t best_overlap = 0;
  for (auto it = std::upper_bound(waits.begin(), waits.end(), iv.wake_ns,
                                  [](uint64_t t, const Wait&w) { return t <= w.start_ns; });
       it != waits.begin();) {
    --it;
    if (it->end_ns <= iv.off_ns) {
      if (it->start_ns + t.longest_wait_ns <= iv.off_ns) break;  // earlier ones all ended before
      continue;
    }
    const uint64_t overlap = std::min(it->end_ns, iv.wake_ns) - std::max(it->start_ns, iv.off_ns);
    if (!best || it->priority > best->priority || (it->priority == best->priority && overlap > best_overlap)) {
      best = &*it;
      best_overlap = overlap;
    }
  }
  std::string what;
  if (best) what = best->detail;
  else if (iv.syscall_nr != kNoSyscall) what = "blocked in " + syscall_name(iv.syscall_nr, machine);
  else what = "blocked";
  // A wake-up from an interrupt (timer expiry, IO completion) runs in whatever task it hit,
  // often the idle task (tid 0).
  return what + "; woken by " + (iv.other_tid ? task_label(iv.other_tid) : "an interrupt or timer");
}

ThreadTrack ThreadTrackBuilder::build_track(uint32_t tid, Thread& t, const std::string& machine) const {
  ThreadTrack track;
  track.tid = tid;
  track.tgid = t.tgid;
  track.truncated = t.truncated;
  if (auto it = comms_.find(tid); it != comms_.end()) track.name = it->second;
  std::sort(t.intervals.begin(), t.intervals.end(),
            [](const Interval& a, const Interval& b) { return a.off_ns < b.off_ns; });
  std::sort(t.waits.begin(), t.waits.end(), [](const Wait& a, const Wait& b) { return a.start_ns < b.start_ns; });
  auto add = [&](uint64_t start, uint64_t end, ThreadState state, std::string detail) {
    if (end > start) track.slices.push_back({start, end, state, std::move(detail)});
  };
  uint64_t last_on = 0;  // end of the previous off-CPU interval: the thread runs from here
  for (const Interval& iv : t.intervals) {
    if (iv.off_ns < last_on) continue;  // overlaps the previous interval: a duplicate record
    if (last_on) add(last_on, iv.off_ns, ThreadState::kRunning, "");
    if (iv.preempted) {
      add(iv.off_ns, iv.on_ns, ThreadState::kRunnable,
          iv.other_tid ? "preempted by " + task_label(iv.other_tid) : "preempted");
    } else {
      const uint64_t wake = std::clamp(iv.wake_ns, iv.off_ns, iv.on_ns);
      add(iv.off_ns, wake, ThreadState::kBlocked, blocked_detail(iv, t, machine));
      add(wake, iv.on_ns, ThreadState::kRunnable,
          iv.holder_tid ? "woken, waiting for a CPU held by " + task_label(iv.holder_tid)
                        : "woken, waiting to be switched in");
    }
    last_on = iv.on_ns;
  }
  const uint64_t end = t.exit_ns ? t.exit_ns : last_ts_;
  if (last_on) add(last_on, end, ThreadState::kRunning, "");
  return track;
}

ThreadTracks ThreadTrackBuilder::finish(const std::string& machine) {
  ThreadTracks out;
  for (auto& [tid, t] : threads_) {
    if (t.intervals.empty()) continue;  // no scheduler evidence: no states to draw
    out.threads.push_back(build_track(tid, t, machine));
  }
  std::sort(out.threads.begin(), out.threads.end(), [](const ThreadTrack& a, const ThreadTrack& b) {
    return std::pair(a.tgid, a.tid) < std::pair(b.tgid, b.tid);
  });
  if (dropped_) {
    out.warnings.push_back(
        fmt::format("thread tracks: {} scheduler/syscall record(s) beyond the per-thread cap were left out; "
                    "the states of the busiest threads end early",
                    dropped_));
  }
  threads_.clear();
  return out;
}

}  // namespace ld::analysis
