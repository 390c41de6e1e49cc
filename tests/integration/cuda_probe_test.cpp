// cuda probe: the CUDA calls of a workload with a known pattern (tests/workloads/cuda_steps.cpp)
// against the fake CUDA driver and runtime (tests/workloads/fake_cuda/fake_cuda.h), with real
// uprobes: launches summed per burst, one record per sync despite the runtime calling the
// driver, copies and allocations with their sizes; a target without CUDA; a library dlopen()ed
// after the attach; nothing left in the kernel afterwards. Plus the symbol lookup it relies on.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"
#include "probes/elf_symbols.hpp"
#include "probes/process_search.hpp"
#include "trace/cuda_api.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

const std::string kFakeCuda = std::string(LD_BUILD_DIR) + "/fake_cuda";
constexpr uint32_t kStreamArg = 0x5, kEventArg = 0x77;  // cuda_steps' stream and event handles

// The workload's pattern (its defaults, named here for the checks).
struct Pattern {
  uint64_t steps = 5, launches = 20, kernel_us = 200, memcpy_bytes = 4 << 20, driver_launches = 3;
  std::vector<std::string> args() const {
    return {"--steps",           std::to_string(steps),          "--launches",     std::to_string(launches),
            "--kernel-us",       std::to_string(kernel_us),      "--memcpy-bytes", std::to_string(memcpy_bytes),
            "--driver-launches", std::to_string(driver_launches)};
  }
};

std::vector<ld_cuda_call> of_kind(const std::vector<ld_cuda_call>& calls, uint16_t kind) {
  std::vector<ld_cuda_call> out;
  std::copy_if(calls.begin(), calls.end(), std::back_inserter(out),
               [&](const ld_cuda_call& c) { return c.kind == kind; });
  return out;
}

uint64_t launches_in(const std::vector<ld_cuda_call>& calls) {
  uint64_t n = 0;
  for (const auto& c : of_kind(calls, LD_CUDA_LAUNCH)) n += c.count;
  return n;
}

std::string listing(const std::vector<ld_cuda_call>& calls) {
  std::string out;
  for (const auto& c : calls) out += "  " + ld::trace::describe_cuda_call(c) + "\n";
  return out;
}

// The launches between two blocking calls (a sync, copy or allocation ends each), in order.
struct Segment {
  uint64_t count = 0;
  uint64_t first_ns = 0, last_ns = 0;  // the first launch's entry, the last one's return
  uint16_t last_api = 0;
};
std::vector<Segment> launch_segments(const std::vector<ld_cuda_call>& calls) {
  std::vector<Segment> out;
  Segment seg;
  for (const auto& c : calls) {
    if (c.kind != LD_CUDA_LAUNCH) {
      out.push_back(seg);
      seg = Segment{};
      continue;
    }
    if (!seg.count) seg.first_ns = c.start_ns;
    seg.count += c.count;
    seg.last_ns = c.hdr.ts_ns;
    seg.last_api = c.api;
  }
  return out;
}

// How late a thread may get its CPU back on a shared 2-CPU host: a thread spinning or
// sleeping in a sync while builds run beside it was seen to return one or two 4 ms ticks late.
// The workload's own timing of each call is the tight bound.
constexpr uint64_t kSchedulingSlackNs = 20000000;

// A sync after `seg`'s launches queued `queued_ns` of GPU work. The fake GPU starts the work at
// the first launch and finishes it by the last launch's return + queued_ns: the sync ends after
// the first and not long after the second (not before the work could be done, and not long
// after it was), lasts at most the queued time, and lies within the workload's own timing of
// the call. Its duration alone is no measure: a thread preempted between launching and syncing
// finds the GPU further along.
void check_wait(const ld_cuda_call& sync, const Segment& seg, uint64_t queued_ns, uint64_t own_ns) {
  EXPECT_EQ(sync.count, 1u);
  EXPECT_EQ(sync.hdr.ts_ns - sync.start_ns, sync.dur_ns);
  EXPECT_GT(sync.hdr.ts_ns, seg.first_ns + queued_ns);
  EXPECT_LE(sync.hdr.ts_ns, std::max(sync.start_ns, seg.last_ns + queued_ns) + kSchedulingSlackNs);
  EXPECT_LE(sync.dur_ns, queued_ns + kSchedulingSlackNs);
  EXPECT_LE(sync.dur_ns, own_ns);
}

Child start_steps(std::vector<std::string> args) {
  args.insert(args.begin(), ld::test::workload_path("cuda_steps"));
  return Child(args);
}

// The workload's "key value" lines, once it has printed its tid (before SIGUSR1).
bool wait_started(Child& wl) { return wl.wait_for_output("tid ", 10s); }

// What every record of the steps pattern must say, whatever the sync mode.
void check_steps(const ld::test::Recorded& rec, Child& wl, const Pattern& pat) {
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto status = rec.probe("cuda");
  ASSERT_EQ(status.value("status", ""), "attached") << status.dump();
  const std::string reason = status.value("reason", "");
  EXPECT_NE(reason.find("libcudart.so.12"), std::string::npos) << reason;
  EXPECT_NE(reason.find("libcuda.so.1"), std::string::npos) << reason;
  auto out = ld::test::parse_fields(wl.out());
  ASSERT_TRUE(out.count("tid") && out.count("launch_calls")) << wl.out() << wl.err();
  auto calls = rec.of_type<ld_cuda_call>(LD_EV_CUDA);
  SCOPED_TRACE(listing(calls));
  for (const auto& c : calls) {
    EXPECT_EQ(c.hdr.tgid, uint32_t(wl.pid()));
    EXPECT_EQ(c.hdr.tid, out["tid"]);
    EXPECT_EQ(c.ret, 0);
    EXPECT_LE(c.start_ns + c.dur_ns, c.hdr.ts_ns);
  }

  // Launches: summed until the thread's next blocking call, and only the outer call of each
  // runtime -> driver pair counted: each step's, then the graph launch and the async copy (ended
  // by the event's sync), then the direct driver launches. A burst also ends 5 ms after its
  // first launch, which a preempted thread may reach: the segments' sums are what is exact.
  EXPECT_EQ(launches_in(calls), out["launch_calls"]);
  EXPECT_EQ(out["launch_calls"], pat.steps * pat.launches + 2 + pat.driver_launches);
  auto segments = launch_segments(calls);
  std::vector<uint64_t> sums, want_sums(pat.steps, pat.launches);
  std::vector<uint16_t> apis, want_apis(pat.steps, LD_CUDART_LAUNCH_KERNEL);
  for (const auto& seg : segments) sums.push_back(seg.count), apis.push_back(seg.last_api);
  want_sums.insert(want_sums.end(), {2, 0, 0, 0, pat.driver_launches});
  want_apis.insert(want_apis.end(), {LD_CUDART_MEMCPY_ASYNC, 0, 0, 0, LD_CU_LAUNCH_KERNEL});
  EXPECT_EQ(sums, want_sums);
  EXPECT_EQ(apis, want_apis);
  ASSERT_EQ(segments.size(), want_sums.size());

  // Syncs: one record per call, the runtime's, though it called the driver's inside; each
  // waits for the GPU time its launches queued.
  auto syncs = of_kind(calls, LD_CUDA_SYNC);
  ASSERT_EQ(syncs.size(), pat.steps + 2);
  const uint64_t kernel_ns = pat.kernel_us * 1000;
  for (uint64_t s = 0; s < pat.steps; ++s) {
    SCOPED_TRACE(s);
    EXPECT_EQ(syncs[s].api, LD_CUDART_STREAM_SYNCHRONIZE);
    EXPECT_EQ(syncs[s].arg, kStreamArg);
    check_wait(syncs[s], segments[s], pat.launches * kernel_ns, out["step" + std::to_string(s) + "_sync_ns"]);
  }
  std::string waits;
  for (uint64_t s = 0; s < pat.steps; ++s) waits += fmt::format(" {:.2f}", syncs[s].dur_ns / 1e6);
  std::printf("  step syncs (ms):%s, each after %.2f ms queued\n", waits.c_str(),
              double(pat.launches * kernel_ns) / 1e6);
  EXPECT_EQ(syncs[pat.steps].api, LD_CUDART_EVENT_SYNCHRONIZE);
  EXPECT_EQ(syncs[pat.steps].arg, kEventArg);
  check_wait(syncs[pat.steps], segments[pat.steps], kernel_ns, out["event_sync_ns"]);
  EXPECT_EQ(syncs[pat.steps + 1].api, LD_CU_CTX_SYNCHRONIZE);
  EXPECT_EQ(syncs[pat.steps + 1].arg, 0u);
  check_wait(syncs[pat.steps + 1], segments.back(), pat.driver_launches * kernel_ns, out["ctx_sync_ns"]);

  // The synchronous copy: its bytes, at the fake's 10 GB/s.
  auto copies = of_kind(calls, LD_CUDA_MEMCPY);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].api, LD_CUDART_MEMCPY);
  EXPECT_EQ(copies[0].arg, pat.memcpy_bytes);
  EXPECT_GE(double(copies[0].dur_ns), 0.8 * double(pat.memcpy_bytes) / 10);
  EXPECT_LE(copies[0].dur_ns, out["memcpy_ns"]);

  // The allocation and its free (~50 us each).
  auto allocs = of_kind(calls, LD_CUDA_ALLOC);
  ASSERT_EQ(allocs.size(), 2u);
  EXPECT_EQ(allocs[0].api, LD_CUDART_MALLOC);
  EXPECT_EQ(allocs[0].arg, 1u << 20);
  EXPECT_EQ(allocs[1].api, LD_CUDART_FREE);
  EXPECT_EQ(allocs[1].arg, 0u);
  for (const auto& a : allocs) EXPECT_GE(a.dur_ns, 40000u);
  EXPECT_EQ(calls.size(), pat.steps + 2 + (pat.steps + 2) + 1 + 2);
}

void record_steps(const std::string& sync_mode) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Pattern pat;
  auto args = pat.args();
  args.insert(args.end(), {"--sync", sync_mode});
  Child wl = start_steps(args);
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  auto rec = ld::test::record_workload(wl, "cuda", 30s);
  check_steps(rec, wl, pat);
}

uint64_t ns_per_launch(Child& wl) { return ld::test::parse_fields(wl.out())["bench_ns_per_launch"]; }

std::vector<std::string> bench_args() { return {"--bench-ms", "300", "--launch-cpu-us", "0"}; }

// bpftool's perf-event attachments that are uprobes on a file of process `pid`'s root.
std::vector<std::string> uprobes_of(int pid) {
  std::vector<std::string> lines;
  FILE* p = popen("bpftool perf list 2>/dev/null", "r");
  if (!p) return lines;
  char line[1024];
  const std::string needle = "/proc/" + std::to_string(pid) + "/root";
  while (fgets(line, sizeof(line), p))
    if (std::string(line).find(needle) != std::string::npos) lines.emplace_back(line);
  pclose(p);
  return lines;
}

std::set<unsigned> prog_ids(const std::vector<std::string>& perf_lines) {
  std::set<unsigned> ids;
  std::regex id(R"(prog_id (\d+))");
  for (const auto& l : perf_lines) {
    std::smatch m;
    if (std::regex_search(l, m, id)) ids.insert(unsigned(std::stoul(m[1])));
  }
  return ids;
}

bool program_loaded(unsigned id) {
  return system(("bpftool prog show id " + std::to_string(id) + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace

TEST(CudaProbe, StepsWithSpinningSyncs) { record_steps("spin"); }

TEST(CudaProbe, StepsWithBlockingSyncs) { record_steps("block"); }

// A thread that launches and never syncs: a burst ends at the first launch 5 ms after its first,
// the last is flushed from the kernel's map at the end, and no launch is lost. Prints the cost
// of a call through the fake runtime and driver (2 uprobes and 2 uretprobes) without and with.
TEST(CudaProbe, LaunchesWithoutASyncAreSummedPerFiveMsAndFlushedAtTheEnd) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child bare = start_steps(bench_args());
  ASSERT_TRUE(wait_started(bare)) << bare.err();
  ld::test::release_workload(bare);
  ASSERT_EQ(bare.wait(20s).value_or(-1), 0) << bare.err();

  Child wl = start_steps(bench_args());
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  auto rec = ld::test::record_workload(wl, "cuda", 30s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto out = ld::test::parse_fields(wl.out());
  auto bursts = of_kind(rec.of_type<ld_cuda_call>(LD_EV_CUDA), LD_CUDA_LAUNCH);
  ASSERT_GE(bursts.size(), 20u);
  EXPECT_EQ(launches_in(bursts), out["bench_launches"]);
  for (size_t i = 1; i < bursts.size(); ++i) EXPECT_GE(bursts[i].start_ns - bursts[i - 1].start_ns, 5000000u) << i;
  std::printf(
      "  empty launches through the fake runtime and driver: %llu ns each without the "
      "probe, %llu ns with it (%zu bursts, %llu launches)\n",
      (unsigned long long)ns_per_launch(bare), (unsigned long long)ns_per_launch(wl), bursts.size(),
      (unsigned long long)out["bench_launches"]);
}

// --cuda-launches off: the steps' syncs, copy and allocations are timed as before, no launch is
// seen, the probe's reason says so, and a launch costs what it costs with no probe.
TEST(CudaProbe, LaunchesOffTimesTheSyncsAndSkipsTheLaunches) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Pattern pat;
  Child wl = start_steps(pat.args());
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  auto rec = ld::test::record_workload(wl, "cuda", 30s, {"--cuda-launches", "off"});
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto calls = rec.of_type<ld_cuda_call>(LD_EV_CUDA);
  EXPECT_TRUE(of_kind(calls, LD_CUDA_LAUNCH).empty());
  EXPECT_EQ(of_kind(calls, LD_CUDA_SYNC).size(), pat.steps + 2);
  EXPECT_EQ(of_kind(calls, LD_CUDA_MEMCPY).size(), 1u);
  EXPECT_EQ(of_kind(calls, LD_CUDA_ALLOC).size(), 2u);
  const auto status = rec.probe("cuda");
  EXPECT_NE(status.value("reason", "").find("launches not traced: --cuda-launches off"), std::string::npos)
      << status.dump();

  Child bare = start_steps(bench_args());
  ASSERT_TRUE(wait_started(bare)) << bare.err();
  ld::test::release_workload(bare);
  ASSERT_EQ(bare.wait(20s).value_or(-1), 0) << bare.err();
  Child off = start_steps(bench_args());
  ASSERT_TRUE(wait_started(off)) << off.err();
  auto rec_off = ld::test::record_workload(off, "cuda", 30s, {"--cuda-launches", "off"});
  ASSERT_EQ(rec_off.agent_exit, 0) << rec_off.agent_err;
  std::printf("  empty launches with --cuda-launches off: %llu ns each (%llu ns without the agent)\n",
              (unsigned long long)ns_per_launch(off), (unsigned long long)ns_per_launch(bare));
  EXPECT_TRUE(of_kind(rec_off.of_type<ld_cuda_call>(LD_EV_CUDA), LD_CUDA_LAUNCH).empty());
}

// The nvml probe against the stand-in libnvidia-ml.so.1 (tests/workloads/fake_nvml), found on
// LD_LIBRARY_PATH by the agent alone; the GPU's state comes from a file the test writes.
class NvmlEnv {
 public:
  explicit NvmlEnv(const std::string& state) {
    path_ = fmt::format("/tmp/ld-fake-nvml-{}.txt", getpid());
    if (!state.empty()) {
      FILE* f = std::fopen(path_.c_str(), "w");
      std::fputs(state.c_str(), f);
      std::fclose(f);
      setenv("LD_FAKE_NVML_STATE", path_.c_str(), 1);
    }
    setenv("LD_LIBRARY_PATH", (std::string(LD_BUILD_DIR) + "/fake_nvml").c_str(), 1);
  }
  ~NvmlEnv() {
    unsetenv("LD_FAKE_NVML_STATE");
    unsetenv("LD_LIBRARY_PATH");
    unlink(path_.c_str());
  }

 private:
  std::string path_;
};

constexpr const char* kThrottledGpu =
    "util=97 mem_util=41 sm=1215 sm_max=1980 reasons=0x20 mem_used=75000000000 mem_total=80000000000 "
    "temp=88 power=655000 power_limit=700000 name=FAKE-H100\n";

// A CUDA target on a host with NVML: every 200 ms a sample per GPU, with the driver's values.
TEST(NvmlProbe, SamplesTheGpuOfACudaTarget) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl = start_steps({"--bench-ms", "1500", "--launch-cpu-us", "0"});
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  NvmlEnv env(kThrottledGpu);
  auto rec = ld::test::record_workload(wl, "nvml,sched", 30s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  const auto status = rec.probe("nvml");
  EXPECT_EQ(status.value("status", ""), "attached") << status.dump();
  EXPECT_NE(status.value("reason", "").find("NVML every 200 ms: 1 GPU(s) (FAKE-H100)"), std::string::npos)
      << status.dump();
  const auto samples = rec.of_type<ld_gpu_sample>(LD_EV_GPU_SAMPLE);
  ASSERT_GE(samples.size(), 5u) << status.dump();
  for (const auto& g : samples) {
    EXPECT_EQ(g.device, 0u);
    EXPECT_EQ(g.util_gpu, 97u);
    EXPECT_EQ(g.util_mem, 41u);
    EXPECT_EQ(g.sm_mhz, 1215u);
    EXPECT_EQ(g.sm_max_mhz, 1980u);
    EXPECT_EQ(g.reasons, uint64_t(LD_GPU_R_SW_THERMAL));
    EXPECT_EQ(g.mem_used, 75000000000ull);
    EXPECT_EQ(g.mem_total, 80000000000ull);
    EXPECT_EQ(g.temp_c, 88u);
    EXPECT_EQ(g.power_mw, 655000u);
    EXPECT_EQ(g.power_limit_mw, 700000u);
  }
  // 200 ms apart (the last one is the stop's, whenever it comes).
  for (size_t i = 1; i + 1 < samples.size(); ++i)
    EXPECT_GE(samples[i].hdr.ts_ns - samples[i - 1].hdr.ts_ns, 190'000'000u) << i;
}

// A target that maps no CUDA library: attached, nothing sampled, and the reason says so.
TEST(NvmlProbe, NothingSampledForATargetWithoutCuda) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_idle")});
  NvmlEnv env(kThrottledGpu);
  auto rec = ld::test::record_workload(wl, "nvml,sched", 10s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  const auto status = rec.probe("nvml");
  EXPECT_EQ(status.value("status", ""), "attached") << status.dump();
  EXPECT_NE(status.value("reason", "").find("nothing sampled: no target mapped a CUDA library"), std::string::npos)
      << status.dump();
  EXPECT_TRUE(rec.of_type<ld_gpu_sample>(LD_EV_GPU_SAMPLE).empty());
}

// No driver (here: the library loads but its init fails): unavailable, with the reason.
TEST(NvmlProbe, NoDriverIsUnavailable) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_idle")});
  NvmlEnv env("");
  auto rec = ld::test::record_workload(wl, "nvml,sched", 10s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  const auto status = rec.probe("nvml");
  EXPECT_EQ(status.value("status", ""), "unavailable") << status.dump();
  EXPECT_NE(status.value("reason", "").find("nvmlInit_v2 failed"), std::string::npos) << status.dump();
  EXPECT_EQ(rec.probe("sched").value("status", ""), "attached");
}

// A long-running target without CUDA: nothing to attach, ever: unavailable, with the reason.
TEST(CudaProbe, TargetWithoutCudaIsUnavailable) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_idle")});
  std::this_thread::sleep_for(10500ms);  // older than the window in which servers load CUDA
  auto rec = ld::test::record_workload(wl, "cuda,sched", 10s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto status = rec.probe("cuda");
  EXPECT_EQ(status.value("status", ""), "unavailable") << status.dump();
  EXPECT_NE(status.value("reason", "").find("no CUDA library (libcuda.so / libcudart.so)"), std::string::npos)
      << status.dump();
  EXPECT_EQ(rec.probe("sched").value("status", ""), "attached");
  EXPECT_TRUE(rec.of_type<ld_cuda_call>(LD_EV_CUDA).empty());
}

// A young target without CUDA (yet): attached, looking again, nothing attached to it.
TEST(CudaProbe, YoungTargetWithoutCudaIsLookedAtAgain) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_idle")});
  auto rec = ld::test::record_workload(wl, "cuda", 10s);
  auto status = rec.probe("cuda");
  EXPECT_EQ(status.value("status", ""), "attached") << status.dump();
  EXPECT_NE(status.value("reason", "").find("no CUDA library"), std::string::npos) << status.dump();
  // "attached" must not read as hooked: the reason says first that nothing was.
  EXPECT_EQ(status.value("reason", "").rfind("nothing hooked", 0), 0u) << status.dump();
}

// The runtime dlopen()ed after the attach (as `import torch` does): found at a later look of the
// read interval's ticks, with the driver it brings, and every call after that recorded.
TEST(CudaProbe, LibraryLoadedAfterAttachIsFound) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Pattern pat;
  auto args = pat.args();
  args.insert(args.end(), {"--dlopen-after-ms", "300", "--work-delay-ms", "4000"});
  Child wl = start_steps(args);
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  auto maps = ld::test::read_file("/proc/" + std::to_string(wl.pid()) + "/maps");
  ASSERT_EQ(maps.find("libcuda"), std::string::npos) << "loaded before the attach";
  auto rec = ld::test::record_workload(wl, "cuda", 30s, {"--read-interval", "1s"});
  check_steps(rec, wl, pat);
}

// Attached uprobes are per process (bpftool lists them by file); after SIGINT the agent leaves
// neither them nor its programs in the kernel.
TEST(CudaProbe, NothingLeftAttachedAfterSigint) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl = start_steps({"--steps", "1"});
  ASSERT_TRUE(wait_started(wl)) << wl.err();
  const std::string trace = "/tmp/ld-cuda-sigint-" + std::to_string(getpid()) + ".ldtrace";
  Child agent({ld::test::agent_path(), "record", "--pid", std::to_string(wl.pid()), "--probes", "cuda", "--duration",
               "5m", "-o", trace});
  auto until = std::chrono::steady_clock::now() + 30s;
  while (agent.err().find("attached to pid") == std::string::npos && std::chrono::steady_clock::now() < until &&
         !agent.wait(0ms))
    std::this_thread::sleep_for(20ms);
  auto attached = uprobes_of(wl.pid());
  std::string all;
  for (const auto& l : attached) all += l;
  EXPECT_NE(all.find("libcudart.so.12"), std::string::npos) << all;
  EXPECT_NE(all.find("libcuda.so.1"), std::string::npos) << all;
  auto ids = prog_ids(attached);
  EXPECT_EQ(ids.size(), 5u) << all;  // launch, sync, memcpy, alloc, return
  agent.signal(SIGINT);
  EXPECT_EQ(agent.wait(20s).value_or(-1), 0) << agent.err();
  unlink(trace.c_str());
  EXPECT_TRUE(uprobes_of(wl.pid()).empty());
  // Programs are freed after an RCU grace period once their last fd closes: wait a little.
  auto loaded = [&] { return std::count_if(ids.begin(), ids.end(), program_loaded); };
  for (int i = 0; i < 100 && loaded() != 0; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(loaded(), 0);
}

// The lookup the probe attaches by: the exported entry points' file offsets, in one pass, the
// same as the one-name lookup finds; names a library lacks are absent.
TEST(CudaSymbols, DynamicSymbolsOfTheFakeDriver) {
  const std::string lib = kFakeCuda + "/libcuda.so.1";
  auto found =
      ld::probes::find_dynamic_symbols(lib, {"cuLaunchKernel", "cuCtxSynchronize", "cudaLaunchKernel", "cuNoSuchCall"});
  ASSERT_EQ(found.size(), 2u);
  for (const char* name : {"cuLaunchKernel", "cuCtxSynchronize"}) {
    auto one = ld::probes::find_elf_symbol(lib, name);
    ASSERT_TRUE(one.has_value()) << name;
    EXPECT_EQ(found.at(name).file_offset, one->file_offset) << name;
    EXPECT_TRUE(found.at(name).dynamic);
  }
  EXPECT_TRUE(ld::probes::find_dynamic_symbols("/nonexistent", {"cuInit"}).empty());
}

// The gil and cuda probes look at a process's maps at the same ticks: one read serves both
// within kMapsFreshNs, and a later look reads the file again (a library loaded since is seen).
TEST(ProcessMaps, OneReadServesEveryProbeLookingAtTheSameTime) {
  using ld::probes::kMapsFreshNs;
  using ld::probes::process_maps_reads;
  using ld::probes::read_process_maps;
  const uint32_t self = static_cast<uint32_t>(getpid());
  const uint64_t t0 = 1'000'000'000'000ULL + static_cast<uint64_t>(getpid()) * kMapsFreshNs * 4;
  const uint64_t before = process_maps_reads();
  const std::string first = read_process_maps(self, t0);
  EXPECT_NE(first.find("[stack]"), std::string::npos);
  EXPECT_EQ(read_process_maps(self, t0 + kMapsFreshNs / 2), first);
  EXPECT_EQ(process_maps_reads(), before + 1);
  read_process_maps(self, t0 + kMapsFreshNs + 1);
  EXPECT_EQ(process_maps_reads(), before + 2);
  // A process that is gone reads as "".
  EXPECT_EQ(read_process_maps(0x7ffffff0u, t0 + 2 * kMapsFreshNs), "");
}
