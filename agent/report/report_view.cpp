#include "report/report_view.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "model/cause.hpp"
#include "model/stats.hpp"
#include "util/time.hpp"

namespace ld::report {

using namespace model;
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Quartiles quartiles(const std::vector<double>& values) {
  Quartiles q;
  q.n = values.size();
  q.p25 = model::percentile(values, 25);
  q.p50 = model::percentile(values, 50);
  q.p75 = model::percentile(values, 75);
  return q;
}

// Per-cause sums (indexed by Cause) plus the unexplained rest as unknown, longest first; equal
// times keep the vocabulary's order.
std::vector<CauseTime> with_unexplained(std::array<double, kCauseCount> ms_by_cause, double total_ms) {
  double explained = 0;
  for (const CauseInfo& info : kCauses) explained += ms_by_cause[static_cast<size_t>(info.cause)];
  if (total_ms - explained > 1e-9) ms_by_cause[static_cast<size_t>(Cause::kUnknown)] += total_ms - explained;
  std::vector<CauseTime> causes;
  for (const CauseInfo& info : kCauses) {
    const double ms = ms_by_cause[static_cast<size_t>(info.cause)];
    if (!(ms > 0)) continue;
    causes.push_back({info.cause, ms, total_ms > 0 ? ms / total_ms : 0, nlohmann::json::object()});
  }
  std::stable_sort(causes.begin(), causes.end(), [](const CauseTime& a, const CauseTime& b) { return a.ms > b.ms; });
  return causes;
}

std::string json_scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_array()) {
    std::string out;
    for (const auto& item : v) out += (out.empty() ? "" : ", ") + json_scalar_text(item);
    return out;
  }
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Nested objects become "parent.child" rows; nulls are left out.
void flatten(const nlohmann::json& value, const std::string& prefix, std::vector<EnvRow>& rows) {
  if (value.is_null()) return;
  if (!value.is_object()) {
    rows.push_back({prefix, json_scalar_text(value)});
    return;
  }
  for (const auto& [key, child] : value.items()) flatten(child, prefix.empty() ? key : prefix + "." + key, rows);
}

// Host facts with a human label, in the order a reader looks for them.
const std::vector<std::pair<std::string, std::string>>& known_host_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys{
      {"kernel", "kernel"},  {"machine", "architecture"},  {"cpu_model", "CPU model"},
      {"cpus", "CPUs"},      {"governor", "CPU governor"}, {"cpu_governor", "CPU governor"},
      {"btf", "kernel BTF"}, {"sysctl", "sysctl"},         {"cgroup", "cgroup"},
  };
  return keys;
}

std::string target_text(const Target& t) {
  std::string pids;
  for (int pid : t.pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
  std::string out = (t.pids.size() == 1 ? "pid " : "pids ") + (pids.empty() ? "-" : pids);
  if (!t.comm.empty()) out += " (" + t.comm + ")";
  return out;
}

std::string probes_text(const Report& r) {
  std::map<std::string, std::vector<std::string>> by_status;
  for (const ProbeStatus& p : r.probes) by_status[std::string(p.status_name())].push_back(p.name);
  std::string out;
  for (const auto& [status, names] : by_status) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    out += (out.empty() ? "" : "; ") + status + ": " + list;
  }
  return out.empty() ? "not recorded" : out;
}

}  // namespace

std::string ms_cell(double ms) {
  if (!std::isfinite(ms)) return "-";
  return fmt::format("{:.1f}", ms);
}

std::string utc_time(uint64_t unix_ns) {
  const auto seconds = static_cast<time_t>(unix_ns / util::kNsPerSec);
  const auto millis = (unix_ns / util::kNsPerMs) % util::kMsPerSec;
  struct tm tm {};
  if (gmtime_r(&seconds, &tm) == nullptr) return "?";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0) return "?";
  return fmt::format("{}.{:03d} UTC", buf, millis);
}

uint64_t window_start_mono_ns(const Report& r) {
  if (r.start_unix_ns == 0) {  // unknown start: the first request's
    uint64_t first = 0;
    for (const RequestRow& row : r.request_rows)
      if (!first || row.start_mono_ns < first) first = row.start_mono_ns;
    return first;
  }
  const __int128 mono = static_cast<__int128>(r.start_unix_ns) - r.realtime_minus_monotonic_ns;
  return mono < 0 ? 0 : static_cast<uint64_t>(mono);
}

double seconds_after_start(const Report& r, uint64_t mono_ns) {
  const uint64_t start = window_start_mono_ns(r);
  return util::offset_s(mono_ns, start);
}

LengthStats length_stats(const Report& r) {
  std::vector<double> in_bytes, in_tokens, out_tokens;
  for (const RequestRow& row : r.request_rows) {
    in_bytes.push_back(static_cast<double>(row.input_bytes));
    if (row.input_tokens >= 0) in_tokens.push_back(static_cast<double>(row.input_tokens));
    out_tokens.push_back(static_cast<double>(row.tokens));
  }
  return {quartiles(in_bytes), quartiles(in_tokens), quartiles(out_tokens)};
}

std::vector<double> all_gaps_ms(const Report& r) {
  std::vector<double> gaps;
  for (const RequestRow& row : r.request_rows) {
    for (size_t i = 1; i < row.token_mono_ns.size(); ++i) {
      if (row.token_mono_ns[i] < row.token_mono_ns[i - 1]) continue;  // not ascending: bad input
      gaps.push_back(util::ns_to_ms(row.token_mono_ns[i] - row.token_mono_ns[i - 1]));
    }
  }
  return gaps;
}

Histogram make_histogram(const std::vector<double>& values, int bins) {
  Histogram h;
  std::vector<double> finite;
  for (double v : values)
    if (std::isfinite(v)) finite.push_back(std::max(v, 0.0));
  if (finite.empty() || bins < 1) return h;
  const double max = *std::max_element(finite.begin(), finite.end());
  const double p99 = model::percentile(finite, 99);
  h.hi = (p99 > 0 && max > 3 * p99) ? 1.5 * p99 : max;
  if (!(h.hi > 0)) h.hi = 1;
  h.bin_width = h.hi / bins;
  h.counts.assign(static_cast<size_t>(bins), 0);
  for (double v : finite) {
    if (v > h.hi) {
      h.above++;
      continue;
    }
    const auto bin = std::min<size_t>(static_cast<size_t>(v / h.bin_width), h.counts.size() - 1);
    h.counts[bin]++;
  }
  return h;
}

BoxStats box_stats(const std::vector<double>& values) {
  BoxStats b;
  std::vector<double> sorted;
  for (double v : values)
    if (std::isfinite(v)) sorted.push_back(v);
  b.n = sorted.size();
  if (sorted.empty()) return b;
  std::sort(sorted.begin(), sorted.end());
  b.p25 = model::percentile(sorted, 25);
  b.p50 = model::percentile(sorted, 50);
  b.p75 = model::percentile(sorted, 75);
  b.mean = model::mean(sorted);
  b.sd = model::stddev(sorted);
  const double reach = 1.5 * (b.p75 - b.p25);
  b.whisker_lo = *std::lower_bound(sorted.begin(), sorted.end(), b.p25 - reach);
  b.whisker_hi = *(std::upper_bound(sorted.begin(), sorted.end(), b.p75 + reach) - 1);
  return b;
}

std::string ttft_input_measure(const Report& r) {
  if (r.ttft_fit.valid) return r.ttft_fit.input == "tokens" ? "tokens" : "bytes";
  for (const RequestRow& row : r.request_rows)
    if (row.input_tokens >= 0) return "tokens";
  return "bytes";
}

std::vector<TtftPoint> ttft_points(const Report& r) {
  const bool tokens = ttft_input_measure(r) == "tokens";
  std::vector<TtftPoint> points;
  for (const RequestRow& row : r.request_rows) {
    if (!std::isfinite(row.ttft_ms)) continue;
    if (tokens && row.input_tokens < 0) continue;
    const double input = tokens ? static_cast<double>(row.input_tokens) : static_cast<double>(row.input_bytes);
    points.push_back({input, row.ttft_ms, &row});
  }
  return points;
}

double fitted_ttft_ms(const TtftFit& fit, double input) {
  if (!fit.valid || input < 0) return kNaN;
  return fit.a * std::sqrt(input) + fit.b;
}

std::string no_fit_reason(const Report& r) {
  if (r.ttft_fit.valid) return "";
  std::set<double> inputs;
  for (const TtftPoint& p : ttft_points(r)) inputs.insert(p.input);
  if (inputs.size() < 3) return "No fit: it needs at least 3 requests with distinct input lengths.";
  return "No fit was computed for this report.";
}

std::vector<InputBucket> ttft_by_input(const Report& r, size_t buckets) {
  std::vector<TtftPoint> points = ttft_points(r);
  std::sort(points.begin(), points.end(), [](const TtftPoint& a, const TtftPoint& b) { return a.input < b.input; });
  buckets = std::min(buckets, points.size());
  std::vector<InputBucket> out;
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * points.size() / buckets;
    const size_t end = (b + 1) * points.size() / buckets;
    std::vector<double> ttfts, inputs;
    for (size_t i = begin; i < end; ++i) {
      ttfts.push_back(points[i].ttft_ms);
      inputs.push_back(points[i].input);
    }
    out.push_back({points[begin].input, points[end - 1].input, end - begin, model::percentile(ttfts, 50),
                   model::percentile(ttfts, 90), fitted_ttft_ms(r.ttft_fit, model::median(inputs))});
  }
  return out;
}

CauseTotals outlier_totals(const Report& r, WindowKind kind) {
  CauseTotals totals;
  std::array<double, kCauseCount> ms_by_cause{};
  for (const Outlier& o : r.outliers) {
    if (o.kind != kind || !std::isfinite(o.duration_ms)) continue;
    totals.windows++;
    totals.total_ms += o.duration_ms;
    for (const CauseTime& c : o.causes)
      if (std::isfinite(c.ms) && c.ms > 0) ms_by_cause[static_cast<size_t>(c.cause)] += c.ms;
  }
  totals.causes = with_unexplained(ms_by_cause, totals.total_ms);
  return totals;
}

CauseTotals typical_totals(const Report& r) {
  CauseTotals totals;
  totals.windows = r.typical.windows;
  totals.total_ms = std::isfinite(r.typical.total_ms) ? r.typical.total_ms : 0;
  std::array<double, kCauseCount> ms_by_cause{};
  for (const CauseTime& c : r.typical.causes)
    if (std::isfinite(c.ms) && c.ms > 0) ms_by_cause[static_cast<size_t>(c.cause)] += c.ms;
  totals.causes = with_unexplained(ms_by_cause, totals.total_ms);
  return totals;
}

Cause dominant_cause(const Outlier& o) {
  const CauseTime* best = nullptr;
  for (const CauseTime& c : o.causes)
    if (std::isfinite(c.ms) && (!best || c.ms > best->ms)) best = &c;
  return best ? best->cause : Cause::kUnknown;
}

std::string causes_summary(const std::vector<CauseTime>& causes) {
  std::string out;
  for (const CauseTime& c : causes)
    out += fmt::format("{}{} {} ms", out.empty() ? "" : ", ", cause_id(c.cause), ms_cell(c.ms));
  return out;
}

std::string activity_text(const std::vector<model::ActivityStep>& steps) {
  std::string out;
  for (const auto& s : steps) {
    out += fmt::format("{}{} {} ms", out.empty() ? "" : ", ", s.what, ms_cell(s.ms));
    if (s.times > 1) out += fmt::format(" ({} times)", s.times);
  }
  return out;
}

std::string evidence_summary(const nlohmann::json& evidence) {
  if (!evidence.is_object()) return "";
  std::string out;
  for (const auto& [key, value] : evidence.items())
    out += (out.empty() ? "" : ", ") + key + "=" + json_scalar_text(value);
  return out;
}

std::vector<std::string> CauseBreakdown::headers() const {
  return {"cause", "meaning", fmt::format("slow first tokens ({}), ms", first_tokens.windows),
          fmt::format("slow gaps ({}), ms", gaps.windows),
          fmt::format("typical token ({} gaps), ms each", typical.windows)};
}

std::vector<std::string> CauseBreakdown::cells(Cause cause) const {
  auto share = [&](const CauseTotals& totals, double per) -> std::string {
    for (const CauseTime& c : totals.causes)
      if (c.cause == cause) return fmt::format("{} ({:.0f}%)", ms_cell(c.ms / per), c.share * 100);
    return "";
  };
  const double per_token = typical.windows ? static_cast<double>(typical.windows) : 1;
  const CauseInfo& info = cause_info(cause);
  return {std::string(info.id), std::string(info.label), share(first_tokens, 1), share(gaps, 1),
          share(typical, per_token)};
}

CauseBreakdown cause_breakdown(const Report& r) {
  CauseBreakdown b{outlier_totals(r, WindowKind::kTtft), outlier_totals(r, WindowKind::kTpot), typical_totals(r), {}};
  for (const CauseTotals* t : {&b.first_tokens, &b.gaps, &b.typical})
    for (const CauseTime& c : t->causes)
      if (std::find(b.causes.begin(), b.causes.end(), c.cause) == b.causes.end()) b.causes.push_back(c.cause);
  std::stable_sort(b.causes.begin(), b.causes.end(), [](Cause x, Cause y) { return cause_rank(x) < cause_rank(y); });
  return b;
}

std::vector<const Outlier*> outliers_by_duration(const Report& r) {
  std::vector<const Outlier*> sorted;
  for (const Outlier& o : r.outliers) sorted.push_back(&o);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Outlier* a, const Outlier* b) { return a->duration_ms > b->duration_ms; });
  return sorted;
}

const std::vector<std::string>& distribution_headers() {
  static const std::vector<std::string> headers{"ms", "n", "p50", "p90", "p95", "p99", "max", "mean", "sd"};
  return headers;
}

std::vector<std::string> distribution_cells(const std::string& name, const model::Distribution& d) {
  return {name,           std::to_string(d.count), ms_cell(d.p50),  ms_cell(d.p90),   ms_cell(d.p95),
          ms_cell(d.p99), ms_cell(d.max),          ms_cell(d.mean), ms_cell(d.stddev)};
}

const std::vector<std::string>& request_headers() {
  static const std::vector<std::string> headers{"id",     "start s",     "in bytes", "in tokens", "TTFT ms",
                                                "tokens", "TPOT median", "TPOT sd",  "TPOT max",  "note"};
  return headers;
}

std::vector<std::string> request_cells(const Report& r, const RequestRow& row) {
  return {row.id,
          fmt::format("{:.3f}", seconds_after_start(r, row.start_mono_ns)),
          std::to_string(row.input_bytes),
          row.input_tokens >= 0 ? std::to_string(row.input_tokens) : "-",
          ms_cell(row.ttft_ms),
          std::to_string(row.tokens),
          ms_cell(row.tpot_median_ms),
          ms_cell(row.tpot_stddev_ms),
          ms_cell(row.tpot_max_ms),
          row.complete ? "" : "incomplete"};
}

const std::vector<std::string>& length_headers() {
  static const std::vector<std::string> headers{"per request", "n", "P25", "P50", "P75"};
  return headers;
}

std::vector<std::vector<std::string>> length_rows(const Report& r) {
  const LengthStats s = length_stats(r);
  std::vector<std::vector<std::string>> rows;
  const std::pair<const char*, const Quartiles*> named[] = {
      {"input, bytes", &s.input_bytes}, {"input, tokens", &s.input_tokens}, {"output, tokens", &s.output_tokens}};
  for (const auto& [name, q] : named)
    if (q->n) rows.push_back({name, std::to_string(q->n), ms_cell(q->p25), ms_cell(q->p50), ms_cell(q->p75)});
  return rows;
}

TimelineSample sample_timeline(const Report& r, size_t token_budget, size_t max_lanes) {
  TimelineSample sample;
  std::set<std::string> with_outlier;
  for (const Outlier& o : r.outliers) with_outlier.insert(o.request);
  std::vector<size_t> kept, others;
  uint64_t kept_tokens = 0, other_tokens = 0;
  for (size_t i = 0; i < r.request_rows.size(); ++i) {
    const RequestRow& row = r.request_rows[i];
    if (with_outlier.count(row.id)) {
      kept.push_back(i);
      kept_tokens += row.token_mono_ns.size();
    } else {
      others.push_back(i);
      other_tokens += row.token_mono_ns.size();
    }
  }
  sample.outlier_requests = kept.size();
  const bool fits = kept_tokens + other_tokens <= token_budget && r.request_rows.size() <= max_lanes;
  size_t take = others.size();
  if (!fits) {
    // Evenly spaced others, as many as the lanes and the token budget left allow.
    const size_t lanes_left = max_lanes > kept.size() ? max_lanes - kept.size() : 0;
    const uint64_t tokens_left = token_budget > kept_tokens ? token_budget - kept_tokens : 0;
    const uint64_t tokens_per_other = others.empty() ? 1 : std::max<uint64_t>(1, other_tokens / others.size());
    take = std::min<size_t>({others.size(), lanes_left, static_cast<size_t>(tokens_left / tokens_per_other)});
  }
  sample.downsampled = take < others.size();
  uint64_t tokens = kept_tokens;
  for (size_t k = 0; k < take; ++k) {
    const size_t i = others[k * others.size() / take];
    kept.push_back(i);
    tokens += r.request_rows[i].token_mono_ns.size();
  }
  std::sort(kept.begin(), kept.end());
  sample.rows = std::move(kept);
  sample.token_stride = std::max<size_t>(1, (tokens + token_budget - 1) / std::max<size_t>(1, token_budget));
  return sample;
}

std::string agent_cost_text(const AgentCost& cost) {
  if (!cost.known) return "";
  std::string share;
  if (cost.recording_ms > 0) share = fmt::format(" ({:.3f}% of one CPU)", cost.cpu_percent_of_one_cpu());
  std::string rate;
  if (cost.recording_ms >= util::kMsPerSec)
    rate = fmt::format(", {:.1f} a second", static_cast<double>(cost.wakeups) * util::kMsPerSec / cost.recording_ms);
  return fmt::format(
      "the agent attached in {:.0f} ms ({:.0f} ms of CPU), then used {:.1f} ms of CPU in {:.1f} s "
      "of recording{}, woke {} times{}; stopping took {:.0f} ms of CPU; peak memory {:.0f} MiB",
      cost.attach_ms, cost.attach_cpu_ms, cost.cpu_ms, util::ms_to_s(cost.recording_ms), share, cost.wakeups, rate,
      cost.stop_cpu_ms, cost.peak_rss_mib);
}

uint64_t lost_events(const Report& r) {
  uint64_t lost = 0;
  for (const ProbeStatus& p : r.probes) lost += p.lost;
  return lost;
}

std::vector<EnvRow> environment_rows(const Report& r) {
  std::vector<EnvRow> rows;
  rows.push_back({"target", target_text(r.target)});
  if (!r.target.exe.empty()) rows.push_back({"server executable", r.target.exe});
  const nlohmann::json& host = r.host;
  std::vector<std::string> shown;
  if (host.is_object()) {
    for (const auto& [key, label] : known_host_keys()) {
      auto it = host.find(key);
      if (it == host.end()) continue;
      shown.push_back(key);
      flatten(*it, label, rows);
    }
    for (const auto& [key, value] : host.items())
      if (std::find(shown.begin(), shown.end(), key) == shown.end()) flatten(value, key, rows);
  }
  rows.push_back({"trace window", (r.start_unix_ns ? utc_time(r.start_unix_ns) : std::string("start unknown")) +
                                      fmt::format(", {:.1f} s", util::ms_to_s(r.duration_ms))});
  rows.push_back({"token times from", r.token_source == "sse"
                                          ? "SSE data events or gRPC messages in the target's socket sends"
                                          : r.token_source});
  rows.push_back({"probes", probes_text(r)});
  rows.push_back({"lost events", std::to_string(lost_events(r))});
  flatten(r.window_facts, "during the window", rows);
  rows.push_back({"latency-doctor", LD_VERSION});
  return rows;
}

// ---- definitions and the client join

CellTable definitions_table(const Report& r) {
  CellTable t;
  t.headers = {"definition", "per", "side", "n", "p50", "p90", "p99", "mean", "known as"};
  t.numeric = {false, false, false, true, true, true, true, true, false};
  const model::Definitions& d = r.definitions;
  for (const model::DefinitionInfo& info : model::kDefinitions) {
    bool first = true;
    for (const auto& [side, set] :
         {std::pair<const char*, const model::DefinitionSet*>{"server", &d.server}, {"client", &d.client}}) {
      if (!set->known) continue;
      const model::Distribution& v = (*set)[info.definition];
      t.rows.push_back({first ? std::string(info.label) : "", first ? std::string(info.population) : "", side,
                        std::to_string(v.count), ms_cell(v.p50), ms_cell(v.p90), ms_cell(v.p99), ms_cell(v.mean),
                        first ? std::string(info.known_as) : ""});
      first = false;
    }
  }
  return t;
}

std::string client_join_caption(const Report& r) {
  const model::ClientJoin& c = r.client_join;
  const std::string name = c.source.rfind("jsonl:", 0) == 0 ? c.source.substr(6) : c.source;
  return fmt::format("token log {}, joined {}: {} of {} requests", name,
                     c.method == "client_port" ? "by client port" : "by time", c.matched, c.client_requests);
}

CellTable client_join_summary_table(const Report& r) {
  const model::ClientJoin& c = r.client_join;
  CellTable t;
  t.headers = {"ms", "n", "p50", "p90", "p99", "max", "what"};
  t.numeric = {false, true, true, true, true, true, false};
  auto add = [&](const char* name, const model::Distribution& v, const char* what) {
    t.rows.push_back(
        {name, std::to_string(v.count), ms_cell(v.p50), ms_cell(v.p90), ms_cell(v.p99), ms_cell(v.max), what});
  };
  add("client TTFT", c.client_ttft_ms, "request sent -> first token received");
  add("server TTFT", c.server_ttft_ms, "request read -> first token sent");
  add("before server read", c.before_server_ms, "connect, proxy, listen backlog");
  add("after server send", c.after_server_ms, "network, proxy buffering");
  add("client token gap", c.client_gap_ms, "");
  add("server token gap", c.server_gap_ms, "");
  add("delivery lag", c.lag_ms, "per token: received - sent");
  return t;
}

std::string client_join_note(const Report& r) {
  const model::ClientJoin& c = r.client_join;
  auto pct = [](double share) {
    return std::isfinite(share) ? fmt::format("{:.0f}%", share * 100.0) : std::string("-");
  };
  return fmt::format(
      "outside the server: {} of the client's TTFT at the median; tokens that arrived together "
      "although sent apart: {} of {} ({})",
      pct(c.outside_ttft_share), c.bunched_tokens, c.gaps, pct(c.bunched_share));
}

CellTable client_join_requests_table(const Report& r, size_t max_rows) {
  CellTable t;
  t.headers = {"client", "server",      "ttft client", "ttft server", "before",
               "after",  "gap p50 c/s", "lag p50",     "lag max",     "together"};
  t.numeric = {false, false, true, true, true, true, true, true, true, true};
  const auto& requests = r.client_join.requests;
  for (size_t i = 0; i < std::min(requests.size(), max_rows); ++i) {
    const model::JoinedRequest& j = requests[i];
    t.rows.push_back({j.client_id, j.server_id, ms_cell(j.client_ttft_ms), ms_cell(j.server_ttft_ms),
                      ms_cell(j.before_server_ms), ms_cell(j.after_server_ms),
                      ms_cell(j.client_gap_p50_ms) + "/" + ms_cell(j.server_gap_p50_ms), ms_cell(j.lag_p50_ms),
                      ms_cell(j.lag_max_ms), std::to_string(j.bunched_tokens)});
  }
  return t;
}

std::string followed_text(const model::Target& target) {
  std::string out;
  for (const model::FollowedProcess& f : target.followed)
    out += fmt::format("{}{} {} ({})", out.empty() ? "" : "; ", f.pid, f.comm, f.why);
  return out;
}

std::string evidence_size_text(const model::Finding& finding) {
  std::string out;
  for (const model::EvidenceCount& c : finding.evidence_size) {
    std::string unit = c.unit;
    std::replace(unit.begin(), unit.end(), '_', ' ');
    out += fmt::format("{}{:.0f} {}", out.empty() ? "" : ", ", std::floor(std::max(0.0, c.count)), unit);
  }
  return out;
}

}  // namespace ld::report
