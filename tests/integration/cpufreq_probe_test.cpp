// Root tier: the cpufreq probe. This VM has no cpufreq driver: the probe must say so (status
// unavailable with the reason) and the session must go on. Where cpufreq exists the test
// checks sampled records instead.
#include <unistd.h>

#include <bpf/libbpf.h>

#include <gtest/gtest.h>

#include "cpufreq.skel.h"
#include "events.h"
#include "host/cpufreq.hpp"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

TEST(CpufreqProbe, StatusOnThisHost) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("tcp_churn"), "--idle-ms", "500"});
  // tcp too: with cpufreq unavailable the session must still run.
  auto rec = ld::test::record_workload(wl, "cpufreq,tcp", 10s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  auto status = rec.probe("cpufreq");
  auto freqs = rec.of_type<ld_cpu_freq>(LD_EV_CPU_FREQ);
  if (!ld::host::has_cpufreq("")) {
    EXPECT_EQ(status.value("status", ""), "unavailable") << status.dump();
    EXPECT_EQ(status.value("reason", ""),
              "no cpufreq on this host (no /sys/devices/system/cpu/cpu0/cpufreq): CPU frequency "
              "cannot be observed");
    EXPECT_TRUE(freqs.empty());
    EXPECT_EQ(rec.probe("tcp").value("status", ""), "attached");
  } else {
    EXPECT_EQ(status.value("status", ""), "attached") << status.dump();
    ASSERT_FALSE(freqs.empty());
    for (const auto& f : freqs) EXPECT_GT(f.khz, 0u);
  }
}

// The power:cpu_frequency program verifies and attaches on this kernel even though nothing
// fires it here (the tracepoint exists without a cpufreq driver).
TEST(CpufreqProbe, TracepointProgramLoads) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  cpufreq_bpf* skel = cpufreq_bpf__open();
  ASSERT_NE(skel, nullptr);
  bpf_map__set_max_entries(skel->maps.ld_events, 4096);  // own maps: not a session
  EXPECT_EQ(cpufreq_bpf__load(skel), 0);
  EXPECT_EQ(cpufreq_bpf__attach(skel), 0);
  cpufreq_bpf__destroy(skel);
}
