// diff A B: log histograms, the bootstrap interval, the findings' changes and the verdict, on
// reports built here (the root tier diffs two real runs).
#include <cmath>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compare/diff.hpp"
#include "model/histogram.hpp"
#include "model/report.hpp"
#include "model/stats.hpp"
#include "report/report.hpp"

using ld::compare::Diff;
using ld::compare::FindingChange;
using ld::compare::Outcome;
using ld::model::LogHistogram;
using nlohmann::json;

namespace {

std::vector<double> lognormal(size_t n, double median_ms, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> dist(std::log(median_ms), sigma);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// A report of `gaps` TPOT values (and ttfts), with slow tokens charged to `slow_cause`, as the
// JSON renderer writes it.
json report_of(const std::vector<double>& gaps, const std::vector<double>& ttfts, size_t slow_tokens,
               const std::string& slow_cause, std::vector<ld::model::Finding> findings) {
  ld::model::Report r;
  r.target.pids = {4242};
  r.target.comm = "server";
  r.duration_ms = 10000;
  r.requests = ttfts.size();
  r.tokens = gaps.size() + ttfts.size();
  r.gaps = gaps.size();
  r.ttft_ms = ld::model::describe(ttfts);
  r.tpot_ms = ld::model::describe(gaps);
  r.ttft_hist = ld::model::make_log_histogram(ttfts);
  r.tpot_hist = ld::model::make_log_histogram(gaps);
  r.attributed = true;
  r.typical.windows = gaps.size();
  r.typical.total_ms = 20.0 * static_cast<double>(gaps.size());
  r.typical.causes = {{ld::model::Cause::kCompute, r.typical.total_ms, 1.0, json::object()}};
  for (size_t i = 0; i < slow_tokens; ++i) {
    ld::model::Outlier o;
    o.kind = ld::model::WindowKind::kTpot;
    o.request = "r" + std::to_string(i);
    o.duration_ms = 300;
    o.causes = {{*ld::model::parse_cause(slow_cause), 270, 0.9, json::object()},
                {ld::model::Cause::kCompute, 30, 0.1, json::object()}};
    r.outliers.push_back(o);
  }
  r.findings = std::move(findings);
  return json::parse(ld::report::render_json(r));
}

ld::model::Finding finding(const std::string& rule, const std::string& severity) {
  ld::model::Finding f;
  f.rule = rule;
  f.cause = ld::model::Cause::kDiskIo;
  f.severity = severity;
  f.title = rule + " title";
  return f;
}

}  // namespace

TEST(LogHistogram, QuantilesAreWithinOnePercentOfTheSamples) {
  const std::vector<double> values = lognormal(20000, 20, 0.6, 1);
  const LogHistogram h = ld::model::make_log_histogram(values);
  EXPECT_EQ(h.count(), values.size());
  for (double p : {50.0, 90.0, 99.0}) {
    const double exact = ld::model::percentile(values, p);
    EXPECT_NEAR(h.value_at(p / 100) / exact, 1.0, 0.012) << "p" << p;
  }
}

TEST(LogHistogram, ZeroAndTinyValuesShareTheFirstBinAndNaNIsDropped) {
  LogHistogram h;
  h.add(0);
  h.add(0.0004);
  h.add(std::nan(""));
  h.add(-1);
  EXPECT_EQ(h.count(), 2u);
  EXPECT_EQ(h.bins().size(), 1u);
  EXPECT_EQ(h.bins().begin()->first, LogHistogram::kBelowBase);
}

TEST(LogHistogram, TheReportsBinsReadBackToTheSameBins) {
  const std::vector<double> gaps = lognormal(3000, 20, 0.8, 2);
  const json report = report_of(gaps, lognormal(30, 200, 0.3, 3), 0, "disk_io", {});
  const json& bins = report["summary"]["histograms"]["tpot_ms"];
  ASSERT_TRUE(bins.is_array());
  LogHistogram back;
  for (const auto& bin : bins) back.add_bin(bin[0].get<double>(), bin[1].get<uint64_t>());
  EXPECT_EQ(back.bins(), ld::model::make_log_histogram(gaps).bins());
}

TEST(DiffInterval, TheSameDistributionTwiceHoldsZero) {
  const LogHistogram a = ld::model::make_log_histogram(lognormal(5000, 20, 0.5, 4));
  const LogHistogram b = ld::model::make_log_histogram(lognormal(5000, 20, 0.5, 5));
  const auto interval = ld::compare::quantile_change_interval(a, b, 0.99, 7);
  ASSERT_TRUE(interval);
  EXPECT_LT(interval->low, 0);
  EXPECT_GT(interval->high, 0);
  EXPECT_LT(interval->high - interval->low, 0.3);
}

TEST(DiffInterval, ADoubledTailIsShownAndTooFewValuesGiveNone) {
  const LogHistogram a = ld::model::make_log_histogram(lognormal(5000, 20, 0.5, 4));
  std::vector<double> doubled = lognormal(5000, 20, 0.5, 5);
  for (double& v : doubled) v *= 2;
  const auto interval = ld::compare::quantile_change_interval(a, ld::model::make_log_histogram(doubled), 0.99, 7);
  ASSERT_TRUE(interval);
  EXPECT_GT(interval->low, 0.7);
  EXPECT_LT(interval->high, 1.4);
  EXPECT_FALSE(ld::compare::quantile_change_interval(a, ld::model::make_log_histogram({1, 2, 3}), 0.99, 7));
}

TEST(Diff, AFixedFsyncReadsAsTheFixWorked) {
  std::vector<double> before = lognormal(4000, 20, 0.1, 8);
  for (size_t i = 0; i < before.size(); i += 20) before[i] = 300;  // every 20th gap: a 300 ms fsync
  const std::vector<double> after = lognormal(4000, 20, 0.1, 9);
  const json a = report_of(before, lognormal(40, 200, 0.2, 10), 200, "disk_io",
                           {finding("disk_io_on_token_path", "warn"), finding("tw_reuse", "info")});
  const json b = report_of(after, lognormal(40, 200, 0.2, 11), 0, "disk_io", {finding("tw_reuse", "info")});
  const Diff d = ld::compare::diff_sides(ld::compare::side_of_report(a, "before.json"),
                                         ld::compare::side_of_report(b, "after.json"));
  EXPECT_EQ(d.verdict.outcome, Outcome::kBetter) << d.verdict.line;
  EXPECT_EQ(d.verdict.metric, "TPOT p99");
  EXPECT_EQ(d.verdict.cause, "disk_io");
  EXPECT_TRUE(d.verdict.fix_worked);
  EXPECT_NE(d.verdict.line.find("the fix worked"), std::string::npos) << d.verdict.line;
  EXPECT_NE(d.verdict.line.find("disk_io"), std::string::npos) << d.verdict.line;
  ASSERT_EQ(d.findings.size(), 2u);
  EXPECT_EQ(d.findings[0].change, FindingChange::kGone);
  EXPECT_EQ(d.findings[0].before.rule, "disk_io_on_token_path");
  EXPECT_EQ(d.findings[1].change, FindingChange::kStill);
  // The reverse is worse, and its findings are new.
  const Diff r = ld::compare::diff_sides(ld::compare::side_of_report(b, "after.json"),
                                         ld::compare::side_of_report(a, "before.json"));
  EXPECT_EQ(r.verdict.outcome, Outcome::kWorse) << r.verdict.line;
  EXPECT_EQ(r.findings[0].change, FindingChange::kNew);
}

TEST(Diff, TwoRunsOfOneServerShowNoChange) {
  const json a = report_of(lognormal(4000, 20, 0.3, 12), lognormal(40, 200, 0.2, 13), 0, "disk_io", {});
  const json b = report_of(lognormal(4000, 20, 0.3, 14), lognormal(40, 200, 0.2, 15), 0, "disk_io", {});
  const Diff d = ld::compare::diff_sides(ld::compare::side_of_report(a, "a"), ld::compare::side_of_report(b, "b"));
  EXPECT_EQ(d.verdict.outcome, Outcome::kNoChange) << d.verdict.line;
  EXPECT_FALSE(d.verdict.fix_worked);
}

TEST(Diff, AReportWithoutHistogramsHasPercentilesButNoInterval) {
  json a = report_of(lognormal(400, 20, 0.3, 16), lognormal(20, 200, 0.2, 17), 0, "disk_io", {});
  a["summary"].erase("histograms");
  const Diff d = ld::compare::diff_sides(ld::compare::side_of_report(a, "a"), ld::compare::side_of_report(a, "a"));
  for (const auto& row : d.metrics) {
    EXPECT_FALSE(row.interval) << row.name;
    EXPECT_NEAR(row.change, 0, 1e-12) << row.name;
  }
  EXPECT_EQ(d.verdict.outcome, Outcome::kTooLittleData);
  EXPECT_NE(d.verdict.line.find("too little data"), std::string::npos);
}

TEST(Diff, SomethingElseThanAReportIsRefusedByName) {
  try {
    ld::compare::side_of_report(json{{"schema", "latency-doctor/audit/v1"}}, "audit.json");
    FAIL() << "an audit report was taken for a report";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("audit.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("audit/v1"), std::string::npos);
  }
  EXPECT_THROW(ld::compare::side_of_report(json::array(), "x"), std::invalid_argument);
}

TEST(Diff, EveryFormatCarriesTheVerdict) {
  std::vector<double> before = lognormal(2000, 20, 0.1, 18);
  for (size_t i = 0; i < before.size(); i += 20) before[i] = 300;
  const json a = report_of(before, lognormal(40, 200, 0.2, 19), 100, "disk_io", {finding("disk", "warn")});
  const json b = report_of(lognormal(2000, 20, 0.1, 20), lognormal(40, 200, 0.2, 21), 0, "disk_io", {});
  const Diff d = ld::compare::diff_sides(ld::compare::side_of_report(a, "before <1>.json"),
                                         ld::compare::side_of_report(b, "after.json"));
  for (const char* format : {"text", "markdown", "html"}) {
    const std::string out = ld::compare::render_diff(d, format);
    EXPECT_NE(out.find("the fix worked"), std::string::npos) << format;
    EXPECT_NE(out.find("disk_io"), std::string::npos) << format;
  }
  const std::string html = ld::compare::render_diff(d, "html");
  EXPECT_EQ(html.find("before <1>"), std::string::npos) << "a file name reached the markup unescaped";
  EXPECT_EQ(std::count(html.begin(), html.end(), '\n') > 10, true);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  const json j = json::parse(ld::compare::render_diff(d, "json"));
  EXPECT_EQ(j["schema"], ld::compare::kDiffSchema);
  EXPECT_EQ(j["verdict"]["outcome"], "better");
  EXPECT_TRUE(j["verdict"]["fix_worked"].get<bool>());
  EXPECT_EQ(j["findings"][0]["change"], "gone");
  EXPECT_THROW(ld::compare::render_diff(d, "pdf"), std::invalid_argument);
}
