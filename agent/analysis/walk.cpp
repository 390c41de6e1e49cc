#include "analysis/walk.hpp"

#include <algorithm>

#include "events.h"
#include "trace/cuda_api.hpp"
#include "util/time.hpp"

namespace ld::analysis {

Walker::Walker(const EvidenceStore& store, const HandoffModel& handoffs, const std::set<uint32_t>& targets)
    : store_(store), handoffs_(handoffs), targets_(targets), cursors_(store) {}

void Walker::account(WindowAccount& acc, uint32_t tid, uint64_t a, uint64_t b) {
  if (b > a) thread(tid, a, b, Frame{acc});
}

void Walker::thread(uint32_t tid, uint64_t a, uint64_t b, const Frame& f) {
  const ThreadEvidence* t = tid ? store_.thread(tid) : nullptr;
  if (!t || t->cuda.empty()) {
    states(t, a, b, f);
    return;
  }
  // Time in a CUDA call that waits for the GPU is the GPU's, whether the thread spun on its CPU
  // (CUDA's default schedule) or slept (blocking sync): the span is split around those calls.
  uint64_t cursor = a, launches = 0;
  for_overlapping(
      t->cuda, cursors_[*t].cuda, t->longest.cuda, a, b, [](const CudaCall& c) { return c.start_ns; },
      [](const CudaCall& c) { return c.end_ns; },
      [&](const CudaCall& c) {
        if (!c.blocks()) {
          launches += c.count;
          return;
        }
        const uint64_t s = std::max(c.start_ns, cursor), e = std::min(c.end_ns, b);
        if (e <= s) return;
        if (s > cursor) states(t, cursor, s, f);
        cuda_wait(*t, c, s, e, f);
        cursor = e;
      });
  if (cursor < b) states(t, cursor, b, f);
  if (launches) f.acc.note(Cause::kGpuBusy, 0, {}, {{"launches", static_cast<double>(launches)}});
}

void Walker::cuda_wait(const ThreadEvidence& t, const CudaCall& call, uint64_t a, uint64_t b, const Frame& f) {
  // A device allocation (cudaMalloc of a KV-cache block, cudaFree's implicit sync) is memory
  // allocation on the token path; every other blocking call waited for the GPU's queue.
  const Cause cause = call.kind == LD_CUDA_ALLOC ? Cause::kKvAlloc : Cause::kGpuBusy;
  WindowAccount& acc = f.acc;
  acc.charge(cause, b - a);
  if (!acc.with_evidence) return;
  if (acc.keep_steps && f.depth == 0) acc.steps.push_back({a, b, std::string(trace::cuda_api_name(call.api))});
  nlohmann::json strings = {{"api", trace::cuda_api_name(call.api)}, {"thread", t.comm}};
  if (call.kind == LD_CUDA_ALLOC || call.kind == LD_CUDA_MEMCPY) strings["bytes"] = call.arg;
  if (cause == Cause::kKvAlloc) {
    acc.note(cause, b - a, std::move(strings), {{"calls", 1}});
    return;
  }
  // A wait split by the walk counts once.
  acc.note(cause, b - a, std::move(strings),
           {{"sync_ms", util::ns_to_ms(b - a)}, {"syncs", b >= call.end_ns ? 1.0 : 0.0}});
}

void Walker::states(const ThreadEvidence* t, uint64_t a, uint64_t b, const Frame& f) {
  if (!t || !store_.has_sched()) {
    running(t, a, b, f);
    return;
  }
  const auto& offs = t->offcpu;
  auto it = offs.begin() + static_cast<std::ptrdiff_t>(util::partition_from(
                               offs, cursors_[*t].offcpu, [&](const OffCpu& o) { return o.on_ns <= a; }));
  const bool steps = f.keeps_steps();
  auto step = [&](uint64_t s, uint64_t e, auto&& name) {
    if (steps && e > s) f.acc.steps.push_back({s, e, name()});
  };
  uint64_t cursor = a;
  for (; it != offs.end() && it->off_ns < b; ++it) {
    const OffCpu& o = *it;
    if (o.off_ns > cursor) {
      running(t, cursor, o.off_ns, f);
      step(cursor, o.off_ns, [&] { return running_step(store_, t, cursor, o.off_ns); });
    }
    const uint64_t ready = o.preempted || o.wake_ns == 0 ? o.off_ns : std::max(o.wake_ns, o.off_ns);
    if (!o.preempted) {
      const uint64_t s = std::max(o.off_ns, cursor), e = std::min(ready, b);
      if (e > s) {
        blocked(*t, o, s, e, b, f);
        step(s, e, [&] { return blocked_step(store_, *t, o, s, e); });
      }
    }
    const uint64_t s = std::max(ready, cursor), e = std::min(o.on_ns, b);
    if (e > s) {
      runnable(*t, o, s, e, f.acc);
      step(s, e, [] { return std::string("run queue"); });
    }
    cursor = std::max(cursor, std::min(o.on_ns, b));
  }
  if (cursor < b) {
    running(t, cursor, b, f);
    step(cursor, b, [&] { return running_step(store_, t, cursor, b); });
  }
}

void Walker::runnable(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, WindowAccount& acc) {
  const uint64_t len = b - a;
  uint64_t throttled = std::min(len, throttled_ns_in(store_.cgroup_samples(), cursors_[t], a, b));
  // A runnable thread that waited while the CPU ran idle (the holder is the idle task) was
  // held back by its cgroup's quota: nothing else keeps a runnable task off an idle CPU.
  if (off.holder_tid == 0 && !store_.cgroup_samples().empty() && store_.cgroup_samples().back().quota_us != ~0ULL)
    throttled = len;
  if (throttled) {
    acc.charge(Cause::kCgroupThrottle, throttled);
    acc.note(Cause::kCgroupThrottle, throttled, {}, {{"throttled_ms", util::ns_to_ms(throttled)}});
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
    if (acc.own_culprits.size() < thresholds::kMaxOwnCulprits) acc.own_culprits.insert(culprit_tid);
  }
  if (!acc.with_evidence) return;  // what follows only names the culprit
  nlohmann::json culprit = nlohmann::json::object();
  if (took || off.holder_tid != 0) {
    culprit["culprit_comm"] = store_.comm_name(took ? off.waker_comm : off.holder_comm);
    culprit["culprit_pid"] = culprit_tgid;
    culprit["culprit_tid"] = culprit_tid;
  }
  acc.note(Cause::kCpuContention, waited, std::move(culprit), {{"runnable_ms", util::ns_to_ms(waited)}});
}

}  // namespace ld::analysis
