// Root tier: the event-pipeline stress (bench/stress_pipeline.cpp) counts right. Correctness
// only, no timing: whatever rate this machine reaches, every record the producer submitted is
// either written or counted as dropped by the kernel, and the trace reads back with exactly
// the written ones, in the bench's record types and sizes. Nothing stays loaded.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"
#include "trace/trace_file.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

const std::string kStress = std::string(LD_BUILD_DIR) + "/ld-bench-stress-pipeline";

int loaded_bench_programs() {
  FILE* p = popen("bpftool prog list 2>/dev/null", "r");
  if (!p) return -1;
  char line[512];
  int count = 0;
  while (fgets(line, sizeof line, p))
    if (std::regex_search(line, std::regex(R"(name ld_bench_)"))) ++count;
  pclose(p);
  return count;
}

// Programs are freed an RCU grace period after their last fd closes.
int loaded_bench_programs_settled() {
  int count = loaded_bench_programs();
  for (int i = 0; i < 100 && count != 0; ++i) {
    std::this_thread::sleep_for(100ms);
    count = loaded_bench_programs();
  }
  return count;
}

struct Checked {
  std::map<std::string, uint64_t> fields;
  uint64_t read_back = 0;
};

// Runs the stress (optionally interrupted after `interrupt_after`), checks every count.
Checked run_and_check(std::vector<std::string> args, std::chrono::milliseconds interrupt_after = 0ms) {
  Checked out;
  const std::string trace = "/tmp/ld-stress-test-" + std::to_string(getpid()) + ".ldtrace";
  std::vector<std::string> argv{kStress};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"-o", trace, "--quiet"});
  Child stress(argv);
  if (interrupt_after > 0ms) {
    std::this_thread::sleep_for(interrupt_after);
    stress.signal(SIGINT);
  }
  auto code = stress.wait(120s);
  if (!code) stress.signal(SIGKILL);
  EXPECT_EQ(code.value_or(-1), 0) << stress.out() << stress.err();

  out.fields = ld::test::parse_fields(stress.out());
  auto& f = out.fields;
  EXPECT_GT(f["submitted"], 0u) << stress.out();
  EXPECT_EQ(f["submitted"], f["producer_asked"]) << "a record neither written nor dropped";
  EXPECT_EQ(f["written"] + f["dropped"], f["submitted"]);
  EXPECT_EQ(f["delivered"], f["written"]) << "written by the kernel, never handed to the trace";

  const std::map<uint16_t, size_t> sizes{{LD_EV_SOCK_IO, sizeof(ld_sock_io)},
                                         {LD_EV_OFFCPU, sizeof(ld_offcpu)},
                                         {LD_EV_SCHED_AGG, sizeof(ld_sched_agg)},
                                         {LD_EV_CPU_SAMPLE, sizeof(ld_cpu_sample)}};
  uint64_t bad = 0;
  try {
    auto summary = ld::trace::read_trace(trace, [&](const ld_hdr& rec) {
      ++out.read_back;
      auto it = sizes.find(rec.type);
      if (it == sizes.end() || rec.size != it->second) ++bad;
    });
    EXPECT_TRUE(summary.warnings.empty()) << summary.warnings.front();
    EXPECT_EQ(summary.chunks_bad, 0u);
    for (const auto& p : summary.trailer.value("probes", nlohmann::json::array())) {
      if (p.value("name", "") != "bench-stress") continue;
      EXPECT_EQ(p.value("events", uint64_t{0}), f["written"]);
      EXPECT_EQ(p.value("lost", uint64_t{0}), f["dropped"]);
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cannot read the trace: " << e.what();
  }
  unlink(trace.c_str());
  EXPECT_EQ(out.read_back, f["written"]) << "the trace holds a different number of records";
  EXPECT_EQ(bad, 0u) << "records of a type or size the bench does not emit";
  EXPECT_EQ(loaded_bench_programs_settled(), 0) << "the bench program stayed loaded";
  return out;
}

TEST(StressPipeline, EverySubmittedRecordIsWrittenOrCountedAsDropped) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  auto r = run_and_check({"200000", "2"});
  EXPECT_FALSE(r.fields.count("interrupted"));
}

// A ring buffer too small for the rate: drops happen (how many depends on the machine), and
// the counts must still add up.
TEST(StressPipeline, CountsStillAddUpWhenTheRingBufferOverflows) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  run_and_check({"1000000", "1", "--ringbuf-size", "16K", "--batch", "1024"});
}

TEST(StressPipeline, SigintStopsTheProducerAndStillDrainsEverything) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  auto r = run_and_check({"200000", "60"}, 1500ms);
  EXPECT_EQ(r.fields["interrupted"], 1u);
}

}  // namespace
