// Root tier: the cgroup probe against a CPU hog (tests/workloads/cgroup_hog.cpp) put in a
// fresh cgroup with a CFS quota of 20 ms per 100 ms: the samples must show the throttling.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include <thread>

#include <gtest/gtest.h>

#include "cgroup_util.hpp"
#include "events.h"
#include "host/cgroup.hpp"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {}  // namespace

TEST(CgroupProbe, QuotaThrottlingOfAHog) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  ld::test::QuotaCgroup cg(20000, 100000);  // declared first: removed after the hog is reaped
  ASSERT_EQ(cg.error(), "");
  Child hog({ld::test::workload_path("cgroup_hog"), "--ms", "1500"});
  ASSERT_TRUE(cg.add(hog.pid())) << "cannot move the hog into " << cg.dir();

  auto rec = ld::test::record_workload(hog, "cgroup", 15s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto status = rec.probe("cgroup");
  ASSERT_EQ(status.value("status", ""), "attached") << status.dump();
  EXPECT_NE(status.value("reason", "").find(cg.dir()), std::string::npos) << status.dump();

  std::smatch m;
  std::string out = hog.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(ran (\d+) (\d+))"))) << out;
  uint64_t start = std::stoull(m[1]), end = std::stoull(m[2]);

  auto samples = rec.of_type<ld_cgroup_sample>(LD_EV_CGROUP_SAMPLE);
  ASSERT_GE(samples.size(), 10u);
  // The last sample at or before the hog started, and the last one of all (after it ended).
  const ld_cgroup_sample* before = nullptr;
  for (const auto& s : samples) {
    EXPECT_EQ(s.hdr.tgid, uint32_t(hog.pid()));
    EXPECT_EQ(s.quota_us, 20000u);
    EXPECT_EQ(s.period_us, 100000u);
    if (s.hdr.ts_ns <= start) before = &s;
  }
  ASSERT_NE(before, nullptr) << "no baseline sample before the hog ran";
  const auto& after = samples.back();
  ASSERT_GE(after.hdr.ts_ns, end);
  uint64_t throttled = after.throttled_ns - before->throttled_ns;
  double ratio = double(throttled) / double(end - start);
  EXPECT_GE(after.nr_throttled - before->nr_throttled, 10u);
  EXPECT_NEAR(ratio, 0.8, 0.8 * 0.3) << "throttled " << throttled << " ns of " << (end - start);
  // While the hog runs every 100 ms period changes the counters: one sample per period,
  // each showing the new period (the 50 ms sampler sees each change within 50 ms).
  int during = 0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.hdr.ts_ns <= start || s.hdr.ts_ns >= end) continue;
    during++;
    EXPECT_GT(s.nr_periods, samples[i - 1].nr_periods);
    EXPECT_LE(s.hdr.ts_ns - samples[i - 1].hdr.ts_ns, 250'000'000u);
  }
  EXPECT_GE(during, 12) << "samples during the 1.5 s run";
  std::cout << "[ metrics  ] " << samples.size() << " samples, " << during << " during 1.5 s; nr_throttled +"
            << (after.nr_throttled - before->nr_throttled) << ", throttled " << throttled / 1e6 << " ms of "
            << (end - start) / 1e6 << " ms (" << ratio * 100 << "%)\n";
}

// Without a quota the session's tick samples (every read interval: 1 s here); a quota set
// during the run starts the 50 ms sampler at the next tick, which must then place the
// throttling as in QuotaThrottlingOfAHog.
TEST(CgroupProbe, QuotaSetDuringTheRunIsSampledEvery50ms) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  ld::test::QuotaCgroup cg(0, 100000);
  ASSERT_EQ(cg.error(), "");
  Child hog({ld::test::workload_path("cgroup_hog"), "--ms", "3000"});
  ASSERT_TRUE(cg.add(hog.pid())) << "cannot move the hog into " << cg.dir();
  bool quota_set = false;
  std::vector<std::pair<std::string, uint64_t>> agent_threads;  // {tid, CapEff} under the quota
  std::thread later([&] {
    std::this_thread::sleep_for(1500ms);  // the agent attaches, the hog runs unlimited a while
    quota_set = cg.set_quota(20000, 100000);
    // The sampler thread starts from the session's tick, long after the agent dropped its
    // loading privileges: it must not have them either (capabilities are per thread).
    std::this_thread::sleep_for(1200ms);
    if (int agent = ld::test::find_process("record --pid " + std::to_string(hog.pid()) + " "))
      agent_threads = ld::test::thread_capabilities(agent);
  });
  auto rec = ld::test::record_workload(hog, "cgroup", 20s, {"--read-interval", "1s"});
  later.join();
  ASSERT_TRUE(quota_set);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  ASSERT_EQ(rec.probe("cgroup").value("status", ""), "attached") << rec.probe("cgroup").dump();

  auto samples = rec.of_type<ld_cgroup_sample>(LD_EV_CGROUP_SAMPLE);
  size_t unlimited = 0, limited = 0, first_limited = samples.size();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].quota_us == 20000u) {
      limited++;
      first_limited = std::min(first_limited, i);
    } else {
      EXPECT_EQ(limited, 0u) << "an unlimited sample after the quota was set";
      unlimited++;
    }
  }
  ASSERT_LT(first_limited, samples.size()) << "the quota was never seen";
  EXPECT_GE(agent_threads.size(), 2u) << "no sampler thread beside the reading thread under the quota";
  for (const auto& [tid, effective] : agent_threads) {
    EXPECT_EQ(effective & (1ULL << 21), 0u) << "CAP_SYS_ADMIN kept by thread " << tid;
    EXPECT_EQ(effective & (1ULL << 38), 0u) << "CAP_PERFMON kept by thread " << tid;
    EXPECT_EQ(effective & (1ULL << 39), 0u) << "CAP_BPF kept by thread " << tid;
  }
  // Unlimited: one sample per second or so; with the quota: each 100 ms period (the hog still
  // runs ~1.5 s after the quota is set), the first within a second of it being set.
  EXPECT_LE(unlimited, 4u);
  EXPECT_GE(limited, 8u);
  uint64_t throttled_periods = samples.back().nr_throttled - samples[first_limited].nr_throttled;
  EXPECT_GE(throttled_periods, 5u);
  std::cout << "[ metrics  ] " << unlimited << " samples before the quota, " << limited << " after; nr_throttled +"
            << throttled_periods << "\n";
}

// No quota, no throttling: the cgroup of the test itself, sampled at idle.
TEST(CgroupProbe, IdleSamplesOncePerSecond) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("tcp_churn"), "--idle-ms", "2000"});
  auto rec = ld::test::record_workload(wl, "cgroup", 10s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  ASSERT_EQ(rec.probe("cgroup").value("status", ""), "attached") << rec.probe("cgroup").dump();
  auto samples = rec.of_type<ld_cgroup_sample>(LD_EV_CGROUP_SAMPLE);
  EXPECT_GE(samples.size(), 2u);
  EXPECT_LE(samples.size(), 5u);
  std::cout << "[ metrics  ] idle: " << samples.size() << " cgroup samples in ~2.3 s\n";
}
