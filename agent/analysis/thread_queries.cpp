#include "analysis/thread_queries.hpp"

#include <algorithm>

#include "events.h"
#include "model/syscalls.hpp"
#include "util/spans.hpp"

namespace ld::analysis {

bool is_memory_kind(uint32_t kind) { return kind >= LD_SYS_MMAP && kind <= LD_SYS_MEM_AGG; }
bool is_disk_kind(uint32_t kind) { return kind >= LD_SYS_FSYNC && kind <= LD_SYS_PWRITEV2; }
bool is_file_write_kind(uint32_t kind) { return kind >= LD_SYS_WRITE && kind <= LD_SYS_PWRITEV2; }
bool is_futex_kind(uint32_t kind) { return kind == LD_SYS_FUTEX_WAIT || kind == LD_SYS_FUTEX_LOCK_PI; }
bool grows_mapping(uint32_t kind) { return kind == LD_SYS_MMAP || kind == LD_SYS_BRK || kind == LD_SYS_MREMAP; }

const char* syscall_kind_name(uint32_t kind) {
  switch (kind) {
    case LD_SYS_MMAP: return "mmap";
    case LD_SYS_MUNMAP: return "munmap";
    case LD_SYS_BRK: return "brk";
    case LD_SYS_MREMAP: return "mremap";
    case LD_SYS_MADVISE: return "madvise";
    case LD_SYS_MEM_AGG: return "small memory calls";
    case LD_SYS_FSYNC: return "fsync";
    case LD_SYS_FDATASYNC: return "fdatasync";
    case LD_SYS_SYNC_FILE_RANGE: return "sync_file_range";
    case LD_SYS_MSYNC: return "msync";
    case LD_SYS_SYNC: return "sync";
    case LD_SYS_SYNCFS: return "syncfs";
    case LD_SYS_DIRTY_THROTTLE: return "dirty page throttling";
    case LD_SYS_WRITE: return "write";
    case LD_SYS_PWRITE64: return "pwrite64";
    case LD_SYS_WRITEV: return "writev";
    case LD_SYS_PWRITEV: return "pwritev";
    case LD_SYS_PWRITEV2: return "pwritev2";
    case LD_SYS_FUTEX_WAIT: return "futex";
    case LD_SYS_FUTEX_LOCK_PI: return "futex_lock_pi";
    default: return "syscall";
  }
}

void describe_disk_call(const Syscall& call, nlohmann::json& strings) {
  strings["syscall"] = syscall_kind_name(call.kind);
  if (!call.path.empty()) strings["path"] = call.path;
  if (is_file_write_kind(call.kind)) strings["bytes"] = call.arg1;  // written by that call
}

bool is_server_thread(const EvidenceStore& store, const std::set<uint32_t>& targets, uint32_t tid, uint32_t tgid) {
  if (tid == 0) return false;
  return targets.count(tgid) > 0 || store.thread(tid) != nullptr;
}

std::pair<uint64_t, double> gil_wait_ns(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b) {
  uint64_t ns = 0;
  double waits = 0;
  for_overlapping(
      t.gil_waits, cur.gil_waits, t.longest.gil_waits, a, b, [](const GilWait& g) { return g.start_ns; },
      [](const GilWait& g) { return g.end_ns; },
      [&](const GilWait& g) {
        // A record of summed short waits spans up to a second of them, with work
        // and sleeps between: only its waits' share of the overlap is GIL time.
        const uint64_t o = util::overlap_ns(a, b, g.start_ns, g.end_ns), span = g.end_ns - g.start_ns;
        ns += g.count > 1 && span > g.dur_ns
                  ? static_cast<uint64_t>(static_cast<double>(o) * static_cast<double>(g.dur_ns) /
                                          static_cast<double>(span))
                  : o;
        waits += g.count;
      });
  return {ns, waits};
}

const Syscall* longest_call(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b) {
  const Syscall* call = nullptr;
  uint64_t call_overlap = 0;
  for_overlapping(
      t.syscalls, cur.syscalls, t.longest.syscalls, a, b, [](const Syscall& s) { return s.start_ns; },
      [](const Syscall& s) { return s.end_ns; },
      [&](const Syscall& s) {
        if (const uint64_t o = util::overlap_ns(a, b, s.start_ns, s.end_ns); o > call_overlap) {
          call = &s;
          call_overlap = o;
        }
      });
  return call;
}

bool reclaimed_in(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b) {
  bool found = false;
  for_overlapping(
      t.reclaims, cur.reclaims, t.longest.reclaims, a, b, [](const Reclaim& r) { return r.start_ns; },
      [](const Reclaim& r) { return r.end_ns; }, [&](const Reclaim&) { found = true; });
  return found;
}

bool is_gil_wait(const EvidenceStore& store, const ThreadEvidence& t, const OffCpu& off, const Syscall* call,
                 uint64_t gil_ns, uint64_t len) {
  // A GIL wait is a futex wait: the wait's own address decides when the futex probe timed it;
  // else the GIL probe's waits must cover most of a block made in futex.
  if (call && is_futex_kind(call->kind)) return store.is_gil_address(t.tgid, call->arg0);
  const bool in_futex =
      off.syscall_nr == ~0u || model::cause_of_blocking_syscall(off.syscall_nr) == Cause::kLockContention;
  return in_futex && static_cast<double>(gil_ns) >= thresholds::kGilProbeCoverShare * static_cast<double>(len);
}

bool is_gil_block(const EvidenceStore& store, const ThreadEvidence& t, Cursors& cur, const OffCpu& off) {
  // Threads that take turns on the GIL wake each other at every hand-over: that is contention
  // between peers, not a producer handing a token over.
  if (t.gil_waits.empty() && t.syscalls.empty()) return false;
  const uint64_t a = off.off_ns, b = std::max(off.wake_ns, off.off_ns);
  if (b <= a) return false;
  return is_gil_wait(store, t, off, longest_call(t, cur, a, b), gil_wait_ns(t, cur, a, b).first, b - a);
}

bool waited_for_gil(const EvidenceStore& store, const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b) {
  if (gil_wait_ns(t, cur, a, b).second > 0) return true;
  bool waited = false;
  for_overlapping(
      t.syscalls, cur.syscalls, t.longest.syscalls, a, b, [](const Syscall& s) { return s.start_ns; },
      [](const Syscall& s) { return s.end_ns; },
      [&](const Syscall& s) { waited = waited || (is_futex_kind(s.kind) && store.is_gil_address(t.tgid, s.arg0)); });
  return waited;
}

uint64_t throttled_ns_in(const std::vector<CgroupSample>& samples, Cursors& cur, uint64_t a, uint64_t b) {
  if (samples.size() < 2) return 0;
  // The first sample at or after b, and the last at or before a.
  auto after = samples.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                     samples, cur.cgroup_after, [&](const CgroupSample& s) { return s.ts_ns < b; }));
  if (after == samples.end()) after = samples.end() - 1;
  auto before = samples.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                      samples, cur.cgroup_before, [&](const CgroupSample& s) { return s.ts_ns <= a; }));
  if (before != samples.begin()) --before;
  if (after->ts_ns <= before->ts_ns || after->throttled_ns == ~0ULL || before->throttled_ns == ~0ULL ||
      after->throttled_ns < before->throttled_ns)
    return 0;
  const double delta = static_cast<double>(after->throttled_ns - before->throttled_ns);
  const double span = static_cast<double>(after->ts_ns - before->ts_ns);
  return static_cast<uint64_t>(delta * std::min(1.0, static_cast<double>(b - a) / span));
}

}  // namespace ld::analysis
