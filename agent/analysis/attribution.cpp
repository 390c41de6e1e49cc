#include "analysis/attribution.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>

#include <fmt/format.h>

#include "analysis/syscalls.hpp"
#include "events.h"
#include "model/stats.hpp"
#include "util/search.hpp"

namespace ld::analysis {

using namespace model;
namespace {

constexpr int kMaxWakerDepth = 4;
constexpr double kNsPerMs = 1e6;

double ms(uint64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

uint64_t overlap(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t lo = std::max(a, c), hi = std::min(b, d);
  return hi > lo ? hi - lo : 0;
}

// Disjoint sorted intervals: how much of [a, b] a set of (possibly overlapping) spans covers.
class Intervals {
 public:
  void add(uint64_t a, uint64_t b) {
    if (b > a) spans_.push_back({a, b});
  }
  void normalise() {
    std::sort(spans_.begin(), spans_.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& s : spans_) {
      if (!merged.empty() && s.first <= merged.back().second) merged.back().second = std::max(merged.back().second, s.second);
      else merged.push_back(s);
    }
    spans_ = std::move(merged);
  }
  bool empty() const { return spans_.empty(); }
  uint64_t total() const {
    uint64_t sum = 0;
    for (const auto& s : spans_) sum += s.second - s.first;
    return sum;
  }
  bool covers(uint64_t t) const {
    for (const auto& s : spans_)
      if (t >= s.first && t < s.second) return true;
    return false;
  }
  // This set minus `other` (both normalised).
  Intervals minus(const Intervals& other) const {
    Intervals out;
    for (auto [a, b] : spans_) {
      uint64_t cur = a;
      for (const auto& o : other.spans_) {
        if (o.second <= cur || o.first >= b) continue;
        if (o.first > cur) out.add(cur, o.first);
        cur = std::max(cur, o.second);
      }
      if (cur < b) out.add(cur, b);
    }
    return out;
  }
  void merge(const Intervals& other) {
    spans_.insert(spans_.end(), other.spans_.begin(), other.spans_.end());
    normalise();
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> spans_;
};

void note(WindowAccount& acc, Cause cause, uint64_t ns, nlohmann::json strings,
          std::initializer_list<std::pair<const char*, double>> sums) {
  if (!acc.with_evidence) return;
  CauseEvidence& ev = acc.evidence_of(cause);
  if (ns >= ev.best_ns && strings.is_object() && !strings.empty()) {
    ev.best_ns = ns;
    ev.strings = std::move(strings);
  }
  for (const auto& [key, value] : sums) ev.sums[key] += value;
}

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
    case LD_SYS_FUTEX_WAIT: return "futex";
    case LD_SYS_FUTEX_LOCK_PI: return "futex_lock_pi";
    default: return "syscall";
  }
}

bool is_memory_kind(uint32_t kind) { return kind >= LD_SYS_MMAP && kind <= LD_SYS_MEM_AGG; }
// Calls whose length argument is memory being mapped (munmap/madvise give memory back).
bool grows_mapping(uint32_t kind) { return kind == LD_SYS_MMAP || kind == LD_SYS_BRK || kind == LD_SYS_MREMAP; }
bool is_disk_kind(uint32_t kind) { return kind >= LD_SYS_FSYNC && kind <= LD_SYS_DIRTY_THROTTLE; }
bool is_futex_kind(uint32_t kind) { return kind == LD_SYS_FUTEX_WAIT || kind == LD_SYS_FUTEX_LOCK_PI; }

// Items of a list sorted by start that overlap [a, b]. Calls and stalls longer than the
// look-back are not found from windows that begin after their first minute (a 60 s epoll_wait
// is classified from the scheduler's syscall number instead). `longest` (the list's longest
// item) narrows the look-back to where an overlapping item can start: every window of a long
// trace searches here, and a minute of items is thousands.
constexpr uint64_t kLookBackNs = 60'000'000'000ULL;
// Fresh-page faults per ms of a window's on-CPU time above which its user-mode samples are the
// faults' cost too (~80 MB/s of new memory at 4 KiB; a server's own allocation churn stays far
// below). Where the host shadows the guest's page tables (PVM), the hypervisor's half of each
// fault runs outside the guest and is charged to the user instruction that faulted: measured
// 2026-12-02, half of a 768 MiB touch read as user mode (docs/accuracy.md).
constexpr double kDenseFaultsPerMs = 20;
template <class V, class Start, class End, class F>
void for_overlapping(const V& items, size_t& hint, uint64_t longest, uint64_t a, uint64_t b, Start start, End end,
                     F f) {
  const uint64_t look_back = std::min(kLookBackNs, longest);
  size_t i = util::partition_from(items, hint, [&](const auto& item) { return start(item) + look_back < a; });
  for (; i < items.size() && start(items[i]) < b; ++i)
    if (end(items[i]) > a) f(items[i]);
}

std::string hex(uint64_t v) { return fmt::format("{:#x}", v); }

}  // namespace

uint64_t WindowAccount::total_ns() const {
  uint64_t sum = 0;
  for (uint64_t v : ns) sum += v;
  return sum;
}

void WindowAccount::add(const WindowAccount& other) {
  for (size_t c = 0; c < kCauseCount; ++c) {
    ns[c] += other.ns[c];
    const CauseEvidence& theirs = other.evidence[c];
    CauseEvidence& ours = evidence[c];
    if (theirs.best_ns >= ours.best_ns && theirs.strings.is_object() && !theirs.strings.empty()) {
      ours.best_ns = theirs.best_ns;
      ours.strings = theirs.strings;
    }
    for (const auto& [k, v] : theirs.sums) ours.sums[k] += v;
  }
}

Attributor::Attributor(const EvidenceStore& store, std::set<uint32_t> target_tgids)
    : store_(store), targets_(std::move(target_tgids)), cursors_(store.threads().size()) {}

bool Attributor::traced(uint32_t tid, uint32_t tgid) const {
  if (tid == 0) return false;
  return targets_.count(tgid) > 0 || store_.thread(tid) != nullptr;
}

WindowAccount Attributor::account(uint32_t tid, uint64_t a, uint64_t b, bool with_evidence) const {
  WindowAccount acc;
  acc.with_evidence = with_evidence;
  account_into(acc, tid, a, b);
  return acc;
}

void Attributor::account_into(WindowAccount& acc, uint32_t tid, uint64_t a, uint64_t b) const {
  if (b > a) walk(tid, a, b, Cause::kCompute, 0, acc);
}

void Attributor::walk(uint32_t tid, uint64_t a, uint64_t b, Cause running_as, int depth,
                      WindowAccount& acc) const {
  const ThreadEvidence* t = tid ? store_.thread(tid) : nullptr;
  if (!t || !store_.has_sched()) {
    charge_running(t, a, b, running_as, acc);
    return;
  }
  const auto& offs = t->offcpu;
  auto it = offs.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                               offs, cursors_[t->index].offcpu, [&](const OffCpu& o) { return o.on_ns <= a; }));
  uint64_t cursor = a;
  for (; it != offs.end() && it->off_ns < b; ++it) {
    const OffCpu& o = *it;
    if (o.off_ns > cursor) charge_running(t, cursor, o.off_ns, running_as, acc);
    const uint64_t ready = o.preempted || o.wake_ns == 0 ? o.off_ns : std::max(o.wake_ns, o.off_ns);
    if (!o.preempted) {
      const uint64_t s = std::max(o.off_ns, cursor), e = std::min(ready, b);
      if (e > s) charge_blocked(*t, o, s, e, depth, acc);
    }
    const uint64_t s = std::max(ready, cursor), e = std::min(o.on_ns, b);
    if (e > s) charge_runnable(*t, o, s, e, acc);
    cursor = std::max(cursor, std::min(o.on_ns, b));
  }
  if (cursor < b) charge_running(t, cursor, b, running_as, acc);
}

void Attributor::charge_running(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as,
                                WindowAccount& acc) const {
  uint64_t left = b - a;
  // Without scheduler evidence, "running" is only an assumption: say unknown.
  const Cause base = store_.has_sched() ? running_as : Cause::kUnknown;
  if (!t) {
    acc.charge(base, left);
    return;
  }
  // Short off-CPU slices (< the sched probe's threshold) are summed per period: prorate.
  // aggs are sorted by end: the periods overlapping [a, b] end after a and at most the longest
  // period after b (a search, not a scan of the thread's whole recording per window).
  uint64_t short_runnable = 0;
  const uint64_t ends_by = b > ~0ULL - t->longest.aggs ? ~0ULL : b + t->longest.aggs;
  Cursors& cur = cursors_[t->index];
  for (auto it = t->aggs.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                       t->aggs, cur.aggs, [&](const SchedAgg& g) { return g.end_ns <= a; }));
       it != t->aggs.end() && it->end_ns <= ends_by; ++it) {
    const SchedAgg& g = *it;
    if (g.start_ns >= b || g.end_ns <= g.start_ns) continue;
    const double f = static_cast<double>(overlap(a, b, g.start_ns, g.end_ns)) /
                     static_cast<double>(g.end_ns - g.start_ns);
    short_runnable += static_cast<uint64_t>(static_cast<double>(g.runnable_ns) * f);
  }
  short_runnable = std::min(short_runnable, left / 2);
  if (short_runnable) {
    acc.charge(Cause::kCpuContention, short_runnable);
    if (acc.with_evidence) note(acc, Cause::kCpuContention, 0, {}, {{"runnable_ms", ms(short_runnable)}});
    left -= short_runnable;
  }
  // Timed calls and stalls while on CPU, by priority: reclaim, memory calls, sync calls; then
  // waits that cannot be CPU time at all (a futex wait of >= 100 us): they show up
  // here when the scheduler itemised no off-CPU interval for them (waits under its 1 ms
  // threshold are summed, and a missed switch would otherwise turn a 300 ms lock wait into
  // compute).
  // Indexed in that priority order: each set keeps only what the ones before it left.
  enum Timed { kReclaimed, kMemory, kDisk, kGilWait, kLockWait, kTimedKinds };
  std::array<Intervals, kTimedKinds> timed;
  auto clip_into = [&](Timed kind, uint64_t start, uint64_t end) {
    timed[kind].add(std::max(a, start), std::min(b, end));
  };
  for_overlapping(t->reclaims, cur.reclaims, t->longest.reclaims, a, b, [](const Reclaim& r) { return r.start_ns; },
                  [](const Reclaim& r) { return r.end_ns; },
                  [&](const Reclaim& r) { clip_into(kReclaimed, r.start_ns, r.end_ns); });
  const Syscall* biggest_mem = nullptr;
  const Syscall* biggest_disk = nullptr;
  auto longer = [](const Syscall* best, const Syscall& s) {
    return !best || s.end_ns - s.start_ns > best->end_ns - best->start_ns;
  };
  for_overlapping(t->syscalls, cur.syscalls, t->longest.syscalls, a, b, [](const Syscall& s) { return s.start_ns; },
                  [](const Syscall& s) { return s.end_ns; }, [&](const Syscall& s) {
                    if (is_memory_kind(s.kind)) {
                      clip_into(kMemory, s.start_ns, s.end_ns);
                      if (longer(biggest_mem, s)) biggest_mem = &s;
                    } else if (is_disk_kind(s.kind)) {
                      clip_into(kDisk, s.start_ns, s.end_ns);
                      if (longer(biggest_disk, s)) biggest_disk = &s;
                    } else if (is_futex_kind(s.kind)) {
                      clip_into(store_.is_gil_address(t->tgid, s.arg0) ? kGilWait : kLockWait, s.start_ns, s.end_ns);
                    }
                  });
  // Most running spans overlap no timed call: empty sets cost no interval arithmetic.
  Intervals covered;
  std::array<Intervals, kTimedKinds> only;  // each set minus the higher-priority ones
  for (size_t kind = 0; kind < kTimedKinds; ++kind) {
    if (timed[kind].empty()) continue;
    timed[kind].normalise();
    only[kind] = timed[kind].minus(covered);
    covered.merge(only[kind]);
  }
  auto take = [&](Cause cause, uint64_t ns) {
    ns = std::min(ns, left);
    acc.charge(cause, ns);
    left -= ns;
    return ns;
  };
  // The evidence objects are built only when wanted (note() would drop them anyway).
  const bool evidence = acc.with_evidence;
  if (uint64_t ns = take(Cause::kSwapReclaim, only[kReclaimed].total()); ns && evidence)
    note(acc, Cause::kSwapReclaim, ns, {{"kind", "direct reclaim"}}, {{"reclaim_ms", ms(ns)}});
  if (uint64_t ns = take(Cause::kKvAlloc, only[kMemory].total()); ns && biggest_mem && evidence)
    note(acc, Cause::kKvAlloc, ns, {{"syscall", syscall_kind_name(biggest_mem->kind)}},
         {{"calls", 1}, {"mmap_bytes", grows_mapping(biggest_mem->kind) ? static_cast<double>(biggest_mem->arg0) : 0.0}});
  if (uint64_t ns = take(Cause::kDiskIo, only[kDisk].total()); ns && biggest_disk && evidence)
    note(acc, Cause::kDiskIo, ns, {{"syscall", syscall_kind_name(biggest_disk->kind)}, {"path", biggest_disk->path}},
         {{"sync_ms", ms(ns)}});
  if (uint64_t ns = take(Cause::kGil, only[kGilWait].total()); ns && evidence)
    note(acc, Cause::kGil, ns, {{"method", store_.gil_method(t->tgid)}}, {{"wait_ms", ms(ns)}});
  if (uint64_t ns = take(Cause::kLockContention, only[kLockWait].total()); ns && evidence)
    note(acc, Cause::kLockContention, ns, {{"syscall", "futex"}}, {{"wait_ms", ms(ns)}});
  // Page faults are counted, not timed: their time comes from the samples below.
  double faults = 0;
  for_overlapping(t->faults, cur.faults, t->longest.faults, a, b, [](const Faults& f) { return f.first_ns; },
                  [](const Faults& f) { return f.last_ns + 1; }, [&](const Faults& f) {
                    const uint64_t span = f.last_ns + 1 - f.first_ns;
                    faults += f.count * static_cast<double>(overlap(a, b, f.first_ns, f.last_ns + 1)) / static_cast<double>(span);
                  });
  if (faults >= 1 && acc.with_evidence) note(acc, Cause::kKvAlloc, 0, {}, {{"faults", std::round(faults)}});
  // On-CPU samples place the rest: page faults/zeroing, reclaim, sync, network in the kernel.
  const uint64_t uncovered = left;
  const bool dense_faults = faults >= 1 && faults >= kDenseFaultsPerMs * ms(uncovered);
  std::array<uint32_t, kCauseCount> by_cause{};
  uint32_t samples = 0;
  auto first = t->samples.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                        t->samples, cur.samples, [&](const CpuSample& s) { return s.ts_ns < a; }));
  for (auto it = first; it != t->samples.end() && it->ts_ns < b; ++it) {
    if (covered.covers(it->ts_ns)) continue;
    ++samples;
    const Cause cause = dense_faults && it->cause == Cause::kCompute ? Cause::kKvAlloc : it->cause;
    ++by_cause[static_cast<size_t>(cause)];
  }
  if (samples > 0) {
    for (size_t c = 0; c < kCauseCount; ++c) {
      if (c == static_cast<size_t>(Cause::kCompute) || by_cause[c] == 0) continue;
      const uint64_t ns = take(static_cast<Cause>(c),
                               static_cast<uint64_t>(static_cast<double>(uncovered) * by_cause[c] / samples));
      if (!evidence) continue;
      if (static_cast<Cause>(c) == Cause::kKvAlloc)
        note(acc, Cause::kKvAlloc, ns, {{"syscall", "page faults"}}, {{"fault_ms", ms(ns)}});
      else
        note(acc, static_cast<Cause>(c), ns, {{"kernel", "on-CPU kernel samples"}}, {{"samples", by_cause[c]}});
    }
  }
  acc.charge(base, left);
}

uint64_t Attributor::throttled_ns_in(uint64_t a, uint64_t b, Cursors& cur) const {
  const auto& samples = store_.cgroup_samples();
  if (samples.size() < 2) return 0;
  // The first sample at or after b, and the last at or before a (searched from this thread's
  // previous answers: its waits come in time order).
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

void Attributor::charge_runnable(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b,
                                 WindowAccount& acc) const {
  const uint64_t len = b - a;
  uint64_t throttled = std::min(len, throttled_ns_in(a, b, cursors_[t.index]));
  // A runnable thread that waited while the CPU ran idle (the holder is the idle task) was
  // held back by its cgroup's quota: nothing else keeps a runnable task off an idle CPU.
  if (off.holder_tid == 0 && !store_.cgroup_samples().empty()) {
    const auto& last = store_.cgroup_samples().back();
    if (last.quota_us != ~0ULL) throttled = len;
  }
  if (throttled) {
    acc.charge(Cause::kCgroupThrottle, throttled);
    if (acc.with_evidence) note(acc, Cause::kCgroupThrottle, throttled, {}, {{"throttled_ms", ms(throttled)}});
  }
  const uint64_t waited = len - throttled;
  if (!waited) return;
  acc.charge(Cause::kCpuContention, waited);
  if (!acc.with_evidence) return;  // what follows only names the culprit
  // A preempted thread names who took its CPU; a woken one that waited names who ran before it
  // got in (the record's holder): for a long wait both are the task that kept it out.
  const bool took = off.preempted && off.waker_tid != 0;
  nlohmann::json culprit = nlohmann::json::object();
  if (took || off.holder_tid != 0) {
    culprit["culprit_comm"] = store_.comm_name(took ? off.waker_comm : off.holder_comm);
    culprit["culprit_pid"] = took ? off.waker_tgid : off.holder_tgid;
    culprit["culprit_tid"] = took ? off.waker_tid : off.holder_tid;
  }
  note(acc, Cause::kCpuContention, waited, std::move(culprit), {{"runnable_ms", ms(waited)}});
}

void Attributor::charge_blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b,
                                int depth, WindowAccount& acc) const {
  const uint64_t len = b - a;
  // 1. Timed evidence on this thread that covers the block.
  uint64_t gil_ns = 0;
  double gil_waits = 0;
  Cursors& cur = cursors_[t.index];
  for_overlapping(t.gil_waits, cur.gil_waits, t.longest.gil_waits, a, b, [](const GilWait& g) { return g.start_ns; },
                  [](const GilWait& g) { return g.end_ns; }, [&](const GilWait& g) {
                    gil_ns += overlap(a, b, g.start_ns, g.end_ns);
                    gil_waits += g.count;
                  });
  const Syscall* call = nullptr;
  uint64_t call_overlap = 0;
  for_overlapping(t.syscalls, cur.syscalls, t.longest.syscalls, a, b, [](const Syscall& s) { return s.start_ns; },
                  [](const Syscall& s) { return s.end_ns; }, [&](const Syscall& s) {
                    const uint64_t o = overlap(a, b, s.start_ns, s.end_ns);
                    if (o > call_overlap) { call = &s; call_overlap = o; }
                  });
  bool in_reclaim = false;
  for_overlapping(t.reclaims, cur.reclaims, t.longest.reclaims, a, b, [](const Reclaim& r) { return r.start_ns; },
                  [](const Reclaim& r) { return r.end_ns; }, [&](const Reclaim&) { in_reclaim = true; });

  // The strings are the evidence: built only when the account keeps it (not for the typical
  // token, whose walks are most of the analysis). A null json becomes an object on first use.
  const bool ev = acc.with_evidence;
  Cause cause = Cause::kUnknown;
  nlohmann::json strings;
  if (gil_ns > 0 || (call && is_futex_kind(call->kind) && store_.is_gil_address(t.tgid, call->arg0))) {
    cause = Cause::kGil;
  } else if (in_reclaim) {
    cause = Cause::kSwapReclaim;
    if (ev) strings["kind"] = "direct reclaim";
  } else if (call && is_disk_kind(call->kind)) {
    cause = Cause::kDiskIo;
    if (ev) strings["syscall"] = syscall_kind_name(call->kind);
    if (ev && !call->path.empty()) strings["path"] = call->path;
  } else if (call && is_memory_kind(call->kind)) {
    cause = Cause::kKvAlloc;
    if (ev) strings["syscall"] = syscall_kind_name(call->kind);
  } else if (call && is_futex_kind(call->kind)) {
    cause = Cause::kLockContention;
    if (ev) strings["uaddr"] = hex(call->arg0);
  } else {
    cause = cause_of_blocking_syscall(off.syscall_nr);
    if (cause == Cause::kUnknown && off.kstack_id >= 0) {
      cause = store_.blocked_stack_cause(off.kstack_id);
      if (cause == Cause::kCompute) cause = Cause::kUnknown;
    }
    if (ev && off.syscall_nr != ~0u) {
      std::string syscall = syscall_name(off.syscall_nr);
      if (!syscall.empty()) strings["syscall"] = std::move(syscall);
    }
  }

  // 2. Waits that are their own explanation, whoever ends them.
  if (cause == Cause::kGil) {
    acc.charge(Cause::kGil, len);
    if (ev)
      note(acc, Cause::kGil, len, {{"method", store_.gil_method(t.tgid)}, {"holder_comm", store_.comm_name(off.waker_comm)}},
         {{"wait_ms", ms(len)}, {"waits", std::max(1.0, gil_waits)}});
    return;
  }
  if (cause == Cause::kDiskIo || cause == Cause::kKvAlloc || cause == Cause::kSwapReclaim) {
    acc.charge(cause, len);
    if (!ev) return;
    const char* sum_key = cause == Cause::kDiskIo ? "sync_ms" : cause == Cause::kKvAlloc ? "calls" : "reclaim_ms";
    note(acc, cause, len, std::move(strings), {{sum_key, cause == Cause::kKvAlloc ? 1.0 : ms(len)}});
    return;
  }
  const bool timed_out = call && is_futex_kind(call->kind) && call->ret == -ETIMEDOUT;
  // 3. Woken by another traced thread: what held that thread up is what held this one up.
  //    Its running time is the lock's hold time for a lock wait, plain compute otherwise.
  if (!timed_out && off.waker_tid != t.tid && traced(off.waker_tid, off.waker_tgid) && depth < kMaxWakerDepth) {
    if (cause == Cause::kLockContention && ev) {
      strings["holder_comm"] = store_.comm_name(off.waker_comm);
      strings["holder_pid"] = off.waker_tgid;
      strings["holder_tid"] = off.waker_tid;
      note(acc, Cause::kLockContention, len, std::move(strings), {{"waits", 1}});
    }
    walk(off.waker_tid, a, b, cause == Cause::kLockContention ? Cause::kLockContention : Cause::kCompute,
         depth + 1, acc);
    return;
  }
  // 4. Woken by a timer, an interrupt or an untraced process.
  if (cause == Cause::kLockContention && (timed_out || off.waker_tid == 0 || off.waker_tid == t.tid)) {
    cause = Cause::kAppWait;  // a timed condition wait that ran out: the program chose to wait
    if (ev) strings = {{"syscall", "futex (timed out)"}};
  }
  acc.charge(cause, len);
  if (!ev) return;
  if (cause == Cause::kLockContention && off.waker_tid != 0) {
    strings["holder_comm"] = store_.comm_name(off.waker_comm);
    strings["holder_pid"] = off.waker_tgid;
    strings["holder_tid"] = off.waker_tid;
  }
  if (cause == Cause::kUnknown && off.waker_tid != 0) {
    strings["woken_by"] = fmt::format("{} ({})", store_.comm_name(off.waker_comm), off.waker_tgid);
  }
  if (cause == Cause::kNetwork)
    note(acc, cause, len, std::move(strings), {{"send_ms", ms(len)}});
  else if (cause == Cause::kLockContention)
    note(acc, cause, len, std::move(strings), {{"waits", 1}});
  else
    note(acc, cause, len, std::move(strings), {});
}

}  // namespace ld::analysis
