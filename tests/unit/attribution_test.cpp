// Attribution on synthetic event streams: each accounting path of the walk, the wake-up chain
// across processes, outlier detection, the TTFT fit and periodicity.
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/attribution.hpp"
#include "analysis/evidence.hpp"
#include "analysis/live.hpp"
#include "analysis/summary.hpp"
#include "events.h"
#include "synthetic_record.hpp"

using ld::analysis::Attributor;
using ld::analysis::EvidenceStore;
using ld::analysis::WindowAccount;
using ld::model::Cause;
using ld::model::WindowKind;

namespace {

constexpr uint64_t kMs = 1'000'000;

template <class T>
T record(uint16_t type, uint32_t tgid, uint32_t tid, uint64_t ts) {
  return synthetic_record<T>(type, tgid, tid, ts);
}

template <class T>
void add(EvidenceStore& store, const T& r) {
  ASSERT_TRUE(store.add(r.hdr, sizeof(T)));
}

void blocked(EvidenceStore& store, uint32_t tgid, uint32_t tid, uint64_t off, uint64_t wake, uint64_t on,
             uint32_t syscall_nr, uint32_t waker_tid, uint32_t waker_tgid, const char* waker_comm) {
  auto r = record<ld_offcpu>(LD_EV_OFFCPU, tgid, tid, on);
  r.off_ns = off;
  r.wake_ns = wake;
  r.on_ns = on;
  r.kind = LD_OFF_BLOCKED;
  r.kstack_id = -1;
  r.syscall_nr = syscall_nr;
  r.waker_tid = waker_tid;
  r.waker_tgid = waker_tgid;
  std::strncpy(r.waker_comm, waker_comm, LD_COMM_LEN - 1);
  add(store, r);
}

// `took_tid` preempted the thread; `holder_tid` ran just before it got the CPU back.
void preempted(EvidenceStore& store, uint32_t tgid, uint32_t tid, uint64_t off, uint64_t on, uint32_t holder_tid,
               const char* holder_comm, uint32_t took_tid = 0, const char* took_comm = "") {
  auto r = record<ld_offcpu>(LD_EV_OFFCPU, tgid, tid, on);
  r.off_ns = off;
  r.on_ns = on;
  r.kind = LD_OFF_PREEMPTED;
  r.kstack_id = -1;
  r.syscall_nr = ~0u;
  r.holder_tid = holder_tid;
  r.holder_tgid = holder_tid;
  std::strncpy(r.holder_comm, holder_comm, LD_COMM_LEN - 1);
  r.waker_tid = took_tid;
  r.waker_tgid = took_tid;
  std::strncpy(r.waker_comm, took_comm, LD_COMM_LEN - 1);
  add(store, r);
}

void syscall(EvidenceStore& store, uint32_t tgid, uint32_t tid, uint32_t kind, uint64_t start, uint64_t end,
             uint64_t arg0 = 0, int64_t ret = 0, const std::string& path = "") {
  struct {
    ld_syscall s;
    char path[64];
  } r{};
  r.s = record<ld_syscall>(LD_EV_SYSCALL, tgid, tid, end);
  r.s.start_ns = start;
  r.s.dur_ns = end - start;
  r.s.kind = kind;
  r.s.arg0 = arg0;
  r.s.ret = ret;
  r.s.path_len = static_cast<uint16_t>(path.size());
  std::memcpy(r.path, path.data(), path.size());
  r.s.hdr.size = static_cast<uint16_t>(sizeof(ld_syscall) + (path.size() + 7) / 8 * 8);
  ASSERT_TRUE(store.add(r.s.hdr, r.s.hdr.size));
}

// Process 100's GIL is the futex word at 0x5000 (the gil probe learned it via take_gil).
void gil_address(EvidenceStore& store) {
  auto addr = record<ld_gil_addr>(LD_EV_GIL_ADDR, 100, 0, 1);
  addr.uaddr_lo = 0x5000;
  addr.uaddr_hi = 0x5008;
  addr.method = LD_GIL_TAKE_GIL;
  add(store, addr);
}

double ms_of(const WindowAccount& acc, Cause c) { return static_cast<double>(acc.ns[static_cast<size_t>(c)]) / kMs; }

}  // namespace

TEST(Attribution, TwoProcessWakeChainEndsInTheEnginesFsync) {
  // API process 100 waits in epoll_wait for engine process 200, which waits on an fsync.
  EvidenceStore store;
  blocked(store, 100, 100, 10 * kMs, 410 * kMs, 412 * kMs, 232, 200, 200, "engine");
  blocked(store, 200, 200, 50 * kMs, 400 * kMs, 400 * kMs, 74, 0, 0, "swapper/1");
  syscall(store, 200, 200, LD_SYS_FSYNC, 50 * kMs, 400 * kMs, 3, 0, "/var/log/app.log");
  store.finish();
  Attributor attributor(store, {100, 200});
  const WindowAccount acc = attributor.account(100, 0, 420 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kDiskIo), 350);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 68);  // 0-10 + 10-50 + 400-410 + 412-420
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCpuContention), 2);
  EXPECT_EQ(acc.total_ns(), 420 * kMs);
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kDiskIo)].strings["path"], "/var/log/app.log");
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kDiskIo)].strings["syscall"], "fsync");
}

TEST(Attribution, LockWaitOnARunningHolderIsLockContention) {
  EvidenceStore store;
  blocked(store, 100, 100, 100 * kMs, 400 * kMs, 400 * kMs, 202, 101, 100, "metrics");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 100 * kMs, 400 * kMs, 0x1000);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 450 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 300);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 150);
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kLockContention)].strings["holder_comm"], "metrics");
}

TEST(Attribution, LockHolderBlockedInFsyncMakesItDiskIo) {
  EvidenceStore store;
  blocked(store, 100, 100, 100 * kMs, 400 * kMs, 400 * kMs, 202, 101, 100, "logger");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 100 * kMs, 400 * kMs, 0x1000);
  blocked(store, 100, 101, 120 * kMs, 390 * kMs, 390 * kMs, 74, 0, 0, "swapper/0");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 100 * kMs, 400 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kDiskIo), 270);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 30);  // the logger ran holding the lock
}

TEST(Attribution, GilWaitIsGilWhoeverWakes) {
  EvidenceStore store;
  gil_address(store);
  blocked(store, 100, 100, 10 * kMs, 310 * kMs, 310 * kMs, 202, 101, 100, "python3");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 10 * kMs, 310 * kMs, 0x5000);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 320 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGil), 300);
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kGil)].strings["method"], "take_gil");
}

TEST(Attribution, PreemptionNamesTheTaskThatHeldTheCpu) {
  EvidenceStore store;
  preempted(store, 100, 100, 20 * kMs, 320 * kMs, 77, "ksoftirqd/0", 4242, "hog");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 340 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCpuContention), 300);
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kCpuContention)].strings["culprit_comm"], "hog");
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kCpuContention)].strings["culprit_pid"], 4242);
}

TEST(Attribution, RunnableBehindAnIdleCpuWithAQuotaIsThrottling) {
  EvidenceStore store;
  for (uint64_t t = 0; t <= 400; t += 50) {
    auto s = record<ld_cgroup_sample>(LD_EV_CGROUP_SAMPLE, 100, 0, t * kMs);
    s.quota_us = 20000;
    s.period_us = 100000;
    s.throttled_ns = t >= 300 ? 250 * kMs : (t > 50 ? (t - 50) * kMs : 0);
    s.nr_throttled = t / 100;
    add(store, s);
  }
  preempted(store, 100, 100, 50 * kMs, 300 * kMs, 0, "swapper/0");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 320 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCgroupThrottle), 250);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCpuContention), 0);
}

TEST(Attribution, TimedOutConditionWaitIsAppWait) {
  EvidenceStore store;
  blocked(store, 100, 100, 10 * kMs, 310 * kMs, 310 * kMs, 202, 0, 0, "swapper/1");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 10 * kMs, 310 * kMs, 0x2000, -ETIMEDOUT);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 320 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kAppWait), 300);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 0);
}

TEST(Attribution, OnCpuPageFaultSamplesAndMemoryCallsAreKvAlloc) {
  EvidenceStore store;
  // A stack that zeroes pages in a fault.
  struct {
    ld_kstack k;
    char frames[2][LD_SYM_LEN];
  } stack{};
  stack.k.hdr.type = LD_EV_KSTACK;
  stack.k.hdr.size = sizeof(stack);
  stack.k.stack_id = 7;
  stack.k.depth = 2;
  stack.k.source = LD_PROBE_PERF;
  std::strcpy(stack.frames[0], "clear_page_erms+0x7");
  std::strcpy(stack.frames[1], "asm_exc_page_fault+0x22");
  ASSERT_TRUE(store.add(stack.k.hdr, sizeof(stack)));
  // 100 ms of samples at 1 ms: 60 in page faults, 40 in user code; then a 50 ms munmap.
  for (uint64_t i = 0; i < 100; ++i) {
    auto s = record<ld_cpu_sample>(LD_EV_CPU_SAMPLE, 100, 100, i * kMs + kMs / 2);
    s.user_mode = i >= 60;
    s.kstack_id = i < 60 ? 7 : -1;
    add(store, s);
  }
  syscall(store, 100, 100, LD_SYS_MUNMAP, 100 * kMs, 150 * kMs, 256u << 20);
  auto sched = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 100, 150 * kMs);  // the sched probe ran
  sched.period_start_ns = 0;
  add(store, sched);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 150 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kKvAlloc), 110);  // 50 ms munmap + 60% of 100 ms
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 40);
}

// On a guest whose host shadows its page tables (PVM), the host's half of each fault is charged
// to the user instruction that faulted: a window that faults fresh pages densely (>= 20 per ms
// of on-CPU time) reads as user-mode compute. Its user samples are the faults' cost there.
static WindowAccount account_user_samples_with_faults(uint32_t fault_count) {
  EvidenceStore store;
  for (uint64_t i = 0; i < 100; ++i) {  // 100 ms on CPU, every sample in user mode
    auto s = record<ld_cpu_sample>(LD_EV_CPU_SAMPLE, 100, 100, i * kMs + kMs / 2);
    s.user_mode = 1;
    s.kstack_id = -1;
    add(store, s);
  }
  if (fault_count > 0) {
    auto f = record<ld_faults>(LD_EV_FAULTS, 100, 100, 100 * kMs - 1);
    f.first_ns = 0;
    f.count = fault_count;
    add(store, f);
  }
  auto sched = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 100, 100 * kMs);  // the sched probe ran
  sched.period_start_ns = 0;
  add(store, sched);
  store.finish();
  return Attributor(store, {100}).account(100, 0, 100 * kMs);
}

TEST(Attribution, UserSamplesOfAWindowDenseWithPageFaultsAreKvAlloc) {
  const WindowAccount dense = account_user_samples_with_faults(5000);  // 50 per ms
  EXPECT_DOUBLE_EQ(ms_of(dense, Cause::kKvAlloc), 100);
  EXPECT_DOUBLE_EQ(ms_of(dense, Cause::kCompute), 0);
  const WindowAccount at_threshold = account_user_samples_with_faults(2000);  // 20 per ms
  EXPECT_DOUBLE_EQ(ms_of(at_threshold, Cause::kKvAlloc), 100);
}

TEST(Attribution, UserSamplesWithSparseOrNoPageFaultsStayCompute) {
  const WindowAccount sparse = account_user_samples_with_faults(500);  // 5 per ms: a server's churn
  EXPECT_DOUBLE_EQ(ms_of(sparse, Cause::kKvAlloc), 0);
  EXPECT_DOUBLE_EQ(ms_of(sparse, Cause::kCompute), 100);
  const WindowAccount none = account_user_samples_with_faults(0);
  EXPECT_DOUBLE_EQ(ms_of(none, Cause::kKvAlloc), 0);
  EXPECT_DOUBLE_EQ(ms_of(none, Cause::kCompute), 100);
}

TEST(Attribution, AFutexWaitWithoutAnOffCpuRecordIsNotCompute) {
  EvidenceStore store;
  // The scheduler itemised nothing for this thread's 300 ms lock wait (a missed switch, or
  // waits under its 1 ms threshold): the futex probe's timing still says it was not running.
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 20 * kMs, 320 * kMs, 0x1000);
  auto sched = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 100, 400 * kMs);  // the sched probe ran
  sched.period_start_ns = 0;
  add(store, sched);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 350 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 300);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 50);
}

// llama-server at sub-millisecond TPOT: an HTTP thread (101) waits ~0.4 ms per token on a
// condition variable that the main loop (102) signals. Every wait is under the sched probe's
// itemising threshold, so the only record of who ended them is the period's summed wakers.
namespace {
void short_handoffs(EvidenceStore& store, uint32_t waker_tid, bool gil_wait_in_period) {
  for (uint64_t t = 0; t < 100; ++t)  // 100 tokens, 1 ms apart: 0.4 ms wait, 0.6 ms running
    syscall(store, 100, 101, LD_SYS_FUTEX_WAIT, t * kMs, t * kMs + 400'000, 0x2000);
  auto agg = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 101, 100 * kMs);
  agg.period_start_ns = 0;
  agg.blocked_ns = 40 * kMs;
  agg.blocked_count = 100;
  agg.wakers[0] = {waker_tid, 100, 95, 0, 38 * kMs};
  agg.wakers[1] = {0, 0, 0, 0, 0};  // 5 waits woken by an interrupt on an idle CPU
  add(store, agg);
  if (gil_wait_in_period) {
    auto g = record<ld_gil_wait>(LD_EV_GIL_WAIT, 100, 101, 50 * kMs);
    g.start_ns = 49 * kMs;
    g.dur_ns = 1 * kMs;
    g.count = 1;
    add(store, g);
  }
  // The main loop computes the whole time (no off-CPU record: it never blocked).
  auto other = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 102, 100 * kMs);
  other.period_start_ns = 0;
  add(store, other);
  store.finish();
}
}  // namespace

TEST(Attribution, ShortWaitsWokenByOneThreadLearnItAsTheProducer) {
  EvidenceStore store;
  short_handoffs(store, 102, false);
  Attributor attributor(store, {100});
  attributor.learn({{101, 0, 100 * kMs, 100}});
  EXPECT_TRUE(attributor.handoffs().is_producer(101, 102));
  EXPECT_EQ(attributor.handoffs().main_producer(101), 102u);
  const WindowAccount acc = attributor.account(101, 10 * kMs, 11 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 1);  // the wait is the main loop's compute
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 0);
}

TEST(Attribution, ShortWaitsWithoutAKnownWakerStayLockContention) {
  EvidenceStore store;
  short_handoffs(store, 0, false);  // a layout-2 trace: no wakers in its sums
  Attributor attributor(store, {100});
  attributor.learn({{101, 0, 100 * kMs, 100}});
  EXPECT_EQ(attributor.handoffs().main_producer(101), 0u);
  EXPECT_DOUBLE_EQ(ms_of(attributor.account(101, 10 * kMs, 11 * kMs), Cause::kLockContention), 0.4);
}

TEST(Attribution, ShortWaitsOfAPeriodWithGilWaitsTeachNoProducer) {
  // GIL peers wake each other at every hand-over: not a producer handing tokens over.
  EvidenceStore store;
  short_handoffs(store, 102, true);
  Attributor attributor(store, {100});
  attributor.learn({{101, 0, 100 * kMs, 100}});
  EXPECT_FALSE(attributor.handoffs().is_producer(101, 102));
}

TEST(Attribution, ASchedSumOfRecordLayoutTwoStillReads) {
  // Traces recorded before the sums named their wakers end the record after runnable_count.
  EvidenceStore store;
  auto agg = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 101, 100 * kMs);
  agg.hdr.size = offsetof(ld_sched_agg, wakers);
  agg.runnable_ns = 10 * kMs;
  agg.wakers[0] = {102, 100, 9, 0, 1};  // beyond the record's size: must not be read
  ASSERT_TRUE(store.add(agg.hdr, offsetof(ld_sched_agg, wakers)));
  EXPECT_FALSE(store.add(agg.hdr, offsetof(ld_sched_agg, wakers) - 1));
  store.finish();
  ASSERT_NE(store.thread(101), nullptr);
  ASSERT_EQ(store.thread(101)->aggs.size(), 1u);
  EXPECT_EQ(store.thread(101)->aggs[0].runnable_ns, 10 * kMs);
  EXPECT_EQ(store.thread(101)->aggs[0].wakers[0].tid, 0u);
}

TEST(Attribution, KernelStacksSayWhatTheCpuDid) {
  using ld::analysis::classify_kernel_stack;
  // A logger's buffered write(): page-cache copies are disk IO work, not the model's compute.
  EXPECT_EQ(classify_kernel_stack({"copy_page_from_iter_atomic+0x1a", "generic_perform_write+0x9c",
                                   "ext4_buffered_write_iter+0x57", "vfs_write+0x23c"}),
            Cause::kDiskIo);
  EXPECT_EQ(
      classify_kernel_stack({"memcpy_orig+0x10", "iomap_file_buffered_write+0x1c", "xfs_file_buffered_write+0x9"}),
      Cause::kDiskIo);
  // A socket write is the network's, even though it also goes through vfs_write.
  EXPECT_EQ(classify_kernel_stack({"_copy_from_iter+0x8", "tcp_sendmsg_locked+0x2f", "tcp_sendmsg+0x2c",
                                   "sock_write_iter+0x101", "vfs_write+0x23c"}),
            Cause::kNetwork);
  EXPECT_EQ(classify_kernel_stack({"file_write_and_wait_range+0x90", "ext4_sync_file+0x8a"}), Cause::kDiskIo);
  EXPECT_EQ(classify_kernel_stack({"clear_page_erms+0x7", "asm_exc_page_fault+0x22"}), Cause::kKvAlloc);
  EXPECT_EQ(classify_kernel_stack({"shrink_node+0x10", "try_to_free_pages+0x20", "asm_exc_page_fault+0x22"}),
            Cause::kSwapReclaim);
  EXPECT_EQ(classify_kernel_stack({"_raw_spin_lock+0x5", "do_syscall_64+0x80"}), Cause::kCompute);
}

namespace {
// CPU `cpu` runs at `khz` of `max_khz` from `ts` on (a sample holds until the next).
void clock(EvidenceStore& store, uint32_t cpu, uint64_t ts, uint32_t khz, uint32_t max_khz) {
  auto r = record<ld_cpu_freq>(LD_EV_CPU_FREQ, 0, 0, ts);
  r.hdr.cpu = cpu;
  r.cpu_id = cpu;
  r.khz = khz;
  r.max_khz = max_khz;
  add(store, r);
}

// Thread 100 is switched in on `cpu` at 10 ms and computes until 110 ms.
EvidenceStore computing_on(uint32_t cpu, const std::function<void(EvidenceStore&)>& clocks) {
  EvidenceStore store;
  auto r = record<ld_offcpu>(LD_EV_OFFCPU, 100, 100, 10 * kMs);
  r.hdr.cpu = cpu;
  r.off_ns = 5 * kMs;
  r.on_ns = 10 * kMs;
  r.kind = LD_OFF_PREEMPTED;
  r.kstack_id = -1;
  r.syscall_nr = ~0u;
  add(store, r);
  clocks(store);
  store.finish();
  return store;
}
}  // namespace

TEST(Attribution, ComputeOnAClockedDownCpuLosesTheSlowShareToCpuFrequency) {
  // CPU 1 at half speed for the first 40 ms of the span, then at its top: 40 * (1 - 0.5) = 20 ms.
  // CPU 0 (where the thread did not run) at a quarter speed throughout: not this thread's.
  const EvidenceStore store = computing_on(1, [](EvidenceStore& s) {
    clock(s, 0, 1 * kMs, 500'000, 2'000'000);
    clock(s, 1, 1 * kMs, 1'000'000, 2'000'000);
    clock(s, 1, 50 * kMs, 2'000'000, 2'000'000);
  });
  Attributor attributor(store, {100});
  WindowAccount acc = attributor.account(100, 10 * kMs, 110 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCpuFrequency), 20);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 80);
  auto& ev = acc.evidence[static_cast<size_t>(Cause::kCpuFrequency)];
  EXPECT_EQ(ev.strings["khz_min"], 1'000'000);
  EXPECT_EQ(ev.strings["khz_max"], 2'000'000);
  EXPECT_DOUBLE_EQ(ev.sums["slow_clock_ms"], 20);
}

TEST(Attribution, AClockNearItsTopOrOfUnknownMaximumIsNoLoss) {
  // 85% of the top is within the governor's ramp; a CPU without a known maximum has no reference.
  for (const auto& [khz, max_khz] : {std::pair<uint32_t, uint32_t>{1'700'000, 2'000'000}, {500'000, 0}}) {
    const EvidenceStore store = computing_on(0, [&](EvidenceStore& s) { clock(s, 0, 1 * kMs, khz, max_khz); });
    Attributor attributor(store, {100});
    WindowAccount acc = attributor.account(100, 10 * kMs, 110 * kMs);
    EXPECT_EQ(acc.ns_of(Cause::kCpuFrequency), 0u) << khz << " of " << max_khz;
    EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 100);
  }
}

TEST(Attribution, WithoutSchedulerEvidenceTheRestIsUnknown) {
  EvidenceStore store;
  syscall(store, 100, 100, LD_SYS_FSYNC, 10 * kMs, 110 * kMs, 3, 0, "/data/x");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 200 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kDiskIo), 100);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kUnknown), 100);
}

TEST(Attribution, TtftFitRecoversSqrtLawDespiteSpikes) {
  std::vector<double> input, ttft;
  for (int i = 1; i <= 40; ++i) {
    const double x = 100.0 * i;
    input.push_back(x);
    ttft.push_back(3.0 * std::sqrt(x) + 50.0 + (i % 7 == 0 ? 800.0 : 0.0));  // 5 spikes
  }
  std::vector<bool> inlier;
  const auto fit = ld::analysis::fit_ttft(input, ttft, &inlier);
  ASSERT_TRUE(fit.valid);
  EXPECT_NEAR(fit.a, 3.0, 1e-6);
  EXPECT_NEAR(fit.b, 50.0, 1e-6);
  EXPECT_EQ(fit.n, 35u);
  EXPECT_NEAR(fit.r2, 1.0, 1e-9);
  EXPECT_FALSE(inlier[6]);
}

TEST(Attribution, TtftFitNeedsThreeDistinctInputs) {
  EXPECT_FALSE(ld::analysis::fit_ttft({100, 100, 200}, {10, 11, 12}).valid);
}

TEST(Attribution, PeriodicOutliersAreFound) {
  std::vector<uint64_t> ends;
  for (int i = 0; i < 6; ++i) ends.push_back((5'000 + i * 60'000 + (i % 2) * 300) * kMs);
  ends.push_back(ends[2] + 200 * kMs);         // a second stream hurt by the same event
  ends.push_back((5'000 + 8 * 60'000) * kMs);  // the 7th and 8th events fell between requests
  const auto p = ld::analysis::find_period(ends);
  ASSERT_TRUE(p.found);
  EXPECT_NEAR(p.period_s, 60.0, 0.5);
  EXPECT_EQ(p.outliers, 8u);
  // Irregular times are not a period.
  EXPECT_FALSE(
      ld::analysis::find_period({1 * kMs * 1000, 4 * kMs * 1000, 5 * kMs * 1000, 13 * kMs * 1000, 14 * kMs * 1000})
          .found);
}

TEST(Attribution, ReportOutliersCarryTheCauseAndTheTypicalProfile) {
  EvidenceStore store;
  // Token thread 100: tokens every 40 ms, one 400 ms gap spent in fsync.
  ld::model::Timeline timeline;
  ld::model::Request r;
  r.id = "100:c1#1";
  r.start_ns = 1000 * kMs;
  uint64_t t = 1200 * kMs;
  for (int i = 0; i < 20; ++i) {
    r.token_ns.push_back(t);
    r.token_tid.push_back(100);
    t += (i == 9 ? 400 : 40) * kMs;
  }
  timeline.requests.push_back(r);
  const uint64_t gap_start = r.token_ns[9];
  blocked(store, 100, 100, gap_start + 20 * kMs, gap_start + 380 * kMs, gap_start + 380 * kMs, 74, 0, 0, "swapper/0");
  syscall(store, 100, 100, LD_SYS_FSYNC, gap_start + 20 * kMs, gap_start + 380 * kMs, 3, 0, "/var/log/app.log");
  store.finish();
  ld::model::Report report = ld::analysis::build_report(timeline, {}, 1000 * kMs, t, 0);
  ld::analysis::attribute(report, timeline, nullptr, store, {100}, 0);
  ASSERT_TRUE(report.attributed);
  ASSERT_EQ(report.outliers.size(), 1u);
  const auto& o = report.outliers[0];
  EXPECT_EQ(o.kind, WindowKind::kTpot);
  EXPECT_EQ(o.token_index, 10u);
  EXPECT_DOUBLE_EQ(o.duration_ms, 400);
  EXPECT_DOUBLE_EQ(o.baseline_ms, 40);
  ASSERT_GE(o.causes.size(), 2u);
  EXPECT_EQ(o.causes[0].cause, ld::model::Cause::kDiskIo);
  EXPECT_DOUBLE_EQ(o.causes[0].ms, 360);
  EXPECT_DOUBLE_EQ(o.causes[0].share, 0.9);
  EXPECT_EQ(o.causes[0].evidence["path"], "/var/log/app.log");
  EXPECT_EQ(o.causes[1].cause, ld::model::Cause::kCompute);
  EXPECT_EQ(report.typical.windows, 18u);
  ASSERT_EQ(report.typical.causes.size(), 1u);
  EXPECT_EQ(report.typical.causes[0].cause, ld::model::Cause::kCompute);
}

TEST(Attribution, ColdStartIsTheFirstRequestsOwnWorkNotAWaitBehindANeighbour) {
  auto run = [](bool neighbour) {
    EvidenceStore store;
    ld::model::Timeline timeline;
    for (int i = 0; i < 6; ++i) {
      ld::model::Request r;
      r.id = "100:c1#" + std::to_string(i + 1);
      r.start_ns = (1000 + i * 1000) * kMs;
      r.input_bytes = 300;
      r.token_ns = {r.start_ns + (i == 0 ? 600 : 50) * kMs, r.start_ns + (i == 0 ? 640 : 90) * kMs};
      r.token_tid = {100, 100};
      timeline.requests.push_back(r);
    }
    if (neighbour) preempted(store, 100, 100, 1010 * kMs, 1560 * kMs, 9, "ksoftirqd/0", 4242, "hog");
    auto agg = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 100, 1100 * kMs);  // the sched probe ran
    agg.period_start_ns = 1000 * kMs;
    add(store, agg);
    store.finish();
    ld::model::Report report = ld::analysis::build_report(timeline, {}, 1000 * kMs, 7000 * kMs, 0);
    ld::analysis::attribute(report, timeline, nullptr, store, {100}, 900 * kMs);  // started 100 ms before
    return report;
  };
  const auto own = run(false);
  ASSERT_EQ(own.outliers.size(), 1u);
  EXPECT_EQ(own.outliers[0].causes[0].cause, ld::model::Cause::kColdStart);
  EXPECT_NEAR(own.outliers[0].causes[0].ms, 550, 1e-6);  // 600 ms - the 50 ms baseline
  const auto waited = run(true);
  ASSERT_EQ(waited.outliers.size(), 1u);
  EXPECT_EQ(waited.outliers[0].causes[0].cause, ld::model::Cause::kCpuContention);
  EXPECT_EQ(waited.outliers[0].causes[0].evidence["culprit_comm"], "hog");
}

// Batch interference. Stream A (thread 101) makes a token every 10 ms; one gap lasts 200 ms.
// Request B (6000 bytes) arrives `b_start_ms` into that gap, or later, and streams 10 tokens.
//  - kEngine: an engine thread (200) computes both streams' tokens and hands each over (the
//    token threads wait on a futex it ends): a thread shared between streams.
//  - kEventLoop: thread 101 computes and sends both streams' tokens itself.
//  - kDedicated: each stream's own thread computes its tokens (thread per request).
namespace {
enum class Shape { kEngine, kEventLoop, kDedicated };
constexpr uint32_t kEngineTid = 200;

ld::model::Request stream(const char* id, uint64_t start, std::vector<uint64_t> tokens, uint32_t tid, uint64_t input) {
  ld::model::Request r;
  r.id = id;
  r.tgid = 100;
  r.start_ns = start;
  r.input_bytes = input;
  r.token_ns = std::move(tokens);
  r.token_tid.assign(r.token_ns.size(), tid);
  return r;
}

// The token thread waits for each of its tokens (from `from` on) on a futex the engine ends.
void handed_over(EvidenceStore& store, uint32_t tid, uint64_t from, const std::vector<uint64_t>& tokens) {
  for (uint64_t t : tokens) {
    blocked(store, 100, tid, from + kMs / 5, t - kMs / 10, t - kMs / 20, 202, kEngineTid, 100, "engine-loop");
    from = t;
  }
}

ld::model::Report batch_report(Shape shape, uint64_t b_start_ms) {
  const uint64_t gap_start = 1250 * kMs, gap_end = gap_start + 200 * kMs;
  std::vector<uint64_t> a_tokens;
  for (uint64_t t = 1100 * kMs; t <= gap_start; t += 10 * kMs) a_tokens.push_back(t);
  for (uint64_t t = gap_end; a_tokens.size() < 30; t += 10 * kMs) a_tokens.push_back(t);
  // B's first token comes with A's next token (the step that finished its prefill), unless it
  // arrives after A's gap: then its prefill takes a step of its own.
  const uint64_t b_start = gap_start + b_start_ms * kMs;
  const uint64_t b_first = b_start < gap_end ? gap_end + kMs / 2 : b_start + 20 * kMs;
  std::vector<uint64_t> b_tokens;
  for (uint64_t t = b_first; b_tokens.size() < 10; t += 10 * kMs) b_tokens.push_back(t);
  const uint32_t b_tid = shape == Shape::kEventLoop ? 101 : 102;
  ld::model::Timeline timeline;
  timeline.requests.push_back(stream("100:c1#1", 1000 * kMs, a_tokens, 101, 300));
  timeline.requests.push_back(stream("100:c2#1", b_start, b_tokens, b_tid, 6000));
  EvidenceStore store;
  if (shape == Shape::kEngine) {
    blocked(store, 100, kEngineTid, 900 * kMs, 901 * kMs, 901 * kMs, 202, 0, 0, "swapper/0");  // it exists
    handed_over(store, 101, 1000 * kMs, a_tokens);
    handed_over(store, 102, b_start, b_tokens);
  } else {
    auto agg = record<ld_sched_agg>(LD_EV_SCHED_AGG, 100, 101, 1100 * kMs);  // the sched probe ran
    agg.period_start_ns = 1000 * kMs;
    add(store, agg);
  }
  store.finish();
  ld::model::Report report = ld::analysis::build_report(timeline, {}, 1000 * kMs, 3000 * kMs, 0);
  ld::analysis::attribute(report, timeline, nullptr, store, {100}, 0);
  return report;
}

double cause_ms(const ld::model::Outlier& o, Cause cause) {
  for (const auto& c : o.causes)
    if (c.cause == cause) return c.ms;
  return 0;
}
}  // namespace

TEST(BatchInterference, ASharedEngineComputingAnotherRequestsPrefillIsBatchInterference) {
  const auto report = batch_report(Shape::kEngine, 5);
  ASSERT_EQ(report.outliers.size(), 1u);
  const auto& o = report.outliers[0];
  EXPECT_EQ(o.request, "100:c1#1");
  ASSERT_FALSE(o.causes.empty());
  EXPECT_EQ(o.causes[0].cause, Cause::kBatchInterference);
  // 195 ms of the engine's compute overlapped B's prefill; the typical token's 10 ms stay compute.
  EXPECT_NEAR(o.causes[0].ms, 190, 0.5);
  EXPECT_NEAR(cause_ms(o, Cause::kCompute), 10, 0.5);
  const auto& ev = o.causes[0].evidence;
  EXPECT_EQ(ev["request"], "100:c2#1");
  EXPECT_EQ(ev["input_bytes"], 6000);
  EXPECT_DOUBLE_EQ(ev["overlap_ms"].get<double>(), 195);
  EXPECT_EQ(ev["requests"], 1);
  ASSERT_EQ(ev["interfering"].size(), 1u);
  EXPECT_EQ(ev["interfering"][0]["request"], "100:c2#1");
  // No extra code is claimed for what the batch cost, and the typical token is still compute.
  for (const auto& c : o.causes) {
    if (c.cause != Cause::kCompute) continue;
    EXPECT_FALSE(c.evidence.contains("excess_ms")) << c.evidence.dump();
  }
  ASSERT_FALSE(report.typical.causes.empty());
  EXPECT_EQ(report.typical.causes[0].cause, Cause::kCompute);
}

TEST(BatchInterference, AnEventLoopSendingBothStreamsIsSharedToo) {
  const auto report = batch_report(Shape::kEventLoop, 5);
  ASSERT_EQ(report.outliers.size(), 1u);
  EXPECT_EQ(report.outliers[0].causes[0].cause, Cause::kBatchInterference);
  EXPECT_NEAR(report.outliers[0].causes[0].ms, 190, 0.5);
}

TEST(BatchInterference, AStreamsOwnThreadIsNotInterference) {
  // Thread per request: the same timing, but A's thread computed its own 200 ms.
  const auto report = batch_report(Shape::kDedicated, 5);
  ASSERT_EQ(report.outliers.size(), 1u);
  EXPECT_EQ(report.outliers[0].causes[0].cause, Cause::kCompute);
  EXPECT_EQ(cause_ms(report.outliers[0], Cause::kBatchInterference), 0);
}

TEST(BatchInterference, NoOverlappingPrefillNoInterference) {
  // B arrives after A's slow gap: the engine's 200 ms are A's own compute.
  const auto report = batch_report(Shape::kEngine, 260);
  ASSERT_EQ(report.outliers.size(), 1u);
  EXPECT_EQ(report.outliers[0].causes[0].cause, Cause::kCompute);
  EXPECT_EQ(cause_ms(report.outliers[0], Cause::kBatchInterference), 0);
  // It is extra code, and says so.
  EXPECT_TRUE(report.outliers[0].causes[0].evidence.contains("excess_ms"));
}

TEST(BatchInterference, AFirstTokenQueuedBehindAnEarlierPrefillIsBatchInterference) {
  // B's long prompt arrives 5 ms into A's slow gap; C's short one 50 ms in, and waits for B's
  // step: C's slow first token is B's prefill, B's own slow first token is its own.
  const uint64_t gap_start = 1250 * kMs, gap_end = gap_start + 200 * kMs;
  auto tokens_from = [](uint64_t first, size_t n) {
    std::vector<uint64_t> out;
    for (uint64_t t = first; out.size() < n; t += 10 * kMs) out.push_back(t);
    return out;
  };
  std::vector<uint64_t> a_tokens = tokens_from(1100 * kMs, 16);
  for (uint64_t t : tokens_from(gap_end, 14)) a_tokens.push_back(t);
  ld::model::Timeline timeline;
  timeline.requests.push_back(stream("100:c1#1", 1080 * kMs, a_tokens, 101, 300));
  timeline.requests.push_back(stream("100:c2#1", gap_start + 5 * kMs, tokens_from(gap_end + kMs / 2, 10), 102, 6000));
  timeline.requests.push_back(stream("100:c3#1", gap_start + 50 * kMs, tokens_from(gap_end + kMs, 10), 103, 300));
  for (uint32_t i = 0; i < 3; ++i) {  // short requests later: the TTFT baseline (20 ms)
    const uint64_t start = (1700 + 100 * i) * kMs;
    timeline.requests.push_back(stream(("100:c" + std::to_string(4 + i) + "#1").c_str(), start,
                                       tokens_from(start + 20 * kMs, 5), 104 + i, 300));
  }
  EvidenceStore store;
  blocked(store, 100, kEngineTid, 900 * kMs, 901 * kMs, 901 * kMs, 202, 0, 0, "swapper/0");
  for (const auto& r : timeline.requests) handed_over(store, r.token_tid[0], r.start_ns, r.token_ns);
  store.finish();
  ld::model::Report report = ld::analysis::build_report(timeline, {}, 1000 * kMs, 3000 * kMs, 0);
  ld::analysis::attribute(report, timeline, nullptr, store, {100}, 0);
  const ld::model::Outlier* c_first = nullptr;
  const ld::model::Outlier* b_first = nullptr;
  for (const auto& o : report.outliers) {
    if (o.kind == WindowKind::kTtft && o.request == "100:c3#1") c_first = &o;
    if (o.kind == WindowKind::kTtft && o.request == "100:c2#1") b_first = &o;
  }
  ASSERT_NE(c_first, nullptr);
  EXPECT_EQ(c_first->causes[0].cause, Cause::kBatchInterference);
  EXPECT_EQ(c_first->causes[0].evidence["request"], "100:c2#1");
  EXPECT_NEAR(cause_ms(*c_first, Cause::kCompute), c_first->baseline_ms, 0.5);  // its own share stays
  ASSERT_NE(b_first, nullptr);
  EXPECT_EQ(cause_ms(*b_first, Cause::kBatchInterference), 0);  // C came after it
  // A's slow gap overlapped both prompts: B's long one interfered; C's short one only queued
  // behind it (a prompt of the usual size makes no step longer), so B alone is listed.
  size_t gaps = 0;
  for (const auto& o : report.outliers) {
    if (o.kind != WindowKind::kTpot) continue;
    ++gaps;
    EXPECT_EQ(o.causes[0].cause, Cause::kBatchInterference);
    EXPECT_EQ(o.causes[0].evidence["request"], "100:c2#1");
    EXPECT_EQ(o.causes[0].evidence["requests"], 1);
  }
  EXPECT_EQ(gaps, 1u);
}

TEST(LiveWatch, SeesFirstTokensAndGapsAsTheyHappen) {
  ld::analysis::LiveWatch live(800, 150);
  auto io = [](uint64_t ts, uint8_t dir, uint8_t cls) {
    auto r = record<ld_sock_io>(LD_EV_SOCK_IO, 100, 101, ts);
    r.sock_id = 7;
    r.dir = dir;
    r.cls = cls;
    r.lport = 8000;
    return r;
  };
  auto feed = [&](const ld_sock_io& r) { return live.observe(r.hdr, sizeof(r)); };
  EXPECT_FALSE(feed(io(100 * kMs, LD_DIR_RECV, LD_PC_HTTP_REQUEST)));
  auto first = feed(io(1000 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA));
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->first_token);
  EXPECT_DOUBLE_EQ(first->ms, 900);
  EXPECT_EQ(first->tid, 101u);
  EXPECT_EQ(first->port, 8000);
  EXPECT_TRUE(live.slow(*first));
  auto quick = feed(io(1040 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA));
  ASSERT_TRUE(quick);
  EXPECT_FALSE(live.slow(*quick));
  EXPECT_FALSE(feed(io(1041 * kMs, LD_DIR_SEND, LD_PC_CHUNK_FRAME)));  // framing is not a token
  auto gap = feed(io(1440 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA));
  ASSERT_TRUE(gap);
  EXPECT_FALSE(gap->first_token);
  EXPECT_DOUBLE_EQ(gap->ms, 400);
  EXPECT_EQ(gap->token_index, 2u);
  EXPECT_TRUE(live.slow(*gap));
  EXPECT_FALSE(feed(io(1450 * kMs, LD_DIR_SEND, LD_PC_SSE_DONE)));
  // The next request on the keep-alive connection starts afresh: a quick first token.
  EXPECT_FALSE(feed(io(5000 * kMs, LD_DIR_RECV, LD_PC_HTTP_REQUEST)));
  auto next = feed(io(5100 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA));
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->first_token);
  EXPECT_FALSE(live.slow(*next));
}

// A server that terminates TLS: the socket records are ciphertext (no class), the tls probe's
// say what each carried; the live view sees the same first token and gap the report does.
TEST(LiveWatch, SeesTokensOfATlsStream) {
  ld::analysis::LiveWatch live(800, 150);
  auto io = [](uint64_t ts, uint8_t dir) {
    auto r = record<ld_sock_io>(LD_EV_SOCK_IO, 100, 101, ts);
    r.sock_id = 9;
    r.dir = dir;
    r.cls = LD_PC_OTHER;
    r.ret = 200;
    r.lport = 8443;
    return r;
  };
  auto tls = [](uint64_t ts, uint8_t dir, uint8_t cls) {
    auto r = record<ld_tls_io>(LD_EV_TLS_IO, 100, 101, ts);
    r.dir = dir;
    r.cls = cls;
    r.sse_events = cls == LD_PC_SSE_DATA ? 1 : 0;
    return r;
  };
  auto feed = [&](const auto& r) { return live.observe(r.hdr, sizeof(r)); };
  EXPECT_FALSE(feed(io(100 * kMs, LD_DIR_RECV)));
  EXPECT_FALSE(feed(tls(101 * kMs, LD_DIR_RECV, LD_PC_HTTP_REQUEST)));
  EXPECT_FALSE(feed(tls(1000 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA)));  // not on the wire yet
  auto first = feed(io(1001 * kMs, LD_DIR_SEND));
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->first_token);
  EXPECT_DOUBLE_EQ(first->ms, 901);  // request received with its ciphertext -> token sent
  EXPECT_EQ(first->port, 8443);
  EXPECT_FALSE(feed(tls(1200 * kMs, LD_DIR_SEND, LD_PC_SSE_DATA)));
  auto gap = feed(io(1201 * kMs, LD_DIR_SEND));
  ASSERT_TRUE(gap);
  EXPECT_FALSE(gap->first_token);
  EXPECT_DOUBLE_EQ(gap->ms, 200);
  EXPECT_TRUE(live.slow(*gap));
}

// HTTP/2 (gRPC): two streams of one connection, their tokens in shared sends; each stream keeps
// its own first token and gaps, and a send of several streams' tokens reports the longest wait.
TEST(LiveWatch, SeesTheStreamsOfAnHttp2Connection) {
  ld::analysis::LiveWatch live(800, 150);
  auto h2 = [](uint64_t ts, uint8_t dir, std::vector<ld_h2_frame> frames) {
    auto r = record<ld_h2_frames>(LD_EV_H2_FRAMES, 100, 101, ts);
    r.sock_id = 11;
    r.dir = dir;
    r.lport = 50051;
    for (const auto& f : frames) r.f[r.count++] = f;
    return r;
  };
  auto headers = [](uint32_t s) { return ld_h2_frame{s, 60, LD_H2_HEADERS, 0, 0, 0}; };
  auto message = [](uint32_t s, uint8_t flags = 0) {
    return ld_h2_frame{s, 30, LD_H2_DATA, flags, LD_PC_GRPC_MESSAGE, 1};
  };
  auto feed = [&](const auto& r) { return live.observe(r.hdr, sizeof(r)); };
  EXPECT_FALSE(feed(h2(100 * kMs, LD_DIR_RECV, {headers(1)})));
  EXPECT_FALSE(feed(h2(300 * kMs, LD_DIR_RECV, {headers(3)})));
  auto first = feed(h2(1000 * kMs, LD_DIR_SEND, {headers(1), message(1), headers(3), message(3)}));
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->first_token);
  EXPECT_DOUBLE_EQ(first->ms, 900);  // stream 1's wait, the longer
  EXPECT_EQ(first->port, 50051);
  auto gap = feed(h2(1040 * kMs, LD_DIR_SEND, {message(3)}));
  ASSERT_TRUE(gap);
  EXPECT_FALSE(gap->first_token);
  EXPECT_DOUBLE_EQ(gap->ms, 40);
  auto last = feed(h2(1300 * kMs, LD_DIR_SEND, {message(1, LD_H2_FLAG_END_STREAM)}));
  ASSERT_TRUE(last);
  EXPECT_DOUBLE_EQ(last->ms, 300);
  EXPECT_TRUE(live.slow(*last));
  EXPECT_EQ(live.oldest_open_request_ns(), 300 * kMs);  // stream 1 ended, stream 3 is open
}

// ---------------------------------------------------------------- CUDA (the cuda probe)
namespace {

void cuda(EvidenceStore& store, uint32_t tgid, uint32_t tid, uint16_t kind, uint16_t api, uint64_t start, uint64_t end,
          uint32_t count = 1, uint64_t arg = 0) {
  auto r = record<ld_cuda_call>(LD_EV_CUDA, tgid, tid, end);
  r.start_ns = start;
  r.dur_ns = end - start;
  r.count = count;
  r.kind = kind;
  r.api = api;
  r.arg = arg;
  add(store, r);
}

// Thread 100 waits four times 0.8 ms for the GIL (10, 20, 30, 40 ms): under the scheduler's
// threshold, only the futex probe's timed calls say so.
void short_gil_waits(EvidenceStore& store) {
  gil_address(store);
  for (uint64_t t = 10; t < 50; t += 10)
    syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, t * kMs, t * kMs + 800'000, 0x5000);
  blocked(store, 100, 100, 95 * kMs, 96 * kMs, 96 * kMs, 232, 0, 0, "swapper/0");
}

}  // namespace

TEST(CudaAttribution, ASyncSpunOnTheCpuIsTheGpus) {
  // CUDA's default schedule spins: the thread never leaves its CPU while it waits.
  EvidenceStore store;
  cuda(store, 100, 100, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 2 * kMs, 18 * kMs, 24);
  cuda(store, 100, 100, LD_CUDA_SYNC, LD_CUDART_STREAM_SYNCHRONIZE, 20 * kMs, 80 * kMs);
  blocked(store, 100, 100, 95 * kMs, 96 * kMs, 96 * kMs, 232, 0, 0, "swapper/0");  // the sched probe saw the thread
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGpuBusy), 60);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 39);
  EXPECT_EQ(acc.total_ns(), 100 * kMs);
  const auto& ev = acc.evidence[static_cast<size_t>(Cause::kGpuBusy)];
  EXPECT_EQ(ev.strings["api"], "cudaStreamSynchronize");
  EXPECT_DOUBLE_EQ(ev.sums.at("launches"), 24);
  EXPECT_DOUBLE_EQ(ev.sums.at("syncs"), 1);
}

TEST(CudaAttribution, ABlockingSyncIsTheGpusNotALockWait) {
  // cudaDeviceScheduleBlockingSync: the thread sleeps in the driver (a futex or an ioctl).
  EvidenceStore store;
  cuda(store, 100, 100, LD_CUDA_SYNC, LD_CU_CTX_SYNCHRONIZE, 19 * kMs, 81 * kMs);
  blocked(store, 100, 100, 20 * kMs, 80 * kMs, 80 * kMs, 202, 0, 0, "swapper/0");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 20 * kMs, 80 * kMs, 0x7000);
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGpuBusy), 62);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kLockContention), 0);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kAppWait), 0);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 38);
}

TEST(CudaAttribution, ADeviceAllocationIsKvAlloc) {
  EvidenceStore store;
  cuda(store, 100, 100, LD_CUDA_ALLOC, LD_CUDART_MALLOC, 10 * kMs, 40 * kMs, 1, 1ULL << 30);
  blocked(store, 100, 100, 95 * kMs, 96 * kMs, 96 * kMs, 232, 0, 0, "swapper/0");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kKvAlloc), 30);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGpuBusy), 0);
  EXPECT_EQ(acc.evidence[static_cast<size_t>(Cause::kKvAlloc)].strings["api"], "cudaMalloc");
}

TEST(CudaAttribution, TheGpuIsQueuedFromALaunchToTheWaitAfterIt) {
  EvidenceStore store;
  cuda(store, 100, 101, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 10 * kMs, 12 * kMs, 8);
  cuda(store, 100, 101, LD_CUDA_SYNC, LD_CUDART_STREAM_SYNCHRONIZE, 12 * kMs, 30 * kMs);
  cuda(store, 100, 101, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 100 * kMs, 102 * kMs, 8);  // no wait after it
  store.finish();
  ASSERT_TRUE(store.has_cuda());
  EXPECT_TRUE(store.uses_cuda(101));
  EXPECT_FALSE(store.uses_cuda(100));
  const auto* queued = store.gpu_queued(100);
  ASSERT_NE(queued, nullptr);
  const std::vector<std::pair<uint64_t, uint64_t>> want{{10 * kMs, 30 * kMs}, {100 * kMs, 102 * kMs}};
  EXPECT_EQ(*queued, want);
  EXPECT_EQ(store.gpu_queued(999), nullptr);
}

// Launches untraced (--cuda-launches off): the process synced but never launched. Its queue is
// unknown, not empty: no queue is inferred, so no slow window claims the GPU idle; the sync's
// time is still the GPU's.
TEST(CudaAttribution, WithoutLaunchesTheQueueIsUnknownNotIdle) {
  EvidenceStore store;
  cuda(store, 100, 101, LD_CUDA_SYNC, LD_CUDART_STREAM_SYNCHRONIZE, 12 * kMs, 30 * kMs);
  blocked(store, 100, 101, 95 * kMs, 96 * kMs, 96 * kMs, 232, 0, 0, "swapper/0");
  store.finish();
  EXPECT_TRUE(store.has_cuda());
  EXPECT_TRUE(store.uses_cuda(101));
  EXPECT_EQ(store.gpu_queued(100), nullptr);
  const WindowAccount acc = Attributor(store, {101}).account(101, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGpuBusy), 18);
}

TEST(CudaAttribution, AGilWaitTheEngineThreadEndedIsWhatTheEngineDid) {
  // The event loop (100) waits for the GIL while the engine thread (101) runs the model's Python
  // and waits for the GPU: the wait is the engine's work, not GIL contention.
  EvidenceStore store;
  gil_address(store);
  blocked(store, 100, 100, 10 * kMs, 60 * kMs, 60 * kMs, 202, 101, 100, "engine");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 10 * kMs, 60 * kMs, 0x5000);
  cuda(store, 100, 101, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 5 * kMs, 25 * kMs, 48);
  cuda(store, 100, 101, LD_CUDA_SYNC, LD_CUDART_STREAM_SYNCHRONIZE, 30 * kMs, 50 * kMs);
  blocked(store, 100, 101, 90 * kMs, 91 * kMs, 91 * kMs, 232, 0, 0, "swapper/0");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGil), 0);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGpuBusy), 20);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 80);
  EXPECT_EQ(acc.gil_engine_ns, 50 * kMs);
}

TEST(CudaAttribution, AGilWaitAnotherPythonThreadEndedStaysGil) {
  EvidenceStore store;
  gil_address(store);
  blocked(store, 100, 100, 10 * kMs, 60 * kMs, 60 * kMs, 202, 102, 100, "metrics");
  syscall(store, 100, 100, LD_SYS_FUTEX_WAIT, 10 * kMs, 60 * kMs, 0x5000);
  cuda(store, 100, 101, LD_CUDA_SYNC, LD_CUDART_STREAM_SYNCHRONIZE, 30 * kMs, 50 * kMs);  // the engine, not the holder
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGil), 50);
  EXPECT_EQ(acc.gil_engine_ns, 0u);
}

TEST(CudaAttribution, ShortGilWaitsWhileTheEngineRanAreTheEngines) {
  // Waits under the scheduler's threshold have no waker: the futex probe's timed calls on the
  // GIL, while the engine thread (it calls CUDA) was running its Python.
  EvidenceStore store;
  short_gil_waits(store);
  cuda(store, 100, 101, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 1 * kMs, 60 * kMs, 96);
  blocked(store, 100, 101, 90 * kMs, 91 * kMs, 91 * kMs, 232, 0, 0, "swapper/0");
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGil), 0);
  EXPECT_EQ(acc.gil_engine_ns, 4 * 800'000u);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kCompute), 99);
}

TEST(CudaAttribution, ShortGilWaitsWhileTheEngineSleptStayGil) {
  EvidenceStore store;
  short_gil_waits(store);
  cuda(store, 100, 101, LD_CUDA_LAUNCH, LD_CUDART_LAUNCH_KERNEL, 1 * kMs, 2 * kMs, 8);
  blocked(store, 100, 101, 5 * kMs, 80 * kMs, 80 * kMs, 232, 0, 0, "swapper/0");  // the engine idle in epoll
  store.finish();
  const WindowAccount acc = Attributor(store, {100}).account(100, 0, 100 * kMs);
  EXPECT_DOUBLE_EQ(ms_of(acc, Cause::kGil), 3.2);
  EXPECT_EQ(acc.gil_engine_ns, 0u);
}
