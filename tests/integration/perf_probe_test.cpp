// Root tier: the perf probe's cpu-clock samples on a kernel-heavy and a user-heavy thread.
#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

namespace ld::test {
namespace {

using namespace std::chrono_literals;

// The samples whichever record carried them: ld_cpu_frames while user stacks are on (the
// default), ld_cpu_sample with --user-stacks off.
std::vector<ld_cpu_sample> samples_of(const Recorded& rec) {
  auto out = rec.of_type<ld_cpu_sample>(LD_EV_CPU_SAMPLE);
  for (const auto& f : rec.of_type<ld_cpu_frames>(LD_EV_CPU_FRAMES)) {
    ld_cpu_sample s{};
    s.hdr = f.hdr;
    s.kstack_id = f.kstack_id;
    s.user_mode = f.user_mode;
    out.push_back(s);
  }
  return out;
}

// Runs perf_kernel_busy under the perf probe at `hz` and checks what either sample source
// must give: `expect_hz` (0: `hz`) samples per second of each thread's CPU time, user/kernel
// mode told apart, and every kernel-mode sample's stack symbolised, through the read() the
// thread makes. `source` is the start of the probe's detail ("scheduler tick" or
// "cpu-clock"), which is put in `detail_out`. `options`: the probe in this process with these
// hook choices instead of `latency-doctor record`. (void: gtest's ASSERT returns.)
void check_samples(uint32_t hz, const std::string& source, std::string* detail_out = nullptr, double expect_hz = 0,
                   const probes::ProbeOptions* options = nullptr) {
  if (expect_hz == 0) expect_hz = hz;
  Child wl({workload_path("perf_kernel_busy")});
  Recorded rec;
  if (options) {
    probes::ProbeOptions o = *options;
    o.probes = {"perf"};
    o.sample_hz = hz;
    rec = record_in_process(wl, o, 20s);
  } else {
    rec = record_workload(wl, "perf", 20s, {"--sample-hz", std::to_string(hz)});
  }
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto status = rec.probe("perf");
  ASSERT_FALSE(status.is_null());
  if (status.value("status", "") == "unavailable")
    GTEST_SKIP() << "perf probe unavailable here: " << status.value("reason", "");
  ASSERT_EQ(status.value("status", ""), "attached") << status.dump();
  const std::string detail = status.value("reason", "");
  if (detail_out) *detail_out = detail;
  if (detail.rfind(source, 0) != 0) {
    // The tick source needs x86-64, an hrtimer tick, no FRED: the detail says which is missing.
    if (source == "scheduler tick") GTEST_SKIP() << "not the tick source here: " << detail;
    FAIL() << "expected the " << source << " source: " << detail;
  }

  auto f = parse_fields(wl.out());
  ASSERT_TRUE(f.count("kernel") && f.count("user") && f.count("kernel_cpu_ns")) << wl.out();
  uint32_t ktid = f["kernel"], utid = f["user"];

  struct Count {
    uint64_t total = 0, user = 0, with_stack = 0;
  };
  std::map<uint32_t, Count> by_tid;
  std::vector<int64_t> kernel_stack_ids;
  for (const auto& s : samples_of(rec)) {
    EXPECT_EQ(s.hdr.tgid, uint32_t(wl.pid()));
    auto& c = by_tid[s.hdr.tid];
    c.total++;
    c.user += s.user_mode;
    if (!s.user_mode && s.kstack_id >= 0) {
      c.with_stack++;
      if (s.hdr.tid == ktid) kernel_stack_ids.push_back(s.kstack_id);
    }
    if (s.user_mode) {
      EXPECT_LT(s.kstack_id, 0);
    }
  }

  // A sampler at `hz` sees `hz` samples per second of the thread's CPU time.
  for (auto [tid, cpu_ns] : {std::pair{ktid, f["kernel_cpu_ns"]}, {utid, f["user_cpu_ns"]}}) {
    double expect = expect_hz * double(cpu_ns) / 1e9;
    SCOPED_TRACE("tid " + std::to_string(tid) + " cpu " + std::to_string(cpu_ns / 1000000) + " ms");
    EXPECT_GT(expect, 40) << "the workload barely ran (a busy machine)";
    EXPECT_NEAR(double(by_tid[tid].total), expect, expect * 0.3);
  }
  const Count& k = by_tid[ktid];
  const Count& u = by_tid[utid];
  std::printf(
      "%s: kernel thread: %llu samples (%.0f expected), %llu in user mode; user thread: "
      "%llu samples (%.0f expected), %llu in user mode\n",
      detail.c_str(), (unsigned long long)k.total, expect_hz * double(f["kernel_cpu_ns"]) / 1e9,
      (unsigned long long)k.user, (unsigned long long)u.total, expect_hz * double(f["user_cpu_ns"]) / 1e9,
      (unsigned long long)u.user);
  EXPECT_GT(double(u.user), 0.95 * double(u.total)) << "busy loop in user space";
  EXPECT_LT(double(k.user), 0.3 * double(k.total)) << "read(/dev/zero) is kernel work";
  EXPECT_GT(double(k.with_stack), 0.9 * double(k.total - k.user));

  // Every kernel sample's stack is symbolised, starts in the interrupted code (not in the
  // sampling interrupt's own path), and reading /dev/zero looks like it.
  auto stacks = kstacks(rec, LD_PROBE_PERF);
  ASSERT_FALSE(kernel_stack_ids.empty());
  size_t via_read = 0;
  for (int64_t id : kernel_stack_ids) {
    ASSERT_TRUE(stacks.count(id)) << "no ld_kstack for id " << id;
    const auto& frames = stacks[id];
    ASSERT_FALSE(frames.empty());
    for (const auto& fr : frames) EXPECT_NE(fr.find("+0x"), std::string::npos) << fr;
    for (const char* irq : {"hrtimer_interrupt+", "__hrtimer_run_queues+", "bpf_prog_", "bpf_trace_run"})
      EXPECT_NE(frames.front().rfind(irq, 0), 0u) << "top frame " << frames.front();
    if (std::any_of(frames.begin(), frames.end(),
                    [](const std::string& s) { return s.rfind("ksys_read+", 0) == 0 || s.rfind("vfs_read+", 0) == 0; }))
      via_read++;
  }
  EXPECT_GT(double(via_read), 0.8 * double(kernel_stack_ids.size()));
}

// The sched and perf probes' stacks are named in one pass over /proc/kallsyms (the first
// probe to finish names the other's too, agent/probes/kallsyms.cpp): each source's stacks are
// all there and named, and the names are right for what the thread did.
TEST(PerfProbe, StacksOfSchedAndPerfAreAllNamed) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({workload_path("perf_kernel_busy")});
  Recorded rec = record_workload(wl, "sched,perf", 20s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  for (const char* probe : {"sched", "perf"}) {
    if (rec.probe(probe).value("status", "") != "attached")
      GTEST_SKIP() << probe << " probe not attached here: " << rec.probe(probe).dump();
  }
  std::set<int64_t> read_stacks;  // perf stacks through read(): the workload's kernel work
  for (uint32_t source : {uint32_t(LD_PROBE_SCHED), uint32_t(LD_PROBE_PERF)}) {
    const auto stacks = kstacks(rec, source);
    // The workload blocks only in futex (its joins), which names its cause and takes no stack
    // (SchedProbe.BlockedReaderWokenByWriter names a read's); the perf samples must have some.
    if (source == LD_PROBE_PERF) {
      ASSERT_FALSE(stacks.empty()) << "no stacks of probe " << source;
    }
    for (const auto& [id, frames] : stacks) {
      ASSERT_FALSE(frames.empty()) << "stack " << id << " of probe " << source;
      for (const auto& fr : frames) EXPECT_NE(fr.find("+0x"), std::string::npos) << fr;
      if (source == LD_PROBE_SCHED) {
        EXPECT_EQ(frames.front().rfind("__schedule+", 0), 0u) << frames.front();
      }
      if (source != LD_PROBE_PERF) continue;
      if (std::any_of(frames.begin(), frames.end(), [](const std::string& s) {
            return s.rfind("ksys_read+", 0) == 0 || s.rfind("vfs_read+", 0) == 0;
          }))
        read_stacks.insert(id);
    }
  }
  // Most of the workload's kernel time is its read(/dev/zero): counted by samples, since a few
  // rare stacks (a fault, the exit) can be as many distinct ids as the read path's few.
  size_t kernel_samples = 0, read_samples = 0;
  for (const auto& sample : samples_of(rec)) {
    if (sample.user_mode || sample.kstack_id < 0) continue;
    kernel_samples++;
    read_samples += read_stacks.count(sample.kstack_id);
  }
  std::printf("perf: %zu kernel-mode samples with a stack, %zu through read() (%zu distinct stacks)\n", kernel_samples,
              read_samples, read_stacks.size());
  EXPECT_GT(double(read_samples), 0.5 * double(kernel_samples));
}

// The default rate (99 Hz) is below HZ: sampled at the scheduler tick, no interrupt of its own.
// User or kernel mode is told from the word below the task's saved user registers
// (bpf/perf.bpf.c), checked against the stack walk at attach; x86-64 kernels since 5.15 have
// what it needs (bpf_task_pt_regs), this machine's among them.
TEST(PerfProbe, TickSamplesUserAndKernelThreads) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  std::string detail;
  check_samples(99, "scheduler tick", &detail);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_NE(detail.find("the mode told from the saved registers"), std::string::npos) << detail;
}

// The stack walk, where the registers check is not available or disagreed at attach.
TEST(PerfProbe, TickSamplesUserAndKernelThreadsByStackWalk) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  probes::ProbeOptions options;
  options.hooks.perf_mode_by_walk = true;
  std::string detail;
  check_samples(99, "scheduler tick", &detail, 0, &options);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_NE(detail.find("by a stack walk (the walk was asked for)"), std::string::npos) << detail;
}

// The usual source, asked for at a rate the tick would take: cpu-clock perf events, and the
// probes table says why not the tick.
TEST(PerfProbe, CpuClockSourceWhenAskedForBelowHz) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  probes::ProbeOptions options;
  options.hooks.perf = probes::PerfSource::PerfEvent;
  std::string detail;
  check_samples(99, "cpu-clock", &detail, 0, &options);
  if (HasFatalFailure()) return;
  EXPECT_NE(detail.find("not the scheduler tick: the cpu-clock source was asked for"), std::string::npos) << detail;
}

// The tick source takes a rate up to 5% above the tick's (timer jitter, and HZ=250 for an
// asked 251 Hz): every tick is then a sample, HZ of them per second. 10% above: cpu-clock.
TEST(PerfProbe, TickRateUpTo5PercentAboveHzSamplesEveryTick) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  std::string detail;
  check_samples(99, "scheduler tick", &detail);
  if (HasFatalFailure() || IsSkipped()) return;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(detail, m, std::regex(R"(every ([0-9.]+) ms)"))) << detail;
  const double tick_hz = 1000.0 / std::stod(m[1]);
  SCOPED_TRACE("the tick runs at " + std::to_string(tick_hz) + " Hz");
  check_samples(uint32_t(tick_hz * 1.04), "scheduler tick", nullptr, tick_hz);
  if (HasFatalFailure()) return;
  check_samples(uint32_t(tick_hz * 1.10), "cpu-clock", &detail);
  EXPECT_NE(detail.find("the tick runs at"), std::string::npos) << detail;
}

// Above HZ (100-1000 by the kernel's build; 2000 is above every one): cpu-clock perf events.
TEST(PerfProbe, CpuClockSamplesUserAndKernelThreads) {
  if (auto why = bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  check_samples(2000, "cpu-clock");
}

}  // namespace
}  // namespace ld::test
