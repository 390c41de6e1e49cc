// `diff A B`: two runs of one server side by side, from their JSON reports (a trace is analysed
// into one first): TTFT/TPOT percentiles with the change and a bootstrap interval, time by
// cause before and after, findings gone / new / still there, and a one-line verdict.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/histogram.hpp"
#include "util/enum_names.hpp"

namespace ld::compare {

struct FindingRef {
  std::string rule;
  std::string cause;
  std::string severity;  // info | warn | crit
  std::string title;
};

// One run, as its JSON report tells it.
struct Side {
  std::string label;  // the file the user named
  std::string comm;
  std::vector<int> pids;
  uint64_t duration_ms = 0;
  uint64_t requests = 0, tokens = 0, gaps = 0;
  std::map<std::string, double> ttft_ms, tpot_ms;  // "p50", "p90", "p99" -> ms (absent: none)
  // The report's summary.histograms; empty in a report without them (no interval then).
  model::LogHistogram ttft_hist, tpot_hist;
  uint64_t slow_ttft = 0, slow_tpot = 0;  // outliers by kind
  // Time by cause: the typical tokens' and the slow tokens' ms together, over token_time_ms.
  std::map<std::string, double> cause_ms;
  std::map<std::string, double> slow_cause_ms;  // the slow tokens' alone
  double token_time_ms = 0;                     // typical total + every outlier's duration
  std::vector<FindingRef> findings;
};

// Reads a report/v1 JSON object. Throws std::invalid_argument naming `label` when it is none.
Side side_of_report(const nlohmann::json& report, const std::string& label);

struct Interval {
  double low = 0, high = 0;  // relative changes, 0.1 = +10%
};

// The change of a percentile from A to B: the point from the reports' own percentiles, the
// interval from resampling both runs (docs/diff.md, "The interval").
struct MetricRow {
  std::string name;   // "TTFT p99"
  double before = 0;  // ms; NaN when the run has none
  double after = 0;
  double change = 0;                 // after / before - 1; NaN when before is 0 or either is NaN
  std::optional<Interval> interval;  // 95%; none without histograms or with < kMinSamples
};
inline constexpr uint64_t kMinSamples = 5;

struct CauseRow {
  std::string cause;
  double before_share = 0, after_share = 0;  // of the run's token time
  double before_ms = 0, after_ms = 0;
  double before_slow_ms = 0, after_slow_ms = 0;
};

enum class FindingChange { kGone, kNew, kStill };
inline constexpr util::EnumNames<FindingChange, 3> kFindingChangeNames{
    {{FindingChange::kGone, "gone"}, {FindingChange::kNew, "new"}, {FindingChange::kStill, "still"}}};
static_assert(util::names_every_value_in_order(kFindingChangeNames));
struct FindingRow {
  FindingChange change = FindingChange::kStill;
  FindingRef before, after;  // kGone: before only; kNew: after only
};

enum class Outcome { kBetter, kWorse, kNoChange, kTooLittleData };
inline constexpr util::EnumNames<Outcome, 4> kOutcomeNames{{{Outcome::kBetter, "better"},
                                                            {Outcome::kWorse, "worse"},
                                                            {Outcome::kNoChange, "no_change"},
                                                            {Outcome::kTooLittleData, "too_little_data"}}};
static_assert(util::names_every_value_in_order(kOutcomeNames));

struct Verdict {
  Outcome outcome = Outcome::kTooLittleData;
  std::string metric;       // the row the verdict rests on: "TPOT p99"
  std::string cause;        // the slow tokens' leading cause before ("" without slow tokens)
  bool cause_fell = false;  // its share of token time at most half of before
  bool fix_worked = false;  // better, and the cause fell
  std::string line;         // "TPOT p99 -71% (-76..-65%); disk_io 22% -> 0% of token time: the fix worked"
};

struct Diff {
  Side before, after;
  std::vector<MetricRow> metrics;
  std::vector<CauseRow> causes;  // largest share before or after first
  std::vector<FindingRow> findings;
  Verdict verdict;
};

// `seed` fixes the resampling, so one pair of inputs always gives one report.
Diff diff_sides(Side before, Side after, uint64_t seed = 1);

// The 95% interval of after.q / before.q - 1 by resampling both histograms (nullopt with too
// few samples on either side).
std::optional<Interval> quantile_change_interval(const model::LogHistogram& before, const model::LogHistogram& after,
                                                 double q, uint64_t seed, int resamples = 2000);

std::string_view outcome_name(Outcome outcome);         // better | worse | no_change | too_little_data
std::string_view finding_change_name(FindingChange c);  // gone | new | still

// Formats: text, markdown, html, json (schema latency-doctor/diff/v1).
std::string render_diff(const Diff& diff, const std::string& format);  // throws invalid_argument for another
bool is_diff_format(const std::string& format);
inline constexpr const char* kDiffSchema = "latency-doctor/diff/v1";

}  // namespace ld::compare
