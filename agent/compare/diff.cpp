#include "compare/diff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace ld::compare {

using model::LogHistogram;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double number_or_nan(const json& object, const char* key) {
  if (!object.is_object()) return kNaN;
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : kNaN;
}

uint64_t count_of(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto it = object.find(key);
  return it != object.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

std::string string_of(const json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

const json& member(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it != object.end() ? *it : kNull;
}

std::map<std::string, double> percentiles_of(const json& distribution) {
  std::map<std::string, double> out;
  for (const char* p : {"p50", "p90", "p99"}) {
    const double v = number_or_nan(distribution, p);
    if (std::isfinite(v)) out[p] = v;
  }
  return out;
}

LogHistogram histogram_of(const json& bins) {
  LogHistogram h;
  if (!bins.is_array()) return h;
  for (const auto& bin : bins) {
    if (!bin.is_array() || bin.size() != 2 || !bin[0].is_number() || !bin[1].is_number_unsigned()) continue;
    h.add_bin(bin[0].get<double>(), bin[1].get<uint64_t>());
  }
  return h;
}

void add_causes(const json& causes, std::map<std::string, double>& into) {
  if (!causes.is_array()) return;
  for (const auto& c : causes) {
    const std::string id = string_of(c, "cause");
    const double ms = number_or_nan(c, "ms");
    if (!id.empty() && std::isfinite(ms) && ms > 0) into[id] += ms;
  }
}

}  // namespace

Side side_of_report(const json& report, const std::string& label) {
  const std::string schema = string_of(report, "schema");
  if (schema != "latency-doctor/report/v1")
    throw std::invalid_argument(fmt::format("{}: not a latency-doctor JSON report (schema {})", label,
                                            schema.empty() ? "missing" : "\"" + schema + "\""));
  Side side;
  side.label = label;
  const json& target = member(report, "target");
  side.comm = string_of(target, "comm");
  for (const auto& pid : member(target, "pids"))
    if (pid.is_number_integer()) side.pids.push_back(pid.get<int>());
  side.duration_ms = count_of(member(report, "window"), "duration_ms");
  const json& summary = member(report, "summary");
  side.requests = count_of(summary, "requests");
  side.tokens = count_of(summary, "tokens");
  side.gaps = count_of(summary, "gaps");
  side.ttft_ms = percentiles_of(member(summary, "ttft_ms"));
  side.tpot_ms = percentiles_of(member(summary, "tpot_ms"));
  const json& histograms = member(summary, "histograms");
  side.ttft_hist = histogram_of(member(histograms, "ttft_ms"));
  side.tpot_hist = histogram_of(member(histograms, "tpot_ms"));

  const json& typical = member(member(report, "attribution"), "typical");
  add_causes(member(typical, "causes"), side.cause_ms);
  const double typical_ms = number_or_nan(typical, "total_ms");
  side.token_time_ms = std::isfinite(typical_ms) ? typical_ms : 0;
  for (const auto& outlier : member(report, "outliers")) {
    const std::string kind = string_of(outlier, "kind");
    (kind == "ttft" ? side.slow_ttft : side.slow_tpot)++;
    const double ms = number_or_nan(outlier, "duration_ms");
    if (std::isfinite(ms)) side.token_time_ms += ms;
    add_causes(member(outlier, "causes"), side.slow_cause_ms);
  }
  for (const auto& [cause, ms] : side.slow_cause_ms) side.cause_ms[cause] += ms;
  for (const auto& f : member(report, "findings"))
    side.findings.push_back(
        {string_of(f, "rule"), string_of(f, "cause"), string_of(f, "severity"), string_of(f, "title")});
  return side;
}

// Resampling n values from a histogram and taking the k-th smallest gives the histogram's value
// at U(k), the k-th smallest of n uniforms, which is Beta(k, n + 1 - k): one draw per replicate
// instead of n (the exact bootstrap of an order statistic).
std::optional<Interval> quantile_change_interval(const LogHistogram& before, const LogHistogram& after, double q,
                                                 uint64_t seed, int resamples) {
  if (before.count() < kMinSamples || after.count() < kMinSamples || resamples < 20) return std::nullopt;
  std::mt19937_64 rng(seed);
  auto replicate = [&](const LogHistogram& h) {
    const double n = static_cast<double>(h.count());
    const double k = std::clamp(std::ceil(q * n), 1.0, n);
    std::gamma_distribution<double> ga(k, 1.0), gb(n + 1 - k, 1.0);
    const double x = ga(rng), y = gb(rng);
    return h.value_at(x / (x + y));
  };
  std::vector<double> changes;
  changes.reserve(static_cast<size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    const double b = replicate(before), a = replicate(after);
    if (b > 0) changes.push_back(a / b - 1);
  }
  if (changes.size() < static_cast<size_t>(resamples) / 2) return std::nullopt;
  std::sort(changes.begin(), changes.end());
  auto at = [&](double p) { return changes[static_cast<size_t>(p * static_cast<double>(changes.size() - 1))]; };
  return Interval{at(0.025), at(0.975)};
}

namespace {

double value_or_nan(const std::map<std::string, double>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? kNaN : it->second;
}

MetricRow metric_row(const std::string& name, const Side& a, const Side& b, bool ttft, const std::string& p, double q,
                     uint64_t seed) {
  MetricRow row;
  row.name = name;
  row.before = value_or_nan(ttft ? a.ttft_ms : a.tpot_ms, p);
  row.after = value_or_nan(ttft ? b.ttft_ms : b.tpot_ms, p);
  row.change =
      std::isfinite(row.before) && std::isfinite(row.after) && row.before > 0 ? row.after / row.before - 1 : kNaN;
  if (std::isfinite(row.change))
    row.interval =
        quantile_change_interval(ttft ? a.ttft_hist : a.tpot_hist, ttft ? b.ttft_hist : b.tpot_hist, q, seed);
  return row;
}

double share(double ms, double total) { return total > 0 ? ms / total : 0; }

std::vector<CauseRow> cause_rows(const Side& a, const Side& b) {
  std::set<std::string> ids;
  for (const auto& [id, ms] : a.cause_ms) ids.insert(id);
  for (const auto& [id, ms] : b.cause_ms) ids.insert(id);
  std::vector<CauseRow> rows;
  for (const std::string& id : ids) {
    CauseRow row;
    row.cause = id;
    row.before_ms = value_or_nan(a.cause_ms, id);
    row.after_ms = value_or_nan(b.cause_ms, id);
    if (std::isnan(row.before_ms)) row.before_ms = 0;
    if (std::isnan(row.after_ms)) row.after_ms = 0;
    row.before_share = share(row.before_ms, a.token_time_ms);
    row.after_share = share(row.after_ms, b.token_time_ms);
    row.before_slow_ms = a.slow_cause_ms.count(id) ? a.slow_cause_ms.at(id) : 0;
    row.after_slow_ms = b.slow_cause_ms.count(id) ? b.slow_cause_ms.at(id) : 0;
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const CauseRow& x, const CauseRow& y) {
    return std::max(x.before_share, x.after_share) > std::max(y.before_share, y.after_share);
  });
  return rows;
}

int severity_rank(const std::string& s) { return s == "crit" ? 2 : s == "warn" ? 1 : 0; }

std::vector<FindingRow> finding_rows(const Side& a, const Side& b) {
  std::vector<FindingRow> rows;
  auto find = [](const std::vector<FindingRef>& list, const std::string& rule) -> const FindingRef* {
    for (const FindingRef& f : list)
      if (f.rule == rule) return &f;
    return nullptr;
  };
  for (const FindingRef& f : a.findings) {
    const FindingRef* still = find(b.findings, f.rule);
    rows.push_back(still ? FindingRow{FindingChange::kStill, f, *still} : FindingRow{FindingChange::kGone, f, {}});
  }
  for (const FindingRef& f : b.findings)
    if (!find(a.findings, f.rule)) rows.push_back({FindingChange::kNew, {}, f});
  // Most severe first within gone, new, still.
  std::stable_sort(rows.begin(), rows.end(), [](const FindingRow& x, const FindingRow& y) {
    if (x.change != y.change) return x.change < y.change;
    const auto rank = [](const FindingRow& r) {
      return std::max(severity_rank(r.before.severity), severity_rank(r.after.severity));
    };
    return rank(x) > rank(y);
  });
  return rows;
}

std::string percent(double fraction) { return fmt::format("{:+.0f}%", fraction * 100); }

// The cause the slow tokens of A were blamed on most (unknown aside): what a fix aimed at.
std::string leading_slow_cause(const Side& a) {
  std::string best;
  double best_ms = 0;
  for (const auto& [cause, ms] : a.slow_cause_ms)
    if (cause != "unknown" && ms > best_ms) best = cause, best_ms = ms;
  return best;
}

bool shown(const MetricRow& row) { return row.interval.has_value(); }
// A change the verdict calls: its interval excludes 0, and it is large enough to matter (a p99
// moves a few percent between two runs of one server).
constexpr double kSmallestChange = 0.03;
bool better(const MetricRow& row) { return shown(row) && row.interval->high < 0 && row.change <= -kSmallestChange; }
bool worse(const MetricRow& row) { return shown(row) && row.interval->low > 0 && row.change >= kSmallestChange; }

// The row the verdict rests on: of the p99s, one whose change the interval shows, the larger
// change first; else TPOT p99 (the stream's stutter), else TTFT p99.
const MetricRow* headline_row(const std::vector<MetricRow>& rows) {
  const MetricRow* pick = nullptr;
  for (const MetricRow& row : rows) {
    if (row.name.find("p99") == std::string::npos || !(better(row) || worse(row))) continue;
    if (!pick || std::fabs(row.change) > std::fabs(pick->change)) pick = &row;
  }
  if (pick) return pick;
  for (const char* name : {"TPOT p99", "TTFT p99"})
    for (const MetricRow& row : rows)
      if (row.name == name && row.interval) return &row;
  return nullptr;
}

Verdict verdict_of(const Diff& d) {
  Verdict v;
  const MetricRow* row = headline_row(d.metrics);
  if (!row) {
    v.outcome = Outcome::kTooLittleData;
    v.line = fmt::format("too little data to compare: {} and {} requests (an interval needs {} values a side)",
                         d.before.requests, d.after.requests, kMinSamples);
    return v;
  }
  v.metric = row->name;
  v.outcome = better(*row) ? Outcome::kBetter : worse(*row) ? Outcome::kWorse : Outcome::kNoChange;
  std::string line = fmt::format("{} {} ({}..{})", row->name, percent(row->change), percent(row->interval->low),
                                 percent(row->interval->high));
  v.cause = leading_slow_cause(d.before);
  if (v.cause.empty() && v.outcome == Outcome::kWorse) v.cause = leading_slow_cause(d.after);
  if (!v.cause.empty()) {
    for (const CauseRow& c : d.causes) {
      if (c.cause != v.cause) continue;
      v.cause_fell = c.after_share <= c.before_share / 2;
      line += fmt::format("; {} {:.0f}% -> {:.0f}% of token time", c.cause, c.before_share * 100, c.after_share * 100);
    }
  }
  v.fix_worked = v.outcome == Outcome::kBetter && (v.cause.empty() || v.cause_fell);
  switch (v.outcome) {
    case Outcome::kBetter:
      line += v.fix_worked ? ": the fix worked" : fmt::format(": better, but {} still takes its time", v.cause);
      break;
    case Outcome::kWorse: line += ": worse"; break;
    case Outcome::kNoChange: line += ": no change shown (the interval holds 0)"; break;
    case Outcome::kTooLittleData: break;
  }
  v.line = line;
  return v;
}

}  // namespace

Diff diff_sides(Side before, Side after, uint64_t seed) {
  Diff d;
  d.before = std::move(before);
  d.after = std::move(after);
  const std::pair<const char*, double> quantiles[] = {{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}};
  for (const bool ttft : {true, false})
    for (const auto& [p, q] : quantiles)
      d.metrics.push_back(metric_row(fmt::format("{} {}", ttft ? "TTFT" : "TPOT", p), d.before, d.after, ttft, p, q,
                                     seed + d.metrics.size()));
  d.causes = cause_rows(d.before, d.after);
  d.findings = finding_rows(d.before, d.after);
  d.verdict = verdict_of(d);
  return d;
}

std::string_view outcome_name(Outcome outcome) { return util::name_of(kOutcomeNames, outcome); }
std::string_view finding_change_name(FindingChange c) { return util::name_of(kFindingChangeNames, c); }

}  // namespace ld::compare
