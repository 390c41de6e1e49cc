#include "analysis/facts.hpp"

#include <algorithm>
#include <cmath>

#include "analysis/stats.hpp"
#include "rules/rule.hpp"

namespace ld::analysis {
namespace {

void set_finite(rules::FactSet& facts, const std::string& name, double value) {
  if (std::isfinite(value)) facts.set(name, value);
}

// A JSON scalar as a fact; objects and arrays are not facts.
void set_json(rules::FactSet& facts, const std::string& name, const nlohmann::json& value) {
  if (value.is_boolean()) facts.set(name, value.get<bool>());
  else if (value.is_number()) set_finite(facts, name, value.get<double>());
  else if (value.is_string()) facts.set(name, value.get<std::string>());
}

void summary_facts(const report::Report& r, rules::FactSet& facts) {
  facts.set("summary.requests", r.requests);
  facts.set("summary.tokens", r.tokens);
  facts.set("summary.duration_ms", r.duration_ms);
  set_finite(facts, "summary.ttft_p50_ms", r.ttft_ms.p50);
  set_finite(facts, "summary.ttft_p90_ms", r.ttft_ms.p90);
  set_finite(facts, "summary.ttft_p99_ms", r.ttft_ms.p99);
  set_finite(facts, "summary.tpot_p50_ms", r.tpot_ms.p50);
  set_finite(facts, "summary.tpot_p99_ms", r.tpot_ms.p99);
  set_finite(facts, "summary.tpot_mean_ms", r.tpot_ms.mean);
  set_finite(facts, "summary.tpot_stddev_ms", r.tpot_ms.stddev);
  set_finite(facts, "ttft.p90_minus_p50_ms", r.ttft_ms.p90 - r.ttft_ms.p50);
  if (!r.request_rows.empty()) {
    const auto short_ones = std::count_if(r.request_rows.begin(), r.request_rows.end(),
                                          [](const report::RequestRow& row) { return row.tokens < 64; });
    facts.set("summary.short_response_share",
              static_cast<double>(short_ones) / static_cast<double>(r.request_rows.size()));
  }
}

void outlier_facts(const report::Report& r, rules::FactSet& facts) {
  uint64_t ttft = 0;
  double explained = 0;
  std::map<std::string, double> ms, max_ms;
  std::map<std::string, uint64_t> top;
  std::map<std::string, const report::CauseTime*> strongest;  // the outlier where C had most ms
  double total_ms = 0;
  for (const report::Outlier& o : r.outliers) {
    if (o.kind == "ttft") ++ttft;
    total_ms += o.duration_ms;
    double known = 0;
    for (const report::CauseTime& c : o.causes) {
      ms[c.cause] += c.ms;
      if (c.cause != "unknown") known += c.share;
      if (c.ms > max_ms[c.cause]) {
        max_ms[c.cause] = c.ms;
        strongest[c.cause] = &c;
      }
    }
    if (!o.causes.empty()) ++top[o.causes.front().cause];
    explained += std::min(known, 1.0);
  }
  facts.set("outliers.count", r.outliers.size());
  facts.set("outliers.ttft", ttft);
  facts.set("outliers.tpot", r.outliers.size() - ttft);
  if (!r.outliers.empty()) facts.set("outliers.explained_share", explained / static_cast<double>(r.outliers.size()));
  for (const std::string& cause : rules::cause_ids()) {
    const std::string prefix = "cause." + cause + ".";
    facts.set(prefix + "outliers", top[cause]);
    facts.set(prefix + "ms", ms[cause]);
    facts.set(prefix + "max_ms", max_ms[cause]);
    facts.set(prefix + "share", total_ms > 0 ? ms[cause] / total_ms : 0.0);
    if (auto it = strongest.find(cause); it != strongest.end() && it->second->evidence.is_object()) {
      for (const auto& [key, value] : it->second->evidence.items()) set_json(facts, prefix + key, value);
    }
  }
}

void typical_facts(const report::Report& r, rules::FactSet& facts) {
  if (r.typical.windows == 0) return;
  for (const report::CauseTime& c : r.typical.causes) {
    facts.set("typical." + c.cause + ".share", c.share);
    facts.set("typical." + c.cause + ".ms_per_token", c.ms / static_cast<double>(r.typical.windows));
  }
}

void ttft_facts(const report::Report& r, rules::FactSet& facts) {
  facts.set("ttft_fit.valid", r.ttft_fit.valid);
  if (r.ttft_fit.valid) {
    facts.set("ttft_fit.a", r.ttft_fit.a);
    facts.set("ttft_fit.b", r.ttft_fit.b);
    facts.set("ttft_fit.r2", r.ttft_fit.r2);
    facts.set("ttft_fit.n", r.ttft_fit.n);
  }
  if (r.request_rows.empty()) return;
  std::vector<double> inputs;
  for (const auto& row : r.request_rows) inputs.push_back(static_cast<double>(row.input_bytes));
  const double p75 = percentile(inputs, 75);
  uint64_t long_input = 0, ttft = 0;
  bool first = false;
  const std::string& first_id = r.request_rows.front().id;
  for (const report::Outlier& o : r.outliers) {
    if (o.kind != "ttft") continue;
    ++ttft;
    if (o.request == first_id) first = true;
    for (const auto& row : r.request_rows)
      if (row.id == o.request && static_cast<double>(row.input_bytes) >= p75 && row.input_bytes > 0) ++long_input;
  }
  facts.set("ttft.outliers_long_input", long_input);
  facts.set("ttft.outlier_share", static_cast<double>(ttft) / static_cast<double>(r.request_rows.size()));
  facts.set("ttft.first_request_outlier", first);
}

}  // namespace

rules::FactSet report_facts(const report::Report& r) {
  rules::FactSet facts;
  summary_facts(r, facts);
  outlier_facts(r, facts);
  typical_facts(r, facts);
  ttft_facts(r, facts);
  facts.set("periodic.found", r.periodicity.found);
  if (r.periodicity.found) {
    facts.set("periodic.period_s", r.periodicity.period_s);
    facts.set("periodic.outliers", r.periodicity.outliers);
    facts.set("periodic.coincides", r.periodicity.coincides);
  }
  if (r.window_facts.is_object())
    for (const auto& [key, value] : r.window_facts.items()) set_json(facts, "window." + key, value);
  uint64_t lost = 0;
  for (const report::ProbeStatus& p : r.probes) {
    facts.set("probes." + p.name + ".attached", p.status == "attached");
    lost += p.lost;
  }
  facts.set("probes.lost", lost);
  facts.set("target.comm", r.target.comm);
  facts.set("target.exe", r.target.exe);
  facts.set("target.python", r.target.exe.find("python") != std::string::npos ||
                                 r.target.comm.find("python") != std::string::npos);
  return facts;
}

}  // namespace ld::analysis
