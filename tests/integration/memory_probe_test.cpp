// Root tier: the memory probe against ld-wl-mem_touch (mmap 256 MiB, touch every page, munmap).
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

constexpr uint64_t kLen = 256ull << 20;

TEST(MemoryProbe, MmapTouchMunmapOnTheRightThread) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_touch")});
  auto rec = ld::test::record_workload(wl, "memory", 30s);
  auto status = rec.probe("memory");
  ASSERT_FALSE(status.is_null()) << rec.agent_err;
  ASSERT_EQ(status["status"], "attached") << status.dump() << rec.agent_err;
  EXPECT_EQ(status["lost"], 0);

  std::smatch m;
  std::string out = wl.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(tid=(\d+) addr=0x([0-9a-f]+) len=(\d+) pages=(\d+))"))) << out;
  uint32_t tid = std::stoul(m[1]);
  uint64_t addr = std::stoull(m[2], nullptr, 16);
  uint64_t pages = std::stoull(m[4]);

  const ld_syscall* mmap_rec = nullptr;
  const ld_syscall* munmap_rec = nullptr;
  auto calls = rec.of_type<ld_syscall>(LD_EV_SYSCALL);
  for (const auto& c : calls) {
    if (c.hdr.tid != tid || c.arg0 != kLen) continue;
    if (c.kind == LD_SYS_MMAP && static_cast<uint64_t>(c.ret) == addr) mmap_rec = &c;
    if (c.kind == LD_SYS_MUNMAP && c.arg1 == addr) munmap_rec = &c;
  }
  ASSERT_NE(mmap_rec, nullptr) << "no 256 MiB mmap on tid " << tid << " among " << calls.size();
  ASSERT_NE(munmap_rec, nullptr) << "no 256 MiB munmap on tid " << tid;
  EXPECT_EQ(mmap_rec->hdr.tgid, static_cast<uint32_t>(wl.pid()));
  EXPECT_EQ(mmap_rec->arg1 & 0xffffffff, 3u);  // PROT_READ | PROT_WRITE
  EXPECT_EQ(mmap_rec->hdr.ts_ns, mmap_rec->start_ns + mmap_rec->dur_ns);
  EXPECT_LT(mmap_rec->hdr.ts_ns, munmap_rec->start_ns);

  // Every first touch between the mmap and the munmap is one fault of that thread.
  uint64_t in_window = 0, batches = 0;
  for (const auto& f : rec.of_type<ld_faults>(LD_EV_FAULTS)) {
    if (f.hdr.tid != tid) continue;
    EXPECT_LE(f.count, 256u);
    EXPECT_LT(f.hdr.ts_ns - f.first_ns, 5'000'000u);
    EXPECT_LE(f.first_ns, f.hdr.ts_ns);
    if (f.first_ns >= mmap_rec->hdr.ts_ns && f.hdr.ts_ns <= munmap_rec->start_ns) {
      in_window += f.count;
      batches++;
    }
  }
  EXPECT_NEAR(static_cast<double>(in_window), static_cast<double>(pages), pages * 0.10)
      << "faults of tid " << tid << " between mmap and munmap, in " << batches << " batches";
  EXPECT_GE(batches, pages / 256);
  std::printf("memory: mmap %.3f ms, munmap %.3f ms, %llu faults in %llu batches (%llu pages)\n",
              mmap_rec->dur_ns / 1e6, munmap_rec->dur_ns / 1e6, (unsigned long long)in_window,
              (unsigned long long)batches, (unsigned long long)pages);
}

// Small calls are summed per thread (LD_SYS_MEM_AGG), including the open aggregate flushed from
// user space at the end: every mmap and munmap of the loop is counted exactly once.
TEST(MemoryProbe, SmallCallsAreAggregatedNotLost) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_loop"), "300"});
  auto rec = ld::test::record_workload(wl, "memory", 30s);
  auto status = rec.probe("memory");
  ASSERT_FALSE(status.is_null()) << rec.agent_err;
  ASSERT_EQ(status["status"], "attached") << status.dump() << rec.agent_err;
  EXPECT_EQ(status["lost"], 0);
  std::smatch m;
  std::string out = wl.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(tid=(\d+) iterations=(\d+))"))) << out;
  uint32_t tid = std::stoul(m[1]);
  uint64_t iterations = std::stoull(m[2]);

  uint64_t aggregated = 0, itemised = 0, agg_records = 0, bytes = 0;
  for (const auto& c : rec.of_type<ld_syscall>(LD_EV_SYSCALL)) {
    if (c.hdr.tid != tid) continue;
    if (c.kind == LD_SYS_MEM_AGG) {
      agg_records++;
      aggregated += c.arg0;
      bytes += c.arg1;
      EXPECT_LT(c.hdr.ts_ns - c.start_ns, 20'000'000u);  // 10 ms period + the last call
      EXPECT_LE(c.dur_ns, c.hdr.ts_ns - c.start_ns);
    } else if ((c.kind == LD_SYS_MMAP || c.kind == LD_SYS_MUNMAP) && c.arg0 == (64u << 10)) {
      EXPECT_GE(c.dur_ns, 100'000u);  // itemised only because slow
      itemised++;
    }
  }
  // 2 calls per iteration; the process start adds a few small mmaps (loader, libc).
  uint64_t counted = aggregated + itemised;
  EXPECT_GE(counted, 2 * iterations);
  EXPECT_LE(counted, 2 * iterations + 64);
  EXPECT_GE(bytes, 2 * iterations * (64u << 10) - itemised * (64u << 10));
  EXPECT_GE(agg_records, 20u);  // 300 ms in 10 ms aggregates
  std::printf("memory: %llu iterations -> %llu aggregated in %llu records + %llu itemised\n",
              (unsigned long long)iterations, (unsigned long long)aggregated, (unsigned long long)agg_records,
              (unsigned long long)itemised);
}

// A recording that ends while the thread lives: its open fault batch (100 faults < 256, in
// < 5 ms) and its small-call aggregate are still in the kernel maps and must be flushed.
TEST(MemoryProbe, OpenBatchesAreFlushedAtTheEnd) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("mem_idle")});
  // record_workload() runs until the target exits: here the recording must end first.
  std::string trace = "/tmp/ld-probe-idle-" + std::to_string(getpid()) + ".ldtrace";
  Child agent({ld::test::agent_path(), "record", "--pid", std::to_string(wl.pid()), "--probes", "memory", "--duration",
               "1s", "-o", trace});
  auto until = std::chrono::steady_clock::now() + 30s;
  while (agent.err().find("attached to pid") == std::string::npos && std::chrono::steady_clock::now() < until &&
         !agent.wait(0ms))
    std::this_thread::sleep_for(20ms);
  ld::test::release_workload(wl);
  ASSERT_EQ(agent.wait(30s).value_or(-1), 0) << agent.err();
  EXPECT_FALSE(wl.wait(0ms).has_value()) << "the workload must outlive the recording";
  ld::test::Recorded rec;
  auto summary = ld::trace::read_trace(trace, [&](const ld_hdr& r) {
    std::vector<uint64_t> copy((r.size + 7) / 8);
    std::memcpy(copy.data(), &r, r.size);
    rec.records.push_back(std::move(copy));
  });
  unlink(trace.c_str());
  rec.trailer = summary.trailer;
  auto status = rec.probe("memory");
  ASSERT_FALSE(status.is_null()) << agent.err();
  ASSERT_EQ(status["status"], "attached") << status.dump();
  std::smatch m;
  std::string out = wl.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(tid=(\d+))"))) << out;
  uint32_t tid = std::stoul(m[1]);
  uint64_t faults = 0, agg_bytes = 0, itemised_bytes = 0;
  for (const auto& f : rec.of_type<ld_faults>(LD_EV_FAULTS))
    if (f.hdr.tid == tid) faults += f.count;
  for (const auto& c : rec.of_type<ld_syscall>(LD_EV_SYSCALL)) {
    if (c.hdr.tid != tid) continue;
    if (c.kind == LD_SYS_MEM_AGG) agg_bytes += c.arg1;
    // On a slow (emulated) CPU the 400 KiB mmap can take >= 100 us: itemised, not summed.
    if (c.kind == LD_SYS_MMAP && c.arg0 == (400u << 10) && c.dur_ns >= 100'000u) itemised_bytes += c.arg0;
  }
  EXPECT_GE(faults, 100u);
  EXPECT_LT(faults, 200u);
  EXPECT_GE(agg_bytes + itemised_bytes, 400u << 10);
}

}  // namespace
