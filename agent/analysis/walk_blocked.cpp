// The blocked side of the walk: a span the thread spent off CPU, not runnable. First what the
// block's own evidence says it waited for (the precedence table, else the syscall or kernel
// path it blocked in); then who ended it: a wait the thread's producer (or an engine thread)
// ended is that thread's work and is walked on it; a wait another server thread ended is what
// held that thread up; a wait nobody of the server ended is its own cause.
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "analysis/walk.hpp"
#include "model/syscalls.hpp"
#include "util/time.hpp"

namespace ld::analysis {

namespace {

// The strings a block's cause keeps from its evidence.
void describe_timed(const PrecedenceRow& row, const Syscall* call, nlohmann::json& strings) {
  switch (row.evidence) {
    case Timed::kReclaim: strings["kind"] = "direct reclaim"; break;
    case Timed::kSyncCall: describe_disk_call(*call, strings); break;
    case Timed::kMemoryCall: strings["syscall"] = syscall_kind_name(call->kind); break;
    case Timed::kLockWait: strings["uaddr"] = fmt::format("{:#x}", call->arg0); break;
    case Timed::kGilWait:
    case Timed::kCount: break;
  }
}

// The waker of the first of t's next waits after the one at `at` (starting before `until`) that
// another thread ended and that `wanted` accepts: preemptions and self-wakes are not hand-offs.
template <class Pred>
uint32_t next_waker(const ThreadEvidence& t, size_t at, uint64_t until, Pred wanted) {
  const OffCpu* first = t.offcpu.data();
  for (size_t i = at + 1; i < t.offcpu.size() && i <= at + thresholds::kHandoffLookAhead && first[i].off_ns < until;
       ++i) {
    const OffCpu& next = first[i];
    if (!next.preempted && next.waker_tid != 0 && next.waker_tid != t.tid && wanted(next)) return next.waker_tid;
  }
  return 0;
}

}  // namespace

Walker::BlockClass Walker::classify_block(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b,
                                          bool evidence) {
  Cursors& cur = cursors_[t];
  BlockClass block;
  const auto [gil_ns, gil_waits] = gil_wait_ns(t, cur, a, b);
  block.gil_waits = gil_waits;
  block.call = longest_call(t, cur, a, b);
  const Syscall* call = block.call;
  std::array<bool, kTimedKinds> present{};
  present[static_cast<size_t>(Timed::kReclaim)] = reclaimed_in(t, cur, a, b);
  present[static_cast<size_t>(Timed::kGilWait)] = is_gil_wait(store_, t, off, call, gil_ns, b - a);
  present[static_cast<size_t>(Timed::kSyncCall)] = call && is_disk_kind(call->kind);
  present[static_cast<size_t>(Timed::kMemoryCall)] = call && is_memory_kind(call->kind);
  present[static_cast<size_t>(Timed::kLockWait)] = call && is_futex_kind(call->kind);
  if (const PrecedenceRow* row = first_present(present)) {
    block.cause = row->cause;
    if (evidence) describe_timed(*row, call, block.strings);
    return block;
  }
  // No timed evidence: the syscall it blocked in, else its kernel stack.
  block.cause = model::cause_of_blocking_syscall(off.syscall_nr);
  if (block.cause == Cause::kUnknown && off.kstack_id >= 0) {
    block.cause = store_.blocked_stack_cause(off.kstack_id);
    if (block.cause == Cause::kCompute) block.cause = Cause::kUnknown;
  }
  if (evidence && off.syscall_nr != ~0u) {
    std::string syscall = model::syscall_name(off.syscall_nr);
    if (!syscall.empty()) block.strings["syscall"] = std::move(syscall);
  }
  return block;
}

void Walker::blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until,
                     const Frame& f) {
  WindowAccount& acc = f.acc;
  const uint64_t len = b - a;
  BlockClass block = classify_block(t, off, a, b, acc.with_evidence);
  // Whether a thread of the server ended the wait. A timer or an interrupt wakes from IRQ
  // context, where the kernel's "waker" is whatever task the interrupt found running: the idle
  // task, or another process (a compiler on a busy host). Such a wait ran out; nobody handed
  // anything over.
  const bool woken_by_server =
      off.waker_tid != 0 && off.waker_tid != t.tid && from_server(off.waker_tid, off.waker_tgid);
  if (block.cause == Cause::kGil) {
    if (!gil_wait_handed_over(t, off, a, b, until, woken_by_server, f))
      charge_gil_wait(t, off, len, block, woken_by_server, acc);
    return;
  }
  // Waits that are their own explanation, whoever ends them.
  if (block.cause == Cause::kDiskIo || block.cause == Cause::kKvAlloc || block.cause == Cause::kSwapReclaim) {
    acc.charge(block.cause, len);
    const bool calls = block.cause == Cause::kKvAlloc;
    // Disk IO: time in a write to a file (the page-cache copy) apart from the flushes.
    const bool file_write = block.call && is_file_write_kind(block.call->kind);
    const char* sum_key = block.cause == Cause::kDiskIo ? (file_write ? "write_ms" : "sync_ms")
                          : calls                       ? "calls"
                                                        : "reclaim_ms";
    acc.note(block.cause, len, std::move(block.strings), {{sum_key, calls ? 1.0 : util::ns_to_ms(len)}});
    return;
  }
  if (wait_handed_over(t, off, a, b, until, block, woken_by_server, f)) return;
  const bool timed_out = block.call && is_futex_kind(block.call->kind) && block.call->ret == -ETIMEDOUT;
  // Woken by another thread of the server: what held that thread up is what held this one up.
  // Its running time is the lock's hold time for a lock wait, plain compute otherwise.
  if (!timed_out && off.waker_tid != t.tid && from_server(off.waker_tid, off.waker_tgid) && f.can_follow()) {
    const bool lock = block.cause == Cause::kLockContention;
    if (lock && acc.with_evidence) {
      block.strings["holder_comm"] = store_.comm_name(off.waker_comm);
      block.strings["holder_pid"] = off.waker_tgid;
      block.strings["holder_tid"] = off.waker_tid;
      acc.note(Cause::kLockContention, len, std::move(block.strings), {{"waits", 1}});
    }
    thread(off.waker_tid, a, b, f.follow(lock ? Cause::kLockContention : Cause::kCompute));
    return;
  }
  charge_left_wait(t, off, len, std::move(block), timed_out, acc);
}

// A GIL wait that the thread's producer ended (or, for waits that ran out on the GIL's switch
// interval, the next one it ended): the producer held the GIL to make the token (an engine
// thread running the model's Python, building a buffer), so the wait is its work, split by
// what it did; a GIL held by any other thread is contention. An engine thread (one that calls
// CUDA) holds the GIL for the model's Python between its launches and syncs: a wait it ends is
// its work too, whose remedy is the engine's (CUDA graphs, a compiled model, its own process).
bool Walker::gil_wait_handed_over(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until,
                                  bool woken_by_server, const Frame& f) {
  if (!f.can_follow()) return false;
  const uint32_t ender = woken_by_server ? off.waker_tid : next_server_waker(t, off, until);
  const bool engine = ender && ender != t.tid && store_.uses_cuda(ender);
  if (!ender || !(handoffs_.is_producer(t.tid, ender) || engine) || !store_.thread(ender)) return false;
  f.acc.note(Cause::kCompute, 0, {}, {{"handoffs", 1}});
  if (engine) f.acc.gil_engine_ns += b - a;
  thread(ender, a, b, f.follow(Cause::kCompute));
  return true;
}

void Walker::charge_gil_wait(const ThreadEvidence& t, const OffCpu& off, uint64_t len, const BlockClass& block,
                             bool woken_by_server, WindowAccount& acc) {
  acc.charge(Cause::kGil, len);
  if (!acc.with_evidence) return;
  // The waker is the thread that dropped the GIL, unless the wait timed out (take_gil's switch
  // interval): then it is the timer, often in the idle task, which holds nothing.
  nlohmann::json gil = {{"method", store_.gil_method(t.tgid)}};
  if (woken_by_server) gil["holder_comm"] = store_.comm_name(off.waker_comm);
  acc.note(Cause::kGil, len, std::move(gil),
           {{"wait_ms", util::ns_to_ms(len)}, {"waits", std::max(1.0, block.gil_waits)}});
}

// A hand-off: the wait ended when (or while) the thread's producer handed over the token: its
// time, split by what it did. A timed wait that ran out and loops is one too (llama.cpp's HTTP
// threads wait a second at a time, an event loop's epoll has timers): the producer that ended
// the waiting was busy for the whole of it. An event-loop wait (epoll, poll, a sleep) that a
// thread other than a producer ended is no hand-off either: a timer's interrupt names whichever
// thread it found running (a GIL holder spinning in Python), and a background thread posting
// to the loop makes no token.
bool Walker::wait_handed_over(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until,
                              const BlockClass& block, bool woken_by_server, const Frame& f) {
  const bool timed_out = block.call && is_futex_kind(block.call->kind) && block.call->ret == -ETIMEDOUT;
  const bool app_wait = block.cause == Cause::kAppWait;
  const bool ran_out = timed_out || !woken_by_server || (app_wait && !handoffs_.is_producer(t.tid, off.waker_tid));
  if (!(block.cause == Cause::kLockContention || (app_wait && ran_out)) || !f.can_follow()) return false;
  const uint32_t producer = ran_out                                       ? producer_that_ended(t, off, until)
                            : handoffs_.is_producer(t.tid, off.waker_tid) ? off.waker_tid
                                                                          : 0;
  if (!producer || producer == t.tid || !store_.thread(producer)) return false;
  f.acc.note(Cause::kCompute, 0, {}, {{"handoffs", 1}});
  thread(producer, a, b, f.follow(Cause::kCompute));
  return true;
}

// Woken by a timer, an interrupt or a process outside the server: the wait's own cause.
void Walker::charge_left_wait(const ThreadEvidence& t, const OffCpu& off, uint64_t len, BlockClass block,
                              bool timed_out, WindowAccount& acc) {
  Cause cause = block.cause;
  nlohmann::json& strings = block.strings;
  if (cause == Cause::kLockContention && (timed_out || off.waker_tid == 0 || off.waker_tid == t.tid)) {
    cause = Cause::kAppWait;  // a timed condition wait that ran out: the program chose to wait
    if (acc.with_evidence) strings = {{"syscall", "futex (timed out)"}};
  }
  acc.charge(cause, len);
  if (!acc.with_evidence) return;
  if (cause == Cause::kLockContention && off.waker_tid != 0) {
    strings["holder_comm"] = store_.comm_name(off.waker_comm);
    strings["holder_pid"] = off.waker_tgid;
    strings["holder_tid"] = off.waker_tid;
  }
  if (cause == Cause::kUnknown && off.waker_tid != 0)
    strings["woken_by"] = fmt::format("{} ({})", store_.comm_name(off.waker_comm), off.waker_tgid);
  if (cause == Cause::kNetwork) acc.note(cause, len, std::move(strings), {{"send_ms", util::ns_to_ms(len)}});
  else if (cause == Cause::kLockContention) acc.note(cause, len, std::move(strings), {{"waits", 1}});
  else acc.note(cause, len, std::move(strings), {});
}

uint32_t Walker::producer_that_ended(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const {
  // The first later wait (before the window's end) that a producer ended. Wakes by others on
  // the way are not the hand-off: the GIL dropped by another thread, a timer, a signal.
  const OffCpu* first = t.offcpu.data();
  const size_t at = static_cast<size_t>(&off - first);
  if (at >= t.offcpu.size()) return handoffs_.main_producer(t.tid);
  if (const uint32_t next =
          next_waker(t, at, until, [&](const OffCpu& o) { return handoffs_.is_producer(t.tid, o.waker_tid); }))
    return next;
  if (const uint32_t main = handoffs_.main_producer(t.tid)) return main;
  // None in the window (every wait in it ran out: the producer held the GIL throughout, and
  // only timers woke the thread): the producer of the last hand-off before it.
  for (size_t back = 1; back <= at && back <= thresholds::kHandoffLookAhead; ++back) {
    const OffCpu& prev = first[at - back];
    if (!prev.preempted && prev.waker_tid != 0 && prev.waker_tid != t.tid &&
        handoffs_.is_producer(t.tid, prev.waker_tid))
      return prev.waker_tid;
  }
  return 0;
}

uint32_t Walker::next_server_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const {
  const size_t at = static_cast<size_t>(&off - t.offcpu.data());
  return next_waker(t, at, until, [&](const OffCpu& o) { return from_server(o.waker_tid, o.waker_tgid); });
}

}  // namespace ld::analysis
