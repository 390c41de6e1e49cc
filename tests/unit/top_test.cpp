// `top`'s model and screen without BPF: the recorded disk_io trace fed second by second, as
// the recorder's wake-ups would, must give each slow token its cause at the tick after its
// record came, once, and a screen that fits the terminal.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "events.h"
#include "live/top_model.hpp"
#include "live/top_screen.hpp"
#include "recorded_trace.hpp"
#include "rules/engine.hpp"

namespace {

using ld::live::SlowToken;
using ld::live::TopModel;
constexpr uint64_t kSec = 1'000'000'000ULL;

using Recorded = ld::test::RecordedTrace;

std::shared_ptr<const ld::rules::RuleSet> shipped_rules() {
  return std::make_shared<const ld::rules::RuleSet>(ld::rules::load_rules({}));
}

// Feeds the trace a second at a time; returns what each tick explained, by tick time.
std::vector<std::pair<uint64_t, std::vector<SlowToken>>> replay(TopModel& model, const Recorded& trace) {
  model.on_start(trace.meta.header);
  std::vector<std::pair<uint64_t, std::vector<SlowToken>>> ticks;
  trace.replay(
      trace.last + 2 * kSec, [&](const ld_hdr& rec, size_t size) { model.on_record(rec, size); },
      [&](uint64_t now) { ticks.emplace_back(now, model.tick(now, trace.meta.trailer.probes)); });
  return ticks;
}

}  // namespace

TEST(TopModel, EachSlowTokenGetsItsCauseAtTheNextTickOnce) {
  const Recorded trace;
  TopModel model({}, shipped_rules());
  const auto ticks = replay(model, trace);
  std::set<std::pair<uint32_t, uint64_t>> seen;
  size_t disk = 0, explained = 0;
  for (const auto& [now, tokens] : ticks)
    for (const SlowToken& t : tokens) {
      ++explained;
      EXPECT_TRUE(seen.insert({t.tid, t.end_mono_ns}).second) << "explained twice: " << t.request;
      EXPECT_LE(t.end_mono_ns, now);
      EXPECT_LT(now - t.end_mono_ns, kSec) << "explained a tick late: " << t.request << " #" << t.token_index;
      if (t.cause == ld::model::Cause::kDiskIo) {
        ++disk;
        EXPECT_NE(t.culprit.find("sync /tmp/golden/fault.log"), std::string::npos) << t.culprit;
      }
    }
  // The report of the whole trace finds 15 slow gaps, 14 of them disk_io (tests/fixtures/golden).
  EXPECT_GE(explained, 12u);
  EXPECT_GE(disk, explained - 2);
  const auto& view = model.view();
  EXPECT_EQ(view.pending, 0u);
  EXPECT_GE(view.slow_seen, 12u);
  ASSERT_FALSE(view.slow.empty());
  EXPECT_GE(view.slow.front().end_mono_ns, view.slow.back().end_mono_ns);  // newest first
  ASSERT_FALSE(view.findings.empty());
  EXPECT_EQ(view.findings.front().finding.rule, "disk-io-on-token-path");
  std::set<std::string> rules;
  for (const auto& f : view.findings)
    EXPECT_TRUE(rules.insert(f.finding.rule).second) << "listed twice: " << f.finding.rule;
  ASSERT_FALSE(view.slow_causes_60s.empty());
  EXPECT_EQ(view.slow_causes_60s.front().cause, ld::model::Cause::kDiskIo);
  // Attribution ran only on ticks that had a slow token waiting.
  EXPECT_LT(view.analyses, ticks.size());
}

TEST(TopModel, RollingNumbersCoverTheLastMinute) {
  const Recorded trace;
  TopModel model({}, shipped_rules());
  replay(model, trace);
  const auto& view = model.view();
  // 6 requests of 20 tokens in a trace shorter than a minute: all of them are in the 60 s numbers.
  EXPECT_EQ(view.ttft_60s.count, 6u);
  EXPECT_EQ(view.tpot_60s.count, 114u);
  EXPECT_GT(view.tpot_60s.p99, 150.0);  // the fsync stalls
  EXPECT_LT(view.tpot_60s.p50, 150.0);
  ASSERT_EQ(view.tpot_p99_by_second.size(), 60u);
  EXPECT_GT(*std::max_element(view.tpot_p99_by_second.begin(), view.tpot_p99_by_second.end()), 150.0);
}

TEST(TopModel, AFrozenListTakesNoNewRowsButStillCounts) {
  const Recorded trace;
  TopModel model({}, shipped_rules());
  model.set_frozen(true);
  replay(model, trace);
  EXPECT_TRUE(model.view().slow.empty());
  EXPECT_FALSE(model.view().slow_causes_60s.empty());
}

// With no CPU earned after the first attribution, the slow tokens after it wait for their cause
// (and are counted as waiting) instead of costing more.
TEST(TopModel, TheAttributionKeepsToItsCpuBudget) {
  const Recorded trace;
  ld::live::TopOptions options;
  options.analysis_cpu_share = 0;
  options.analysis_burst_ms = 0.001;
  TopModel model(options, shipped_rules());
  replay(model, trace);
  EXPECT_EQ(model.view().analyses, 1u);
  EXPECT_GT(model.view().pending, 0u);
  EXPECT_LT(model.view().slow.size(), model.view().slow_seen);
}

TEST(TopScreen, FitsTheTerminalAndNamesTheCause) {
  const Recorded trace;
  TopModel model({}, shipped_rules());
  replay(model, trace);
  ld::live::ScreenInfo info;
  info.target = "pid 4242 (python3)";
  info.probes = trace.meta.trailer.probes;
  for (auto [width, height] : {std::pair{120, 40}, std::pair{80, 24}, std::pair{40, 10}}) {
    const auto lines = ld::live::render_screen(model.view(), info, width, height);
    EXPECT_LE(lines.size(), static_cast<size_t>(height));
    std::string all;
    for (const auto& line : lines) {
      size_t columns = 0;
      for (unsigned char c : line) columns += (c & 0xC0) != 0x80;
      EXPECT_LE(columns, static_cast<size_t>(width)) << line;
      all += line + "\n";
    }
    EXPECT_NE(all.find("latency-doctor top"), std::string::npos) << all;
    if (height >= 24) {
      EXPECT_NE(all.find("disk_io"), std::string::npos) << all;
      EXPECT_NE(all.find("disk-io-on-token-path"), std::string::npos) << all;
    }
  }
  const std::string line = ld::live::slow_token_line(model.view().slow.front());
  EXPECT_NE(line.find("slow gap"), std::string::npos) << line;
}

TEST(TopScreen, SparklineScalesToItsTop) {
  EXPECT_EQ(ld::live::sparkline({0, 10, 80}), " ▁█");
  EXPECT_EQ(ld::live::sparkline({}), "");
  EXPECT_EQ(ld::live::sparkline({0, 0}), "  ");
}
