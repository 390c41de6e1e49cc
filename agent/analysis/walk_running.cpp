// The running side of the walk: a span the thread spent on a CPU (or, without scheduler
// evidence, is assumed to have). Prorated short run-queue waits first, then the timed calls and
// stalls in the span by the precedence table, then the on-CPU samples place the rest.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include "analysis/walk.hpp"
#include "util/time.hpp"

namespace ld::analysis {

namespace {

// The CPU a thread ran on at `ts`: where its last switch-in before `ts` put it (nullopt before
// its first one). A span is on one CPU: the walk splits running time at every switch.
std::optional<uint32_t> cpu_at(const ThreadEvidence& t, uint64_t ts) {
  const auto after =
      std::partition_point(t.offcpu.begin(), t.offcpu.end(), [&](const OffCpu& o) { return o.on_ns <= ts; });
  if (after == t.offcpu.begin()) return std::nullopt;
  return std::prev(after)->cpu;
}

struct ClockLoss {
  double lost_ns = 0;  // of the span's wall time, what a CPU at its top speed would not have spent
  uint32_t khz_min = ~0u, khz_max = 0;
};

// The clock in force over [a, b] on one CPU (each sample holds until the next), and the time it
// lost where it ran below kSlowClockShare of the CPU's maximum.
ClockLoss clock_loss(const std::vector<FreqSample>& freq, uint64_t a, uint64_t b) {
  ClockLoss loss;
  auto it = std::partition_point(freq.begin(), freq.end(), [&](const FreqSample& s) { return s.ts_ns <= a; });
  if (it != freq.begin()) --it;
  for (; it != freq.end() && it->ts_ns < b; ++it) {
    const uint64_t from = std::max(a, it->ts_ns);
    const uint64_t to = std::next(it) == freq.end() ? b : std::min(b, std::next(it)->ts_ns);
    if (!it->max_khz || to <= from) continue;
    const double ratio = static_cast<double>(it->khz) / static_cast<double>(it->max_khz);
    if (ratio >= thresholds::kSlowClockShare) continue;
    loss.lost_ns += static_cast<double>(to - from) * (1 - ratio);
    loss.khz_min = std::min(loss.khz_min, it->khz);
    loss.khz_max = std::max(loss.khz_max, it->max_khz);
  }
  return loss;
}

// Takes up to `ns` of what is left of the span for `cause`.
uint64_t take(WindowAccount& acc, Cause cause, uint64_t ns, uint64_t& left) {
  ns = std::min(ns, left);
  acc.charge(cause, ns);
  left -= ns;
  return ns;
}

// Disk IO on CPU: the sync calls' time apart from the writes' page-cache copy (`only`'s part in
// `file_writes`); `ns` may be less than `only` when the window had less left.
void note_disk_on_cpu(WindowAccount& acc, const Syscall& biggest, uint64_t ns, const Intervals& only,
                      const Intervals& file_writes) {
  nlohmann::json strings;
  describe_disk_call(biggest, strings);
  const uint64_t copy = file_writes.empty() ? 0 : std::min(ns, only.total() - only.minus(file_writes).total());
  acc.note(Cause::kDiskIo, ns, std::move(strings), {});
  if (ns > copy) acc.note(Cause::kDiskIo, 0, {}, {{"sync_ms", util::ns_to_ms(ns - copy)}});
  if (copy) acc.note(Cause::kDiskIo, 0, {}, {{"write_ms", util::ns_to_ms(copy)}});
}

}  // namespace

void Walker::running(const ThreadEvidence* t, uint64_t a, uint64_t b, const Frame& f) {
  // Without scheduler evidence, "running" is only an assumption: say unknown.
  const Cause base = store_.has_sched() ? f.running_as : Cause::kUnknown;
  uint64_t left = b - a;
  if (t) {
    left -= short_runnable(*t, a, b, left, f.acc);
    Cover cover;
    left = timed_on_cpu(*t, a, b, left, f, cover);
    left = samples_on_cpu(*t, a, b, left, f, cover);
    if (base == Cause::kCompute && left) left -= slow_clock(*t, a, b, left, f.acc);
    if (f.acc.keep_compute && base == Cause::kCompute && left) f.acc.compute_pieces.push_back({a, b, t->tid, left});
  }
  f.acc.charge(base, left);
}

uint64_t Walker::slow_clock(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, WindowAccount& acc) {
  const std::optional<uint32_t> cpu = cpu_at(t, a);
  const std::vector<FreqSample>* freq = cpu ? store_.freq_of(*cpu) : nullptr;
  if (!freq || b <= a) return 0;
  const ClockLoss loss = clock_loss(*freq, a, b);
  // Only the span's compute ran slower, not its faults or calls: the loss scales with it.
  const auto ns =
      std::min(left, static_cast<uint64_t>(loss.lost_ns * static_cast<double>(left) / static_cast<double>(b - a)));
  if (!ns) return 0;
  acc.charge(Cause::kCpuFrequency, ns);
  acc.note(Cause::kCpuFrequency, ns, {{"khz_min", loss.khz_min}, {"khz_max", loss.khz_max}},
           {{"slow_clock_ms", util::ns_to_ms(ns)}});
  return ns;
}

uint64_t Walker::short_runnable(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, WindowAccount& acc) {
  // Short off-CPU slices (< the sched probe's threshold) are summed per period: prorate.
  // aggs are sorted by end: the periods overlapping [a, b] end after a and at most the longest
  // period after b (a search, not a scan of the thread's whole recording per window).
  uint64_t ns = 0;
  const uint64_t ends_by = b > ~0ULL - t.longest.aggs ? ~0ULL : b + t.longest.aggs;
  Cursors& cur = cursors_[t];
  for (auto it = t.aggs.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                      t.aggs, cur.aggs, [&](const SchedAgg& g) { return g.end_ns <= a; }));
       it != t.aggs.end() && it->end_ns <= ends_by; ++it) {
    const SchedAgg& g = *it;
    if (g.start_ns >= b || g.end_ns <= g.start_ns) continue;
    const double share =
        static_cast<double>(util::overlap_ns(a, b, g.start_ns, g.end_ns)) / static_cast<double>(g.end_ns - g.start_ns);
    ns += static_cast<uint64_t>(static_cast<double>(g.runnable_ns) * share);
  }
  ns = std::min(ns, static_cast<uint64_t>(static_cast<double>(left) * thresholds::kShortRunnableMaxShare));
  if (!ns) return 0;
  acc.charge(Cause::kCpuContention, ns);
  acc.note(Cause::kCpuContention, 0, {}, {{"runnable_ms", util::ns_to_ms(ns)}});
  return ns;
}

void Walker::collect_cover(const ThreadEvidence& t, uint64_t a, uint64_t b, Cover& cover) {
  std::array<Intervals, kTimedKinds> timed;
  auto clip_into = [&](Timed kind, uint64_t start, uint64_t end) {
    timed[static_cast<size_t>(kind)].add(std::max(a, start), std::min(b, end));
  };
  auto longer = [](const Syscall* best, const Syscall& s) {
    return !best || s.end_ns - s.start_ns > best->end_ns - best->start_ns;
  };
  Cursors& cur = cursors_[t];
  for_overlapping(
      t.reclaims, cur.reclaims, t.longest.reclaims, a, b, [](const Reclaim& r) { return r.start_ns; },
      [](const Reclaim& r) { return r.end_ns; },
      [&](const Reclaim& r) { clip_into(Timed::kReclaim, r.start_ns, r.end_ns); });
  for_overlapping(
      t.syscalls, cur.syscalls, t.longest.syscalls, a, b, [](const Syscall& s) { return s.start_ns; },
      [](const Syscall& s) { return s.end_ns; },
      [&](const Syscall& s) {
        if (is_memory_kind(s.kind)) {
          clip_into(Timed::kMemoryCall, s.start_ns, s.end_ns);
          if (longer(cover.biggest_memory, s)) cover.biggest_memory = &s;
        } else if (is_disk_kind(s.kind)) {
          clip_into(Timed::kSyncCall, s.start_ns, s.end_ns);
          if (is_file_write_kind(s.kind)) cover.file_writes.add(std::max(a, s.start_ns), std::min(b, s.end_ns));
          if (longer(cover.biggest_sync, s)) cover.biggest_sync = &s;
        } else if (is_futex_kind(s.kind)) {
          const bool gil = store_.is_gil_address(t.tgid, s.arg0);
          clip_into(gil ? Timed::kGilWait : Timed::kLockWait, s.start_ns, s.end_ns);
        }
      });
  cover.file_writes.normalise();
  // Each row keeps what the rows above it left. Most running spans overlap no timed call:
  // empty sets cost no interval arithmetic.
  for (const PrecedenceRow& row : kPrecedence) {
    Intervals& spans = timed[static_cast<size_t>(row.evidence)];
    if (spans.empty()) continue;
    spans.normalise();
    Intervals& only = cover.only[static_cast<size_t>(row.evidence)];
    only = spans.minus(cover.all);
    cover.all.merge(only);
  }
}

// Timed calls and stalls while on CPU, by the precedence table; then waits that cannot be CPU
// time at all (a futex wait of >= 100 us): they show up here when the scheduler itemised no
// off-CPU interval for them (waits under its threshold are summed, and a missed switch would
// otherwise turn a 300 ms lock wait into compute).
uint64_t Walker::timed_on_cpu(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, const Frame& f,
                              Cover& cover) {
  collect_cover(t, a, b, cover);
  if (cover.all.empty()) return left;
  WindowAccount& acc = f.acc;
  for (const PrecedenceRow& row : kPrecedence) {
    const Intervals& only = cover.only[static_cast<size_t>(row.evidence)];
    if (only.empty()) continue;
    switch (row.evidence) {
      case Timed::kReclaim:
        if (const uint64_t ns = take(acc, row.cause, only.total(), left))
          acc.note(row.cause, ns, {{"kind", "direct reclaim"}}, {{"reclaim_ms", util::ns_to_ms(ns)}});
        break;
      case Timed::kMemoryCall:
        if (const uint64_t ns = take(acc, row.cause, only.total(), left); ns && cover.biggest_memory) {
          const Syscall& call = *cover.biggest_memory;
          acc.note(row.cause, ns, {{"syscall", syscall_kind_name(call.kind)}},
                   {{"calls", 1}, {"mmap_bytes", grows_mapping(call.kind) ? static_cast<double>(call.arg0) : 0.0}});
        }
        break;
      case Timed::kSyncCall:
        if (const uint64_t ns = take(acc, row.cause, only.total(), left); ns && cover.biggest_sync)
          note_disk_on_cpu(acc, *cover.biggest_sync, ns, only, cover.file_writes);
        break;
      case Timed::kGilWait: {
        // Short GIL waits (under the scheduler's threshold: no waker is known) while an engine
        // thread of the process was busy (its CPU, its CUDA waits): it held the GIL for the
        // model's Python, and the wait is its work, as for the longer waits it ends.
        const uint32_t engine = f.can_follow() ? busy_engine(t, only.spans()) : 0;
        if (engine) {
          const uint64_t walked = walk_waits_on(engine, only.spans(), left, f);
          acc.gil_engine_ns += walked;
          left -= walked;
        } else if (const uint64_t ns = take(acc, row.cause, only.total(), left)) {
          acc.note(row.cause, ns, {{"method", store_.gil_method(t.tgid)}}, {{"wait_ms", util::ns_to_ms(ns)}});
        }
        break;
      }
      case Timed::kLockWait: {
        // A token thread's short futex waits (no waker known) are hand-offs when it has one
        // producer: llama-server's HTTP threads wait a fraction of a millisecond on a condition
        // variable for each token. What the producer did meanwhile, not lock contention.
        const uint32_t producer = f.can_follow() ? handoffs_.main_producer(t.tid) : 0;
        if (producer && producer != t.tid && store_.thread(producer)) {
          left -= walk_waits_on(producer, only.spans(), left, f);
          acc.note(Cause::kCompute, 0, {}, {{"handoffs", 1}});
        } else if (const uint64_t ns = take(acc, row.cause, only.total(), left)) {
          acc.note(row.cause, ns, {{"syscall", "futex"}}, {{"wait_ms", util::ns_to_ms(ns)}});
        }
        break;
      }
      case Timed::kCount: break;
    }
  }
  return left;
}

// Walks `holder` over the waits (in order, at most `left` ns of them): their time is its work.
uint64_t Walker::walk_waits_on(uint32_t holder, const util::Spans& waits, uint64_t left, const Frame& f) {
  uint64_t walked = 0;
  for (const auto& [s, e] : waits) {
    const uint64_t len = std::min(e - s, left - walked);
    if (len == 0) break;
    thread(holder, s, s + len, f.follow(Cause::kCompute));
    walked += len;
  }
  return walked;
}

uint32_t Walker::busy_engine(const ThreadEvidence& t, const util::Spans& waits) {
  const std::vector<uint32_t>* engines = store_.cuda_threads(t.tgid);
  if (!engines) return 0;
  uint64_t total = 0;
  for (const auto& [s, e] : waits) total += e - s;
  for (uint32_t engine : *engines) {
    if (engine == t.tid) continue;
    WindowAccount trial;
    trial.with_evidence = false;
    // A trial walk follows no further hand-offs: it only asks what the engine itself did.
    const Frame deepest{trial, Cause::kCompute, thresholds::kMaxWakerDepth};
    for (const auto& [s, e] : waits) thread(engine, s, e, deepest);
    const uint64_t busy = trial.ns_of(Cause::kCompute) + trial.ns_of(Cause::kGpuBusy);
    if (static_cast<double>(busy) >= thresholds::kEngineBusyShare * static_cast<double>(total)) return engine;
  }
  return 0;
}

// Page faults are counted, not timed: their time comes from the samples. On-CPU samples place
// the rest of the span: page faults and zeroing, reclaim, sync, network in the kernel.
uint64_t Walker::samples_on_cpu(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, const Frame& f,
                                const Cover& cover) {
  WindowAccount& acc = f.acc;
  Cursors& cur = cursors_[t];
  double faults = 0;
  for_overlapping(
      t.faults, cur.faults, t.longest.faults, a, b, [](const Faults& x) { return x.first_ns; },
      [](const Faults& x) { return x.last_ns + 1; },
      [&](const Faults& x) {
        const uint64_t span = x.last_ns + 1 - x.first_ns;
        faults += x.count * static_cast<double>(util::overlap_ns(a, b, x.first_ns, x.last_ns + 1)) /
                  static_cast<double>(span);
      });
  if (faults >= 1) acc.note(Cause::kKvAlloc, 0, {}, {{"faults", std::round(faults)}});
  const uint64_t uncovered = left;
  const bool dense_faults = faults >= 1 && faults >= thresholds::kDenseFaultsPerMs * util::ns_to_ms(uncovered);
  std::array<uint32_t, kCauseCount> by_cause{};
  uint32_t samples = 0;
  auto first = t.samples.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                                       t.samples, cur.samples, [&](const CpuSample& s) { return s.ts_ns < a; }));
  for (auto it = first; it != t.samples.end() && it->ts_ns < b; ++it) {
    if (cover.all.covers(it->ts_ns)) continue;
    ++samples;
    const Cause cause = dense_faults && it->cause == Cause::kCompute ? Cause::kKvAlloc : it->cause;
    ++by_cause[static_cast<size_t>(cause)];
  }
  if (samples == 0) return left;
  for (size_t c = 0; c < kCauseCount; ++c) {
    const Cause cause = static_cast<Cause>(c);
    if (cause == Cause::kCompute || by_cause[c] == 0) continue;
    const uint64_t ns =
        take(acc, cause, static_cast<uint64_t>(static_cast<double>(uncovered) * by_cause[c] / samples), left);
    if (cause == Cause::kKvAlloc) acc.note(cause, ns, {{"syscall", "page faults"}}, {{"fault_ms", util::ns_to_ms(ns)}});
    else acc.note(cause, ns, {{"kernel", "on-CPU kernel samples"}}, {{"samples", by_cause[c]}});
  }
  return left;
}

}  // namespace ld::analysis
