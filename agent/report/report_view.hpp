// Numbers derived from a Report that the HTML and Markdown reports both show: length
// distributions, TPOT histogram, TTFT by input length, time by cause, the environment block.
// Pure functions of the Report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/report.hpp"

namespace ld::report {

using model::AgentCost;
using model::Cause;
using model::CauseTime;
using model::Outlier;
using model::Report;
using model::RequestRow;
using model::TtftFit;
using model::WindowKind;

// "12.3", "-" for NaN/inf.
std::string ms_cell(double ms);
// "YYYY-MM-DD hh:mm:ss.mmm UTC" (milliseconds), "?" when out of range.
std::string utc_time(uint64_t unix_ns);
// Seconds of a monotonic time after the window start.
double seconds_after_start(const Report& r, uint64_t mono_ns);
// The window start as a monotonic time (from start_unix_ns and the clock offset).
uint64_t window_start_mono_ns(const Report& r);

// ---- distributions reported as P25/P50/P75 (quartiles, not only a mean)
struct Quartiles {
  uint64_t n = 0;
  double p25 = 0, p50 = 0, p75 = 0;  // NaN when n == 0
};
struct LengthStats {
  Quartiles input_bytes;
  Quartiles input_tokens;   // requests with a known input token count only
  Quartiles output_tokens;  // tokens emitted per request
};
LengthStats length_stats(const Report& r);

// Every TPOT gap of every request, in ms (the population report.tpot_ms describes).
std::vector<double> all_gaps_ms(const Report& r);

struct Histogram {
  double lo = 0, hi = 0, bin_width = 0;
  std::vector<uint64_t> counts;
  uint64_t above = 0;  // values > hi (the long tail, drawn as one overflow bar)
};
// `bins` equal bins over [0, hi]; hi is the max, or ~1.5 x p99 when the tail is far longer
// (one 5 s gap must not squash a distribution of 40 ms gaps into one bar).
Histogram make_histogram(const std::vector<double>& values, int bins);

// Box-plot numbers: quartiles and Tukey whiskers (most extreme values within 1.5 IQR).
struct BoxStats {
  uint64_t n = 0;
  double p25 = 0, p50 = 0, p75 = 0, whisker_lo = 0, whisker_hi = 0, mean = 0, sd = 0;
};
BoxStats box_stats(const std::vector<double>& values);

// ---- TTFT against input length
struct TtftPoint {
  double input = 0;
  double ttft_ms = 0;
  const RequestRow* row = nullptr;
};
// The input measure the fit used ("tokens" or "bytes") and one point per request with a TTFT.
std::string ttft_input_measure(const Report& r);
std::vector<TtftPoint> ttft_points(const Report& r);
// The fitted TTFT at an input length; NaN without a valid fit.
double fitted_ttft_ms(const TtftFit& fit, double input);

// Why the report has no fit, for the caption ("" when it has one).
std::string no_fit_reason(const Report& r);

struct InputBucket {
  double input_lo = 0, input_hi = 0;
  uint64_t requests = 0;
  double ttft_p50 = 0, ttft_p90 = 0;
  double fitted_ms = 0;  // at the bucket's median input; NaN without a fit
};
// Requests split into up to `buckets` input-length ranges of equal size (by rank).
std::vector<InputBucket> ttft_by_input(const Report& r, size_t buckets);

// ---- where the time went
// Causes of a set of windows summed, sorted by ms; the unexplained rest of each window is
// added as "unknown". share = ms / total window time.
struct CauseTotals {
  uint64_t windows = 0;
  double total_ms = 0;
  std::vector<CauseTime> causes;
};
CauseTotals outlier_totals(const Report& r, WindowKind kind);
// The typical token's split with the unexplained rest as "unknown".
CauseTotals typical_totals(const Report& r);
// The cause with the most time in an outlier (unknown when it has none).
Cause dominant_cause(const Outlier& o);
// "disk_io 300.0 ms, unknown 12.0 ms"
std::string causes_summary(const std::vector<CauseTime>& causes);
// What the token's thread did, in order: "fsync /var/log/app.log 272 ms, running 14 ms" (unescaped)
std::string activity_text(const std::vector<model::ActivityStep>& steps);
// "syscall=fsync, path=/var/log/app.log" (unescaped)
std::string evidence_summary(const nlohmann::json& evidence);
// "12 slow tokens, 340 samples": what a finding rests on ("" when its rule states nothing).
// "43 python3 (a child of 42); 51 VLLM::EngineCor (connected to 42 over a unix socket)": the
// processes traced with the target, and why; "" when none.
std::string followed_text(const model::Target& target);

std::string evidence_size_text(const model::Finding& finding);

// The time-by-cause table of both human formats: a row per cause found in the slow first
// tokens, the slow gaps or the typical token, in vocabulary order.
struct CauseBreakdown {
  CauseTotals first_tokens, gaps, typical;
  std::vector<Cause> causes;
  std::vector<std::string> headers() const;
  // cause id, meaning, then "ms (share%)" per column ("" where the cause is absent); the
  // typical column is per token.
  std::vector<std::string> cells(Cause cause) const;
};
CauseBreakdown cause_breakdown(const Report& r);
// Outliers, longest first.
std::vector<const Outlier*> outliers_by_duration(const Report& r);

// ---- plain-text table cells both human formats escape and lay out their own way
const std::vector<std::string>& distribution_headers();  // "ms", "n", "p50", ... "sd"
std::vector<std::string> distribution_cells(const std::string& name, const model::Distribution& d);
const std::vector<std::string>& request_headers();
std::vector<std::string> request_cells(const Report& r, const RequestRow& row);
const std::vector<std::string>& length_headers();                    // "per request", "n", "P25", "P50", "P75"
std::vector<std::vector<std::string>> length_rows(const Report& r);  // rows with n > 0 only

// ---- the definitions side by side and the client join: plain cells both human formats (and
// the text report) escape and lay out their own way.
struct CellTable {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // per column: right-aligned
};
// A row per definition and measured side (server, client); empty rows when none was measured.
CellTable definitions_table(const Report& r);
inline constexpr const char* kDefinitionsCaption =
    "A token is one SSE data event, a chunk one send of the server or what the client received at one "
    "instant; docs/definitions.md maps each to vLLM bench, GuideLLM, AIPerf and OpenTelemetry";
inline constexpr const char* kDefinitionsShortCaption =
    "token = one SSE data event, chunk = one send or one arrival; docs/definitions.md";
// "token log FILE, joined by client port: 12 of 12 requests"
std::string client_join_caption(const Report& r);
CellTable client_join_summary_table(const Report& r);  // client/server TTFT, before/after, gaps, lag
std::string client_join_note(const Report& r);         // the outside share and the bunched tokens
CellTable client_join_requests_table(const Report& r, size_t max_rows);

// ---- the per-request timeline plot
// Which requests a timeline draws when there are too many tokens or requests to draw all:
// every request with an outlier, plus evenly spaced others up to the budgets.
struct TimelineSample {
  std::vector<size_t> rows;     // indices into request_rows, ascending
  size_t token_stride = 1;      // draw every n-th token mark
  bool downsampled = false;     // some requests were left out
  size_t outlier_requests = 0;  // requests kept because they have an outlier
};
TimelineSample sample_timeline(const Report& r, size_t token_budget, size_t max_lanes);

// ---- environment: what a result depends on, stated beside it
struct EnvRow {
  std::string label;
  std::string value;
};
// Target, host facts (known keys first, then any others, nested objects flattened), window,
// token source, probes and lost events, latency-doctor version.
std::vector<EnvRow> environment_rows(const Report& r);

// Probes that lost events and the total lost (the report may be missing tokens/evidence).
uint64_t lost_events(const Report& r);
// One sentence on what the agent itself cost (attach, then CPU, wake-ups and memory while it
// recorded); empty when the trace does not say (older versions, a killed agent).
std::string agent_cost_text(const AgentCost& cost);

}  // namespace ld::report
