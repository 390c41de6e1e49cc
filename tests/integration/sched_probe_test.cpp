// Root tier: the sched probe against workloads whose off-CPU behaviour is known.
#include <sys/syscall.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

namespace ld::test {
namespace {

using namespace std::chrono_literals;

constexpr double kMs = 1e6;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " <- ";
  return s;
}

class SchedProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  }

  // Under `latency-doctor record`, or in this process with `options` (a hook forced, a fault
  // injected: what only ProbeOptions can ask).
  Recorded record(Child& wl, const probes::ProbeOptions* options = nullptr) {
    Recorded rec;
    if (options) {
      probes::ProbeOptions o = *options;
      o.probes = {"sched"};
      rec = record_in_process(wl, o, 20s);
    } else {
      rec = record_workload(wl, "sched", 20s);
    }
    EXPECT_EQ(rec.agent_exit, 0) << rec.agent_err;
    auto status = rec.probe("sched");
    EXPECT_FALSE(status.is_null());
    if (!status.is_null()) {
      EXPECT_EQ(status.value("status", ""), "attached") << status.dump();
    }
    return rec;
  }

  // Runs the FIFO hog workload and checks the worker's preemptions; keeps the probe's reason
  // (which programs ran) in reason_.
  void expect_preempted_by_fifo_hog(const probes::ProbeOptions* options = nullptr);
  std::string reason_;
};

// Is this kernel at least major.minor?
bool kernel_at_least(int major, int minor) {
  struct utsname u {};
  int a = 0, b = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &a, &b) != 2) return false;
  return a > major || (a == major && b >= minor);
}

// Was the block in read()? Where the syscall number is not recorded for this architecture,
// every block counts.
bool is_read(const ld_offcpu& e) {
#if defined(__x86_64__) || defined(__aarch64__)
  return e.syscall_nr == uint32_t(SYS_read);
#else
  (void)e;
  return true;
#endif
}

// The program for kernels before 5.18 (sched_switch without its prev_state argument), forced
// on this kernel: it loads, attaches and itemises the same blocks with their waker.
TEST_F(SchedProbe, LegacySwitchProgramRecordsBlocks) {
  probes::ProbeOptions options;
  options.hooks.sched = probes::SchedHook::RawLegacySwitch;
  Child wl({workload_path("sched_wake")});
  Recorded rec = record(wl, &options);
  EXPECT_NE(rec.probe("sched").value("reason", "").find("kernel < 5.18"), std::string::npos)
      << rec.probe("sched").dump();
  auto f = parse_fields(wl.out());
  ASSERT_TRUE(f.count("reader") && f.count("writer")) << wl.out();
  size_t woken = 0;
  // Only the reads: on a slow (emulated) CPU the reader can also wait >= 1 ms for the writer's
  // stdout lock while both print their tids.
  for (const auto& e : rec.of_type<ld_offcpu>(LD_EV_OFFCPU))
    if (e.hdr.tid == f["reader"] && e.kind == LD_OFF_BLOCKED && e.waker_tid == f["writer"] && is_read(e)) {
      ++woken;
      EXPECT_LE(e.off_ns, e.wake_ns);
      EXPECT_LE(e.wake_ns, e.on_ns);
    }
  EXPECT_EQ(woken, 5u);
}

// A thread blocked in read() on a pipe, woken 5 times by a sibling thread's write 50 ms later.
TEST_F(SchedProbe, BlockedReaderWokenByWriter) {
  Child wl({workload_path("sched_wake")});
  Recorded rec = record(wl);
  // The typed programs (tp_btf, with sched_switch's prev_state) wherever the kernel has them.
  if (kernel_at_least(5, 18)) {
    EXPECT_EQ(rec.probe("sched").value("reason", "").rfind("typed tracepoints (tp_btf)", 0), 0u)
        << rec.probe("sched").dump();
  }
  auto f = parse_fields(wl.out());
  ASSERT_TRUE(f.count("reader") && f.count("writer")) << wl.out();
  uint32_t reader = f["reader"], writer = f["writer"];

  std::vector<ld_offcpu> woken;
  for (const auto& e : rec.of_type<ld_offcpu>(LD_EV_OFFCPU))
    if (e.hdr.tid == reader && e.kind == LD_OFF_BLOCKED && e.waker_tid == writer) woken.push_back(e);
  std::sort(woken.begin(), woken.end(), [](const ld_offcpu& a, const ld_offcpu& b) { return a.off_ns < b.off_ns; });
  ASSERT_EQ(woken.size(), 5u) << "reader " << reader << " writer " << writer;

  auto stacks = kstacks(rec, LD_PROBE_SCHED);
  for (size_t i = 0; i < woken.size(); ++i) {
    const auto& e = woken[i];
    SCOPED_TRACE("interval " + std::to_string(i));
    EXPECT_EQ(e.hdr.tgid, uint32_t(wl.pid()));
    EXPECT_EQ(e.waker_tgid, uint32_t(wl.pid()));
    EXPECT_STREQ(e.waker_comm, "ld-writer");
    EXPECT_LE(e.off_ns, e.wake_ns);
    EXPECT_LE(e.wake_ns, e.on_ns);
    EXPECT_EQ(e.hdr.ts_ns, e.on_ns);
    EXPECT_NE(e.prev_state, 0u);  // TASK_INTERRUPTIBLE
#if defined(__x86_64__) || defined(__aarch64__)
    EXPECT_EQ(e.syscall_nr, uint32_t(SYS_read));
#endif
    // The first wait also covers the 10 ms before the writer thread starts.
    double blocked_ms = double(e.wake_ns - e.off_ns) / kMs;
    double expect_ms = i == 0 ? 60 : 50;
    EXPECT_NEAR(blocked_ms, expect_ms, 10);
    // Woken -> running: quick, unless the machine is loaded (CFS slices are ~3 ms).
    EXPECT_LT(double(e.on_ns - e.wake_ns) / kMs, 40);
    ASSERT_GE(e.kstack_id, 0);
    ASSERT_TRUE(stacks.count(e.kstack_id)) << "no ld_kstack for id " << e.kstack_id;
    const auto& frames = stacks[e.kstack_id];
    bool pipe =
        std::any_of(frames.begin(), frames.end(), [](const std::string& s) { return s.find("pipe_read+") != s.npos; });
    EXPECT_TRUE(pipe) << join(frames);
    // The program's own frames (bpf_prog_..., bpf_trace_run4) are cut: __schedule first.
    EXPECT_EQ(frames.front().rfind("__schedule+", 0), 0u) << join(frames);
  }
}

#if defined(__x86_64__)
// A block in futex names its cause by the syscall alone: itemised, with its waker, but the
// kernel takes no stack for it (the read above keeps one: a read says nothing by itself).
TEST_F(SchedProbe, FutexBlocksTakeNoKernelStack) {
  Child wl({workload_path("futex_contend")});
  Recorded rec = record(wl);
  std::smatch m;
  const std::string out = wl.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(holder_tid=(\d+) waiter_tid=(\d+))"))) << out;
  const uint32_t holder = std::stoul(m[1]), waiter = std::stoul(m[2]);
  size_t futex_blocks = 0;
  for (const auto& e : rec.of_type<ld_offcpu>(LD_EV_OFFCPU)) {
    if (e.hdr.tid != waiter || e.kind != LD_OFF_BLOCKED || e.syscall_nr != uint32_t(SYS_futex)) continue;
    ++futex_blocks;
    EXPECT_EQ(e.kstack_id, -1);
    if (e.waker_tid != 0) {
      EXPECT_EQ(e.waker_tid, holder);
    }
  }
  // 10 rounds of a 20 ms hold: a wait can split when the waiter loses the race once.
  EXPECT_GE(futex_blocks, 8u);
}
#endif

// "burst <start> <end>" lines of a workload's stdout.
std::vector<std::pair<uint64_t, uint64_t>> parse_bursts(const std::string& out) {
  std::vector<std::pair<uint64_t, uint64_t>> bursts;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long a, b;
    if (std::sscanf(line.c_str(), "burst %llu %llu", &a, &b) == 2) bursts.emplace_back(a, b);
  }
  return bursts;
}

// A spinning worker pinned to CPU 0 and a SCHED_FIFO thread pinned there too that runs 10
// bursts of 20 ms: the worker waits runnable for each burst, preempted by the hog.
TEST_F(SchedProbe, PreemptedByFifoHog) { expect_preempted_by_fifo_hog(); }

// The raw tracepoint programs (kernels without tp_btf or before 5.18), forced on this one:
// the task fields they read by probe reads (waker pid, tgid and comm of a preemption, the
// holder) come out as the typed programs' plain loads give them.
TEST_F(SchedProbe, RawTracepointProgramsNameTheHog) {
  probes::ProbeOptions options;
  options.hooks.sched = probes::SchedHook::RawTracepoints;
  expect_preempted_by_fifo_hog(&options);
  EXPECT_EQ(reason_.rfind("raw tracepoints sched_switch", 0), 0u) << reason_;
}

// Typed programs that load but do not attach (simulated: they attach, then the loader is told
// they failed) give way to the raw ones, and the probe records as before.
TEST_F(SchedProbe, TypedProgramsThatDoNotAttachGiveWayToRawOnes) {
  probes::ProbeOptions options;
  options.faults.sched_typed_attach = true;  // ld_probes_test: this test build only
  expect_preempted_by_fifo_hog(&options);
  EXPECT_EQ(reason_.rfind("raw tracepoints sched_switch", 0), 0u) << reason_;
  EXPECT_NE(reason_.find("typed ones did not attach"), std::string::npos) << reason_;
}

void SchedProbe::expect_preempted_by_fifo_hog(const probes::ProbeOptions* options) {
  Child wl({workload_path("sched_cpu_hog")});
  Recorded rec = record(wl, options);
  reason_ = rec.probe("sched").value("reason", "");
  auto f = parse_fields(wl.out());
  auto bursts = parse_bursts(wl.out());
  if (!f.count("worker") || !f.count("hog") || !f.count("burst_ns") || bursts.size() != 10) {
    ADD_FAILURE() << "workload output: " << wl.out();
    return;
  }
  if (!f["fifo"] || !f["worker_fifo"]) GTEST_SKIP() << "SCHED_FIFO is not allowed here";
  uint32_t worker = f["worker"];

  std::vector<ld_offcpu> preempted;
  std::string seen;
  for (const auto& e : rec.of_type<ld_offcpu>(LD_EV_OFFCPU)) {
    if (e.hdr.tid != worker) continue;
    seen += fmt::format("off {:.3f} on {:.3f} ms kind {} waker {} holder {} cpu {}->{}\n", e.off_ns / kMs,
                        e.on_ns / kMs, e.kind, e.waker_comm, e.holder_comm, e.off_cpu, e.on_cpu);
    // Before the bursts the worker may block while starting (thread start, printf,
    // setting its affinity); during them it only spins.
    if (e.on_ns < bursts.front().first) continue;
    EXPECT_EQ(e.kind, uint32_t(LD_OFF_PREEMPTED)) << "the worker never sleeps";
    EXPECT_EQ(e.wake_ns, 0u);
    EXPECT_EQ(e.kstack_id, -1);
    EXPECT_EQ(e.on_cpu, 0u);
    preempted.push_back(e);
  }

  // Each burst: the worker was off CPU for all of it, in an interval that names the hog as
  // the task that took the CPU (waker) or the one it got the CPU back from (holder). On an
  // idle machine both are the hog. On a busy one the kernel's fair server runs starved CFS
  // tasks now and then (the worker is FIFO), so the worker may already be off CPU when the
  // burst starts, or get the CPU back after such a task.
  int named = 0;
  uint64_t covered_ns = 0, burst_ns = 0;
  for (const auto& [start, end] : bursts) {
    burst_ns += end - start;
    bool by_hog = false;
    for (const auto& e : preempted) {
      if (e.on_ns <= start || e.off_ns >= end) continue;
      covered_ns += std::min(e.on_ns, end) - std::max(e.off_ns, start);
      if (std::string(e.waker_comm) == "ld-hog") {
        EXPECT_EQ(e.waker_tid, f["hog"]);
        EXPECT_EQ(e.waker_tgid, uint32_t(wl.pid()));
        by_hog = true;
      }
      if (std::string(e.holder_comm) == "ld-hog") {
        EXPECT_EQ(e.holder_tid, f["hog"]);
        by_hog = true;
      }
    }
    named += by_hog;
  }
  std::printf("bursts %.1f ms, worker off CPU during them %.1f ms, %d of %zu name the hog\n", double(burst_ns) / kMs,
              double(covered_ns) / kMs, named, bursts.size());
  EXPECT_GE(named, 8) << seen;
  EXPECT_NEAR(double(covered_ns), double(burst_ns), 0.05 * double(burst_ns)) << seen;
}

// 2000 sleeps of 200 us: below the 1 ms threshold, so they arrive summed in ld_sched_agg
// records (kernel flushes every 100 ms plus the final flush from user space), none lost.
TEST_F(SchedProbe, ShortSleepsAreSummed) {
  Child wl({workload_path("sched_short_sleeps")});
  Recorded rec = record(wl);
  auto f = parse_fields(wl.out());
  ASSERT_TRUE(f.count("napper") && f.count("sleeps")) << wl.out();
  uint32_t napper = f["napper"];

  uint64_t blocked_count = 0, runnable_count = 0, blocked_ns = 0, periods = 0;
  for (const auto& a : rec.of_type<ld_sched_agg>(LD_EV_SCHED_AGG)) {
    if (a.hdr.tid != napper) continue;
    EXPECT_EQ(a.hdr.tgid, uint32_t(wl.pid()));
    EXPECT_LE(a.period_start_ns, a.hdr.ts_ns);
    blocked_count += a.blocked_count;
    runnable_count += a.runnable_count;
    blocked_ns += a.blocked_ns;
    periods++;
  }
  for (const auto& e : rec.of_type<ld_offcpu>(LD_EV_OFFCPU)) {
    if (e.hdr.tid != napper || (e.kind == LD_OFF_BLOCKED && e.wake_ns == e.off_ns)) continue;
    if (e.kind == LD_OFF_BLOCKED) {
      blocked_count++;
      EXPECT_TRUE(e.wake_ns == 0 || (e.off_ns <= e.wake_ns && e.wake_ns <= e.on_ns));
      blocked_ns += (e.wake_ns ? e.wake_ns : e.on_ns) - e.off_ns;  // 0: the wake-up was not seen
    } else {
      runnable_count++;
    }
  }
  // Each block is one voluntary context switch, each preemption one involuntary switch: the
  // kernel's counters (read by the thread just before it printed them) are the truth. The
  // thread may switch a few more times after reading them (printf, exit).
  uint64_t sleeps = f["sleeps"];
  EXPECT_GE(double(f["nvcsw"]), 0.9 * double(sleeps));
  EXPECT_GE(blocked_count, f["nvcsw"]);
  EXPECT_LE(blocked_count, f["nvcsw"] + 3);
  EXPECT_GE(runnable_count, f["nivcsw"]);
  EXPECT_LE(runnable_count, f["nivcsw"] + 3);
  EXPECT_GE(periods, 3u);
  // Blocked time is most of the measured sleep time (the rest: entry/exit, wake latency).
  double slept = double(f["slept_ns"]);
  EXPECT_GT(double(blocked_ns), slept * 0.6);
  EXPECT_LT(double(blocked_ns), slept * 1.05);
}

// 1000 condition-variable waits of ~300 us, each ended by the producer thread: summed, and
// the sums name the producer as the waker of (nearly) all of them, with their blocked time.
TEST_F(SchedProbe, ShortWaitsAreSummedWithTheirWaker) {
  Child wl({workload_path("sched_short_handoffs")});
  Recorded rec = record(wl);
  auto f = parse_fields(wl.out());
  ASSERT_TRUE(f.count("consumer") && f.count("producer") && f.count("handoffs")) << wl.out();
  const uint32_t consumer = f["consumer"], producer = f["producer"];

  uint64_t summed = 0, summed_ns = 0, by_producer = 0, by_producer_ns = 0;
  for (const auto& a : rec.of_type<ld_sched_agg>(LD_EV_SCHED_AGG)) {
    if (a.hdr.tid != consumer) continue;
    summed += a.blocked_count;
    summed_ns += a.blocked_ns;
    uint64_t named = 0;
    for (const ld_agg_waker& w : a.wakers) {
      named += w.count;
      if (w.tid == 0) {
        EXPECT_EQ(w.count, 0u) << "an empty slot counts nothing";
        continue;
      }
      EXPECT_EQ(w.tgid, uint32_t(wl.pid())) << "wakers of this test are its own threads";
      if (w.tid != producer) continue;
      by_producer += w.count;
      by_producer_ns += w.blocked_ns;
    }
    EXPECT_LE(named, a.blocked_count);
  }
  std::printf("consumer blocked %llu times summed (%.1f ms), %llu of them woken by the producer (%.1f ms)\n",
              (unsigned long long)summed, double(summed_ns) / kMs, (unsigned long long)by_producer,
              double(by_producer_ns) / kMs);
  // Most hand-overs block the consumer (it waits before the producer is done); a loaded CI
  // host can stretch a few waits past 1 ms (itemised, not summed).
  EXPECT_GE(double(summed), 0.5 * double(f["handoffs"]));
  EXPECT_GE(double(by_producer), 0.9 * double(summed));
  EXPECT_LE(by_producer_ns, summed_ns);
  EXPECT_GT(by_producer_ns, 0u);
}

}  // namespace
}  // namespace ld::test
