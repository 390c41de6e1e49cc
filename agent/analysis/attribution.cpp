#include "analysis/attribution.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>

#include <fmt/format.h>

#include "analysis/syscalls.hpp"
#include "events.h"
#include "trace/cuda_api.hpp"
#include "model/stats.hpp"
#include "util/search.hpp"
#include "util/spans.hpp"

namespace ld::analysis {

using namespace model;
namespace {

constexpr int kMaxWakerDepth = 4;
// A waker of at least this share of a thread's typical token gaps (and of kMinProducerWakes
// of them) is its producer: one wake-up per token is a hand-off (an event loop fed by eight
// engine threads gets an eighth of its wake-ups from each); a lock holder that gets in the way
// now and then wakes it in the outliers, not in the typical gaps.
// How far after a wait that ran out the walk looks for the producer that ended the waiting.
constexpr size_t kHandoffLookAhead = 64;
constexpr double kProducerShare = 0.05;
constexpr uint64_t kMinProducerWakes = 3;
constexpr double kNsPerMs = 1e6;

double ms(uint64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

// Disjoint sorted intervals: how much of [a, b] a set of (possibly overlapping) spans covers.
class Intervals {
 public:
  void add(uint64_t a, uint64_t b) {
    if (b > a) spans_.push_back({a, b});
  }
  void normalise() { spans_ = util::merge_spans(std::move(spans_)); }
  bool empty() const { return spans_.empty(); }
  const util::Spans& spans() const { return spans_; }
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
  util::Spans spans_;
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
  own_contention_ns += other.own_contention_ns;
  gil_engine_ns += other.gil_engine_ns;
  own_culprits.insert(other.own_culprits.begin(), other.own_culprits.end());
}

Attributor::Attributor(const EvidenceStore& store, std::set<uint32_t> target_tgids)
    : store_(store), targets_(std::move(target_tgids)), cursors_(store.threads().size()) {}

void Attributor::learn_handoffs(uint32_t tid, uint64_t a, uint64_t b, uint64_t gaps) {
  const ThreadEvidence* t = tid ? store_.thread(tid) : nullptr;
  if (!t || b <= a) return;
  Handoffs& h = handoffs_[tid];
  h.gaps += gaps;
  const auto& offs = t->offcpu;
  auto it = std::partition_point(offs.begin(), offs.end(), [&](const OffCpu& o) { return o.on_ns <= a; });
  for (; it != offs.end() && it->off_ns < b; ++it)
    if (!it->preempted && it->waker_tid != 0 && it->waker_tid != tid && traced(it->waker_tid, it->waker_tgid) &&
        !is_gil_block(*t, *it))
      h.wakes[it->waker_tid]++;
  // Waits under the sched probe's itemising threshold come summed, with the wakers that ended
  // them: a thread that waits a fraction of a millisecond for each token (llama-server's HTTP
  // threads at sub-millisecond TPOT) is learned from these alone. A period in which the thread
  // also waited for the GIL is left out: its wakers may be GIL peers handing over.
  Cursors& cur = cursors_[t->index];
  for_overlapping(t->aggs, cur.aggs, t->longest.aggs, a, b, [](const SchedAgg& g) { return g.start_ns; },
                  [](const SchedAgg& g) { return g.end_ns; }, [&](const SchedAgg& g) {
                    if (waited_for_gil(*t, g.start_ns, g.end_ns)) return;
                    for (const SchedAgg::Waker& w : g.wakers)
                      if (w.tid != 0 && w.tid != tid && traced(w.tid, w.tgid)) h.wakes[w.tid] += w.count;
                  });
}

bool Attributor::waited_for_gil(const ThreadEvidence& t, uint64_t a, uint64_t b) const {
  if (gil_wait_ns(t, a, b).second > 0) return true;
  bool waited = false;
  for_overlapping(t.syscalls, cursors_[t.index].syscalls, t.longest.syscalls, a, b,
                  [](const Syscall& s) { return s.start_ns; }, [](const Syscall& s) { return s.end_ns; },
                  [&](const Syscall& s) { waited = waited || (is_futex_kind(s.kind) && store_.is_gil_address(t.tgid, s.arg0)); });
  return waited;
}

bool Attributor::is_gil_block(const ThreadEvidence& t, const OffCpu& off) const {
  // Threads that take turns on the GIL wake each other at every hand-over: that is contention
  // between peers, not a producer handing a token over. The same test as charge_blocked's.
  if (t.gil_waits.empty() && t.syscalls.empty()) return false;
  const uint64_t a = off.off_ns, b = std::max(off.wake_ns, off.off_ns);
  if (b <= a) return false;
  return is_gil_wait(t, off, longest_call(t, a, b), gil_wait_ns(t, a, b).first, b - a);
}

std::pair<uint64_t, double> Attributor::gil_wait_ns(const ThreadEvidence& t, uint64_t a, uint64_t b) const {
  uint64_t ns = 0;
  double waits = 0;
  for_overlapping(t.gil_waits, cursors_[t.index].gil_waits, t.longest.gil_waits, a, b,
                  [](const GilWait& g) { return g.start_ns; }, [](const GilWait& g) { return g.end_ns; },
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

const Syscall* Attributor::longest_call(const ThreadEvidence& t, uint64_t a, uint64_t b) const {
  const Syscall* call = nullptr;
  uint64_t call_overlap = 0;
  for_overlapping(t.syscalls, cursors_[t.index].syscalls, t.longest.syscalls, a, b,
                  [](const Syscall& s) { return s.start_ns; }, [](const Syscall& s) { return s.end_ns; },
                  [&](const Syscall& s) {
                    if (const uint64_t o = util::overlap_ns(a, b, s.start_ns, s.end_ns); o > call_overlap) {
                      call = &s;
                      call_overlap = o;
                    }
                  });
  return call;
}

bool Attributor::is_gil_wait(const ThreadEvidence& t, const OffCpu& off, const Syscall* call, uint64_t gil_ns,
                             uint64_t len) const {
  // A GIL wait is a futex wait: the wait's own address decides when the futex probe timed it;
  // else the GIL probe's waits must cover most of a block made in futex (a sleep or a read
  // between two GIL waits is not one).
  if (call && is_futex_kind(call->kind)) return store_.is_gil_address(t.tgid, call->arg0);
  const bool in_futex = off.syscall_nr == ~0u || cause_of_blocking_syscall(off.syscall_nr) == Cause::kLockContention;
  return in_futex && 2 * gil_ns >= len;
}

void Attributor::finish_learning() {
  for (auto& [tid, h] : handoffs_) {
    uint64_t total = 0, best = 0;
    for (const auto& [waker, n] : h.wakes) {
      total += n;
      if (n >= kMinProducerWakes && static_cast<double>(n) >= kProducerShare * static_cast<double>(h.gaps))
        h.producers.insert(waker);
      if (n > best && h.producers.count(waker)) {
        best = n;
        h.main = waker;
      }
    }
    if (2 * best < total) h.main = 0;  // several producers, none with most: no single one to follow
  }
}

bool Attributor::is_producer(uint32_t consumer, uint32_t waker) const {
  auto it = handoffs_.find(consumer);
  return it != handoffs_.end() && it->second.producers.count(waker) > 0;
}

std::vector<uint32_t> Attributor::producers_of(uint32_t consumer) const {
  auto it = handoffs_.find(consumer);
  return it == handoffs_.end() ? std::vector<uint32_t>{} : std::vector<uint32_t>(it->second.producers.begin(), it->second.producers.end());
}

uint32_t Attributor::main_producer(uint32_t consumer) const {
  auto it = handoffs_.find(consumer);
  return it == handoffs_.end() ? 0 : it->second.main;
}

uint32_t Attributor::producer_that_ended(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const {
  // The first later wait (before the window's end) that a producer ended. Wakes by others on
  // the way are not the hand-off: the GIL dropped by another thread, a timer, a signal.
  const OffCpu* first = t.offcpu.data();
  const size_t at = static_cast<size_t>(&off - first);
  if (at >= t.offcpu.size()) return main_producer(t.tid);
  if (const uint32_t next = next_waker(t, off, until, [&](const OffCpu& o) { return is_producer(t.tid, o.waker_tid); })) return next;
  if (const uint32_t main = main_producer(t.tid)) return main;
  // None in the window (every wait in it ran out: the producer held the GIL throughout, and
  // only timers woke the thread): the producer of the last hand-off before it.
  for (size_t back = 1; back <= at && back <= kHandoffLookAhead; ++back) {
    const OffCpu& prev = first[at - back];
    if (!prev.preempted && prev.waker_tid != 0 && prev.waker_tid != t.tid && is_producer(t.tid, prev.waker_tid))
      return prev.waker_tid;
  }
  return 0;
}

uint32_t Attributor::next_server_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const {
  return next_waker(t, off, until, [&](const OffCpu& o) { return traced(o.waker_tid, o.waker_tgid); });
}

template <class Pred>
uint32_t Attributor::next_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until, Pred wanted) const {
  // The first of the thread's next few waits (starting before `until`) that another thread
  // ended and that `wanted` accepts: preemptions and self-wakes are not hand-offs.
  const OffCpu* first = t.offcpu.data();
  const size_t at = static_cast<size_t>(&off - first);
  for (size_t i = at + 1; i < t.offcpu.size() && i <= at + kHandoffLookAhead && first[i].off_ns < until; ++i) {
    const OffCpu& next = first[i];
    if (!next.preempted && next.waker_tid != 0 && next.waker_tid != t.tid && wanted(next))
      return next.waker_tid;
  }
  return 0;
}

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
  if (!t || t->cuda.empty()) {
    walk_threads(t, a, b, running_as, depth, acc);
    return;
  }
  // Time in a CUDA call that waits for the GPU is the GPU's, whether the thread spun on its CPU
  // (CUDA's default schedule) or slept (blocking sync): the window is split around those calls.
  uint64_t cursor = a, launches = 0;
  for_overlapping(t->cuda, cursors_[t->index].cuda, t->longest.cuda, a, b, [](const CudaCall& c) { return c.start_ns; },
                  [](const CudaCall& c) { return c.end_ns; }, [&](const CudaCall& c) {
                    if (!c.blocks()) {
                      launches += c.count;
                      return;
                    }
                    const uint64_t s = std::max(c.start_ns, cursor), e = std::min(c.end_ns, b);
                    if (e <= s) return;
                    if (s > cursor) walk_threads(t, cursor, s, running_as, depth, acc);
                    charge_cuda(*t, c, s, e, depth, acc);
                    cursor = e;
                  });
  if (cursor < b) walk_threads(t, cursor, b, running_as, depth, acc);
  if (launches && acc.with_evidence) note(acc, Cause::kGpuBusy, 0, {}, {{"launches", static_cast<double>(launches)}});
}

void Attributor::charge_cuda(const ThreadEvidence& t, const CudaCall& call, uint64_t a, uint64_t b, int depth,
                             WindowAccount& acc) const {
  // A device allocation (cudaMalloc of a KV-cache block, cudaFree's implicit sync) is memory
  // allocation on the token path; every other blocking call waited for the GPU's queue.
  const Cause cause = call.kind == LD_CUDA_ALLOC ? Cause::kKvAlloc : Cause::kGpuBusy;
  acc.charge(cause, b - a);
  if (!acc.with_evidence) return;
  if (acc.keep_steps && depth == 0) acc.steps.push_back({a, b, std::string(trace::cuda_api_name(call.api))});
  nlohmann::json strings = {{"api", trace::cuda_api_name(call.api)}, {"thread", t.comm}};
  if (call.kind == LD_CUDA_ALLOC || call.kind == LD_CUDA_MEMCPY) strings["bytes"] = call.arg;
  if (cause == Cause::kKvAlloc)
    note(acc, cause, b - a, std::move(strings), {{"calls", 1}});
  else
    note(acc, cause, b - a, std::move(strings), {{"sync_ms", ms(b - a)}, {"syncs", b >= call.end_ns ? 1.0 : 0.0}});  // a wait split by the walk counts once
}

uint32_t Attributor::busy_engine(const ThreadEvidence& t, const std::vector<std::pair<uint64_t, uint64_t>>& waits) const {
  const std::vector<uint32_t>* engines = store_.cuda_threads(t.tgid);
  if (!engines) return 0;
  uint64_t total = 0;
  for (const auto& [s, e] : waits) total += e - s;
  for (uint32_t engine : *engines) {
    if (engine == t.tid) continue;
    WindowAccount trial;
    trial.with_evidence = false;
    for (const auto& [s, e] : waits) walk(engine, s, e, Cause::kCompute, kMaxWakerDepth, trial);
    if (2 * (trial.ns_of(Cause::kCompute) + trial.ns_of(Cause::kGpuBusy)) >= total) return engine;
  }
  return 0;
}

void Attributor::walk_threads(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as, int depth,
                              WindowAccount& acc) const {
  if (!t || !store_.has_sched()) {
    charge_running(t, a, b, running_as, depth, acc);
    return;
  }
  const auto& offs = t->offcpu;
  auto it = offs.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                               offs, cursors_[t->index].offcpu, [&](const OffCpu& o) { return o.on_ns <= a; }));
  const bool steps = acc.keep_steps && acc.with_evidence && depth == 0;
  auto step = [&](uint64_t s, uint64_t e, std::string what) {
    if (steps && e > s) acc.steps.push_back({s, e, std::move(what)});
  };
  uint64_t cursor = a;
  for (; it != offs.end() && it->off_ns < b; ++it) {
    const OffCpu& o = *it;
    if (o.off_ns > cursor) {
      charge_running(t, cursor, o.off_ns, running_as, depth, acc);
      if (steps) step(cursor, o.off_ns, running_step(t, cursor, o.off_ns));
    }
    const uint64_t ready = o.preempted || o.wake_ns == 0 ? o.off_ns : std::max(o.wake_ns, o.off_ns);
    if (!o.preempted) {
      const uint64_t s = std::max(o.off_ns, cursor), e = std::min(ready, b);
      if (e > s) {
        charge_blocked(*t, o, s, e, b, depth, acc);
        if (steps) step(s, e, blocked_step(*t, o, s, e));
      }
    }
    const uint64_t s = std::max(ready, cursor), e = std::min(o.on_ns, b);
    if (e > s) {
      charge_runnable(*t, o, s, e, acc);
      step(s, e, "run queue");
    }
    cursor = std::max(cursor, std::min(o.on_ns, b));
  }
  if (cursor < b) {
    charge_running(t, cursor, b, running_as, depth, acc);
    if (steps) step(cursor, b, running_step(t, cursor, b));
  }
}

void Attributor::charge_running(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as, int depth,
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
    const double f = static_cast<double>(util::overlap_ns(a, b, g.start_ns, g.end_ns)) /
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
  // Short GIL waits (under the scheduler's threshold: no waker is known) while an engine thread
  // of the process was busy (its CPU, its CUDA waits): it held the GIL for the model's Python,
  // and the wait is its work, as for the longer waits it ends (charge_blocked).
  const uint32_t engine = depth < kMaxWakerDepth && !only[kGilWait].empty() ? busy_engine(*t, only[kGilWait].spans()) : 0;
  if (engine) {
    for (const auto& [s, e] : only[kGilWait].spans()) {
      const uint64_t len = std::min(e - s, left);
      if (len == 0) break;
      walk(engine, s, s + len, Cause::kCompute, depth + 1, acc);
      acc.gil_engine_ns += len;
      left -= len;
    }
  } else if (uint64_t ns = take(Cause::kGil, only[kGilWait].total()); ns && evidence) {
    note(acc, Cause::kGil, ns, {{"method", store_.gil_method(t->tgid)}}, {{"wait_ms", ms(ns)}});
  }
  // A token thread's short futex waits (under the scheduler's itemising threshold, so no waker
  // is known) are hand-offs when it has one producer: llama-server's HTTP threads wait a
  // fraction of a millisecond on a condition variable for each token. What the producer did
  // meanwhile, not lock contention.
  const uint32_t producer = depth < kMaxWakerDepth && !only[kLockWait].empty() ? main_producer(t->tid) : 0;
  if (producer && producer != t->tid && store_.thread(producer)) {
    for (const auto& [s, e] : only[kLockWait].spans()) {
      const uint64_t len = std::min(e - s, left);
      if (len == 0) break;
      walk(producer, s, s + len, Cause::kCompute, depth + 1, acc);
      left -= len;
    }
    if (evidence) note(acc, Cause::kCompute, 0, {}, {{"handoffs", 1}});
  } else if (uint64_t ns = take(Cause::kLockContention, only[kLockWait].total()); ns && evidence) {
    note(acc, Cause::kLockContention, ns, {{"syscall", "futex"}}, {{"wait_ms", ms(ns)}});
  }
  // Page faults are counted, not timed: their time comes from the samples below.
  double faults = 0;
  for_overlapping(t->faults, cur.faults, t->longest.faults, a, b, [](const Faults& f) { return f.first_ns; },
                  [](const Faults& f) { return f.last_ns + 1; }, [&](const Faults& f) {
                    const uint64_t span = f.last_ns + 1 - f.first_ns;
                    faults += f.count * static_cast<double>(util::overlap_ns(a, b, f.first_ns, f.last_ns + 1)) / static_cast<double>(span);
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
  if (acc.keep_compute && base == Cause::kCompute && left) acc.compute_pieces.push_back({a, b, t->tid, left});
  acc.charge(base, left);
}

Attributor::HotCode Attributor::hot_code(const std::vector<uint32_t>& tids, uint64_t a, uint64_t b,
                                        size_t top) const {
  HotCode hot;
  std::map<std::string, uint32_t> frames, syscalls;
  uint32_t user = 0;
  for (uint32_t tid : tids) {
    const ThreadEvidence* t = store_.thread(tid);
    if (!t) continue;
    auto it = std::partition_point(t->samples.begin(), t->samples.end(), [&](const CpuSample& s) { return s.ts_ns < a; });
    for (; it != t->samples.end() && it->ts_ns < b; ++it) {
      ++hot.samples;
      if (it->user_mode) {
        ++user;
        continue;
      }
      if (const std::string& sc = store_.sample_syscall(*it); !sc.empty()) ++syscalls[sc];
      const auto* stack = it->kstack_id >= 0 ? store_.kstack(LD_PROBE_PERF, it->kstack_id) : nullptr;
      if (stack && !stack->empty()) ++frames[stack->front().substr(0, stack->front().find('+'))];
    }
  }
  if (hot.samples == 0) return hot;
  const double n = hot.samples;
  hot.user_share = user / n;
  auto largest = [&](const std::map<std::string, uint32_t>& counts) {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& [name, k] : counts) out.emplace_back(name, k / n);
    std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    if (out.size() > top) out.resize(top);
    return out;
  };
  hot.kernel_frames = largest(frames);
  hot.syscalls = largest(syscalls);
  return hot;
}

std::string Attributor::covering_call(const ThreadEvidence& t, uint64_t a, uint64_t b) const {
  // The timed call that covers most of [a, b] (with its file), or "".
  const Syscall* call = nullptr;
  uint64_t best = 0;
  auto it = std::partition_point(t.syscalls.begin(), t.syscalls.end(),
                                 [&](const Syscall& s) { return s.start_ns + std::min(kLookBackNs, t.longest.syscalls) < a; });
  for (; it != t.syscalls.end() && it->start_ns < b; ++it)
    if (const uint64_t o = util::overlap_ns(a, b, it->start_ns, it->end_ns); o > best) {
      best = o;
      call = &*it;
    }
  if (!call || 2 * best < b - a) return "";
  std::string what = syscall_kind_name(call->kind);
  if (!call->path.empty()) what += " " + call->path;
  if (is_futex_kind(call->kind) && store_.is_gil_address(t.tgid, call->arg0)) what = "GIL wait";
  return what;
}

std::string Attributor::running_step(const ThreadEvidence* t, uint64_t a, uint64_t b) const {
  // On CPU: inside a timed call that covers most of it (an fsync copying pages), else the
  // syscall most of its samples were inside, when most were ("getrandom"), else its own code.
  if (!t) return "running";
  if (std::string call = covering_call(*t, a, b); !call.empty()) return call;
  std::map<std::string, uint32_t> in_syscall;
  std::array<uint32_t, kCauseCount> by_cause{};
  uint32_t samples = 0;
  auto it = std::partition_point(t->samples.begin(), t->samples.end(), [&](const CpuSample& s) { return s.ts_ns < a; });
  for (; it != t->samples.end() && it->ts_ns < b; ++it) {
    ++samples;
    ++by_cause[static_cast<size_t>(it->cause)];
    if (const std::string& sc = store_.sample_syscall(*it); !sc.empty()) ++in_syscall[sc];
  }
  for (const auto& [name, n] : in_syscall)
    if (2 * n > samples) return name;
  // Kernel stacks cut before the syscall entry still show what the kernel was doing.
  for (size_t c = 0; c < kCauseCount; ++c)
    if (c != static_cast<size_t>(Cause::kCompute) && 2 * by_cause[c] > samples)
      return fmt::format("running ({})", model::cause_id(static_cast<Cause>(c)));
  return "running";
}

std::string Attributor::blocked_step(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b) const {
  // The timed call that covers most of the block, else the syscall it blocked in.
  if (std::string call = covering_call(t, a, b); !call.empty()) return call;
  return off.syscall_nr != ~0u ? syscall_name(off.syscall_nr) : "blocked";
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
  // A preempted thread names who took its CPU; a woken one that waited names who ran before it
  // got in (the record's holder): for a long wait both are the task that kept it out.
  const bool took = off.preempted && off.waker_tid != 0;
  const uint32_t culprit_tid = took ? off.waker_tid : off.holder_tid;
  const uint32_t culprit_tgid = took ? off.waker_tgid : off.holder_tgid;
  if (culprit_tid != 0 && targets_.count(culprit_tgid)) {
    acc.own_contention_ns += waited;
    constexpr size_t kMaxCulprits = 1024;  // a bound, far above any server's busy threads
    if (acc.own_culprits.size() < kMaxCulprits) acc.own_culprits.insert(culprit_tid);
  }
  if (!acc.with_evidence) return;  // what follows only names the culprit
  nlohmann::json culprit = nlohmann::json::object();
  if (took || off.holder_tid != 0) {
    culprit["culprit_comm"] = store_.comm_name(took ? off.waker_comm : off.holder_comm);
    culprit["culprit_pid"] = took ? off.waker_tgid : off.holder_tgid;
    culprit["culprit_tid"] = took ? off.waker_tid : off.holder_tid;
  }
  note(acc, Cause::kCpuContention, waited, std::move(culprit), {{"runnable_ms", ms(waited)}});
}

void Attributor::charge_blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b,
                                uint64_t until, int depth, WindowAccount& acc) const {
  const uint64_t len = b - a;
  // 1. Timed evidence on this thread that covers the block.
  const auto [gil_ns, gil_waits] = gil_wait_ns(t, a, b);
  const Syscall* call = longest_call(t, a, b);
  Cursors& cur = cursors_[t.index];
  bool in_reclaim = false;
  for_overlapping(t.reclaims, cur.reclaims, t.longest.reclaims, a, b, [](const Reclaim& r) { return r.start_ns; },
                  [](const Reclaim& r) { return r.end_ns; }, [&](const Reclaim&) { in_reclaim = true; });

  // The strings are the evidence: built only when the account keeps it (not for the typical
  // token, whose walks are most of the analysis). A null json becomes an object on first use.
  const bool ev = acc.with_evidence;
  Cause cause = Cause::kUnknown;
  nlohmann::json strings;
  if (is_gil_wait(t, off, call, gil_ns, len)) {
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

  // Whether a thread of the server ended the wait. A timer or an interrupt wakes from IRQ
  // context, where the kernel's "waker" is whatever task the interrupt found running: the idle
  // task, or another process (a compiler on a busy host). Such a wait ran out; nobody handed
  // anything over.
  const bool woken_by_server = off.waker_tid != 0 && off.waker_tid != t.tid && traced(off.waker_tid, off.waker_tgid);

  // 2. Waits that are their own explanation, whoever ends them. Except a GIL wait that the
  //    thread's producer ended (or, for waits that ran out on the GIL's switch interval, the
  //    next one it ended): the producer held the GIL to make the token (an engine thread
  //    running the model's Python, building a buffer), so the wait is its work, split by what
  //    it did; a GIL held by any other thread is contention.
  //    An engine thread (one that calls CUDA) holds the GIL for the model's Python between its
  //    launches and syncs: a wait it ends is its work too (its CPU time, its GPU waits), whose
  //    remedy is the engine's (CUDA graphs, a compiled model, the engine in its own process).
  if (cause == Cause::kGil && depth < kMaxWakerDepth) {
    const uint32_t ender = woken_by_server ? off.waker_tid : next_server_waker(t, off, until);
    const bool engine = ender && ender != t.tid && store_.uses_cuda(ender);
    if (ender && (is_producer(t.tid, ender) || engine) && store_.thread(ender)) {
      if (ev) note(acc, Cause::kCompute, 0, {}, {{"handoffs", 1}});
      if (engine) acc.gil_engine_ns += len;
      walk(ender, a, b, Cause::kCompute, depth + 1, acc);
      return;
    }
  }
  if (cause == Cause::kGil) {
    acc.charge(Cause::kGil, len);
    if (ev) {
      // The waker is the thread that dropped the GIL, unless the wait timed out (take_gil's
      // switch interval): then it is the timer, often in the idle task, which holds nothing.
      nlohmann::json gil = {{"method", store_.gil_method(t.tgid)}};
      if (woken_by_server) gil["holder_comm"] = store_.comm_name(off.waker_comm);
      note(acc, Cause::kGil, len, std::move(gil), {{"wait_ms", ms(len)}, {"waits", std::max(1.0, gil_waits)}});
    }
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
  // A hand-off: the wait ended when (or while) the thread's producer handed over the token: its
  // time, split by what it did. A timed wait that ran out and loops is one too (llama.cpp's HTTP
  // threads wait a second at a time, an event loop's epoll has timers): the producer that
  // ended the waiting was busy for the whole of it.
  // An event-loop wait (epoll, poll, a sleep) that a thread other than a producer ended is
  // no hand-off either: a timer's interrupt names whichever thread it found running (a GIL
  // holder spinning in Python), and a background thread posting to the loop makes no token.
  const bool ran_out = timed_out || !woken_by_server || (cause == Cause::kAppWait && !is_producer(t.tid, off.waker_tid));
  if ((cause == Cause::kLockContention || (cause == Cause::kAppWait && ran_out)) && depth < kMaxWakerDepth) {
    const uint32_t producer = ran_out ? producer_that_ended(t, off, until)
                              : is_producer(t.tid, off.waker_tid) ? off.waker_tid
                                                                  : 0;
    if (producer && producer != t.tid && store_.thread(producer)) {
      if (ev) note(acc, Cause::kCompute, 0, {}, {{"handoffs", 1}});
      walk(producer, a, b, Cause::kCompute, depth + 1, acc);
      return;
    }
  }
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
