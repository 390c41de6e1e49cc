// JSON rendering of schema latency-doctor/report/v1. Keys named by the contract come first, in
// the contract's order (render_json); additions are extra keys, never renamed ones.
#include <cmath>

#include <nlohmann/json.hpp>

#include "report/report.hpp"

namespace ld::report {

using namespace model;
namespace {

constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

// Milliseconds to 3 decimals (microsecond resolution is all the clock pairs justify);
// NaN/inf -> null.
template <class J>
J ms_value(double ms) {
  if (!std::isfinite(ms)) return J(nullptr);
  return J(std::round(ms * 1000.0) / 1000.0);
}

// Convert between nlohmann::json flavours (evidence and facts are plain json; the pretty
// output keeps insertion order). Through text: these blobs are small.
template <class J>
J convert(const nlohmann::json& value, J fallback) {
  if (value.is_null()) return fallback;
  return J::parse(value.dump(-1, ' ', false, kReplaceInvalidUtf8));
}

template <class J>
J target_json(const Target& target) {
  J j = J::object();
  j["pids"] = J::array();
  for (int pid : target.pids) j["pids"].push_back(pid);
  j["comm"] = target.comm;
  j["exe"] = target.exe;
  if (!target.followed.empty()) {  // extension: the processes taken in with the target, and why
    j["followed"] = J::array();
    for (const auto& f : target.followed) j["followed"].push_back({{"pid", f.pid}, {"comm", f.comm}, {"why", f.why}});
  }
  return j;
}

template <class J>
J ttft_json(const model::Distribution& d) {
  J j = J::object();
  j["p50"] = ms_value<J>(d.p50);
  j["p90"] = ms_value<J>(d.p90);
  j["p95"] = ms_value<J>(d.p95);
  j["p99"] = ms_value<J>(d.p99);
  j["max"] = ms_value<J>(d.max);
  return j;
}

template <class J>
J tpot_json(const model::Distribution& d) {
  J j = J::object();
  j["p50"] = ms_value<J>(d.p50);
  j["p90"] = ms_value<J>(d.p90);
  j["p99"] = ms_value<J>(d.p99);
  j["mean"] = ms_value<J>(d.mean);
  j["stddev"] = ms_value<J>(d.stddev);
  j["max"] = ms_value<J>(d.max);
  return j;
}

template <class J>
J thresholds_json(const Report& report) {
  J j = J::object();
  j["ttft_stuck_ms"] = report.thresholds.ttft_stuck_ms;
  j["ttft_stuck_requests"] = report.over_thresholds.ttft_stuck;
  j["tpot_broken_ms"] = report.thresholds.gap_broken_ms;
  j["tpot_broken_gaps"] = report.over_thresholds.gaps_broken;
  j["tpot_spike_ms"] = report.thresholds.gap_spike_ms;
  j["tpot_spike_gaps"] = report.over_thresholds.gaps_spike;
  return j;
}

// A bin's lower edge to 6 significant digits: enough to find the bin again (LogHistogram::add_bin).
double bin_edge(int bin) {
  const double low = LogHistogram::low_ms(bin);
  if (low <= 0) return 0;
  const double scale = std::pow(10.0, 5 - std::floor(std::log10(low)));
  return std::round(low * scale) / scale;
}

template <class J>
J histogram_json(const LogHistogram& h) {
  J bins = J::array();
  for (const auto& [bin, count] : h.bins()) bins.push_back(J::array({bin_edge(bin), count}));
  return bins;
}

// [[lower edge ms, count], ...] in 2%-wide log bins: the distributions behind the percentiles,
// for `diff` and plots, without every sample.
template <class J>
J histograms_json(const Report& report) {
  J j = J::object();
  j["bin_ratio"] = LogHistogram::kRatio;
  j["ttft_ms"] = histogram_json<J>(report.ttft_hist);
  j["tpot_ms"] = histogram_json<J>(report.tpot_hist);
  return j;
}

template <class J>
J summary_json(const Report& report) {
  J j = J::object();
  j["requests"] = report.requests;
  j["tokens"] = report.tokens;
  j["ttft_ms"] = ttft_json<J>(report.ttft_ms);
  j["tpot_ms"] = tpot_json<J>(report.tpot_ms);
  // Extensions.
  j["gaps"] = report.gaps;
  j["non_streaming_requests"] = report.non_streaming_requests;
  j["partial_requests"] = report.partial_requests;
  j["in_flight_requests"] = report.in_flight_requests;
  j["connections"] = report.connections;
  j["multi_event_sends"] = report.multi_event_sends;
  J syscalls = J::object();
  for (const auto& [name, count] : report.send_syscalls) syscalls[name] = count;
  j["token_send_syscalls"] = syscalls;
  const model::TcpSends& t = report.tcp_sends;
  j["tcp_token_sends"] = J{{"read", t.token_sends}, {"nagle", t.nagle},       {"held", t.held},
                           {"corked", t.corked},    {"requests", t.requests}, {"nagle_requests", t.nagle_requests}};
  j["thresholds"] = thresholds_json<J>(report);
  j["histograms"] = histograms_json<J>(report);
  return j;
}

template <class J>
J request_json(const RequestRow& row) {
  J j = J::object();
  j["id"] = row.id;
  j["start_unix_ns"] = row.start_unix_ns;
  j["input_bytes"] = row.input_bytes;
  j["ttft_ms"] = ms_value<J>(row.ttft_ms);
  j["tokens"] = row.tokens;
  j["tpot_median_ms"] = ms_value<J>(row.tpot_median_ms);
  j["tpot_stddev_ms"] = ms_value<J>(row.tpot_stddev_ms);
  // Extensions.
  if (row.input_tokens >= 0) j["input_tokens"] = row.input_tokens;
  j["tpot_max_ms"] = ms_value<J>(row.tpot_max_ms);
  j["complete"] = row.complete;
  return j;
}

template <class J>
J probe_json(const ProbeStatus& probe) {
  J j = J::object();
  j["name"] = probe.name;
  j["status"] = std::string(probe.status_name());
  j["reason"] = probe.reason;
  j["events"] = probe.events;
  j["lost"] = probe.lost;
  return j;
}

// What the agent cost while recording (model::AgentCost): an extension of report/v1.
template <class J>
J agent_json(const AgentCost& cost) {
  J j = J::object();
  j["attach_ms"] = cost.attach_ms;
  j["attach_cpu_ms"] = cost.attach_cpu_ms;
  j["recording_ms"] = cost.recording_ms;
  j["cpu_ms"] = cost.cpu_ms;
  j["cpu_percent_of_one_cpu"] = cost.cpu_percent_of_one_cpu();
  j["wakeups"] = cost.wakeups;
  j["stop_cpu_ms"] = cost.stop_cpu_ms;
  j["peak_rss_mib"] = cost.peak_rss_mib;
  return j;
}

template <class J>
J cause_json(const CauseTime& c) {
  J j = J::object();
  j["cause"] = model::cause_id(c.cause);
  j["ms"] = ms_value<J>(c.ms);
  j["share"] = std::isfinite(c.share) ? J(std::round(c.share * 1000.0) / 1000.0) : J(nullptr);
  j["evidence"] = convert<J>(c.evidence, J::object());
  return j;
}

template <class J>
J causes_json(const std::vector<CauseTime>& causes) {
  J j = J::array();
  for (const CauseTime& c : causes) j.push_back(cause_json<J>(c));
  return j;
}

// What a window's samples ran (model::FrameShare); absent from windows without user frames.
template <class J>
J frames_json(const std::vector<model::FrameShare>& frames) {
  J j = J::array();
  for (const model::FrameShare& f : frames) {
    J x = J::object();
    x["function"] = f.function;
    x["where"] = f.where;
    x["runtime"] = f.python ? "python" : "native";
    x["share"] = f.share;
    x["typical_share"] = f.typical_share;
    x["samples"] = f.samples;
    j.push_back(x);
  }
  return j;
}

// The outliers' samples as folded stacks (model::FlameProfile), root first.
template <class J>
J flame_json(const model::FlameProfile& flame) {
  J j = J::object();
  j["samples"] = flame.samples;
  j["stacks"] = J::array();
  for (const model::FlameStack& s : flame.stacks) {
    J x = J::object();
    x["frames"] = s.frames;
    x["runtime"] = s.python ? "python" : "native";
    x["samples"] = s.samples;
    j["stacks"].push_back(std::move(x));
  }
  return j;
}

template <class J>
J outlier_json(const Outlier& o, int64_t realtime_minus_monotonic_ns) {
  J j = J::object();
  j["kind"] = std::string(window_kind_name(o.kind));
  j["request"] = o.request;
  j["token_index"] = o.token_index;
  j["start_unix_ns"] = o.start_unix_ns;
  j["duration_ms"] = ms_value<J>(o.duration_ms);
  j["baseline_ms"] = ms_value<J>(o.baseline_ms);
  j["causes"] = causes_json<J>(o.causes);
  // Extensions.
  j["end_unix_ns"] = mono_to_unix_ns(o.end_mono_ns, realtime_minus_monotonic_ns);
  j["tid"] = o.tid;
  j["facts"] = convert<J>(o.facts, J::object());
  J activity = J::array();
  for (const auto& s : o.activity) {
    J step = {{"what", s.what}, {"ms", ms_value<J>(s.ms)}};
    if (s.times > 1) step["times"] = s.times;
    activity.push_back(std::move(step));
  }
  j["activity"] = activity;
  if (!o.frames.empty()) {
    j["frames"] = frames_json<J>(o.frames);
    j["frame_samples"] = o.frame_samples;
  }
  return j;
}

template <class J>
J finding_json(const Finding& f) {
  J j = J::object();
  j["rule"] = f.rule;
  j["cause"] = model::cause_id(f.cause);
  j["severity"] = f.severity;
  j["title"] = f.title;
  j["evidence"] = f.evidence;
  j["remedy"] = f.remedy;
  j["sysctl"] = J::array();
  for (const SysctlRec& s : f.sysctl) {
    J rec = J::object();
    rec["key"] = s.key;
    rec["value"] = s.value;
    rec["current"] = s.current;
    if (!s.caveat.empty()) rec["caveat"] = s.caveat;  // extension
    j["sysctl"].push_back(rec);
  }
  j["verify"] = f.verify;
  if (!f.evidence_size.empty()) {  // extension: what the finding rests on
    J size = J::object();
    for (const model::EvidenceCount& c : f.evidence_size) size[c.unit] = static_cast<uint64_t>(std::max(0.0, c.count));
    j["evidence_size"] = size;
  }
  if (!f.capped_from.empty()) j["capped_from"] = f.capped_from;  // extension: kept at info for too little evidence
  return j;
}

template <class J>
J attribution_json(const Report& report) {
  J j = J::object();
  j["attributed"] = report.attributed;
  J config = J::object();
  config["tpot_mad_k"] = report.outlier_config.tpot_mad_k;
  config["tpot_floor_ms"] = report.outlier_config.tpot_floor_ms;
  config["ttft_margin"] = report.outlier_config.ttft_margin;
  config["ttft_floor_ms"] = report.outlier_config.ttft_floor_ms;
  j["outlier_config"] = config;
  J fit = J::object();
  fit["valid"] = report.ttft_fit.valid;
  fit["input"] = report.ttft_fit.input;
  fit["a"] = report.ttft_fit.a;
  fit["b"] = report.ttft_fit.b;
  fit["r2"] = report.ttft_fit.r2;
  fit["n"] = report.ttft_fit.n;
  j["ttft_fit"] = fit;
  J typical = J::object();
  typical["windows"] = report.typical.windows;
  typical["total_ms"] = ms_value<J>(report.typical.total_ms);
  typical["causes"] = causes_json<J>(report.typical.causes);
  if (!report.typical.frames.empty()) {
    typical["frames"] = frames_json<J>(report.typical.frames);
    typical["frame_samples"] = report.typical.frame_samples;
  }
  j["typical"] = typical;
  J periodic = J::object();
  periodic["found"] = report.periodicity.found;
  if (report.periodicity.found) {
    periodic["period_s"] = report.periodicity.period_s;
    periodic["outliers"] = report.periodicity.outliers;
    periodic["coincides"] = report.periodicity.coincides;
  }
  j["periodicity"] = periodic;
  return j;
}

// Every number of a distribution (the definitions and the client join).
template <class J>
J distribution_json(const model::Distribution& d) {
  J j = J::object();
  j["n"] = d.count;
  j["p50"] = ms_value<J>(d.p50);
  j["p90"] = ms_value<J>(d.p90);
  j["p95"] = ms_value<J>(d.p95);
  j["p99"] = ms_value<J>(d.p99);
  j["max"] = ms_value<J>(d.max);
  j["mean"] = ms_value<J>(d.mean);
  j["stddev"] = ms_value<J>(d.stddev);
  return j;
}

// The definitions side by side (model/definitions.hpp): one object per definition, with what it
// means, what the common tools call it, and its numbers for each side measured.
template <class J>
J definitions_json(const model::Definitions& defs) {
  J j = J::object();
  j["token"] = "one SSE data event; a chunk is one send of the server, or the tokens a client received at one instant";
  J sides = J::object();
  auto side = [&](const char* name, const model::DefinitionSet& set, const char* source) {
    if (!set.known) return;
    J s = J::object();
    s["source"] = source;
    s["requests"] = set.requests;
    s["tokens"] = set.tokens;
    s["chunks"] = set.chunks;
    sides[name] = s;
  };
  side("server", defs.server, "the target's socket sends");
  side("client", defs.client, "the token log");
  j["sides"] = sides;
  for (const model::DefinitionInfo& info : model::kDefinitions) {
    J d = J::object();
    d["meaning"] = info.meaning;
    d["per"] = info.population;
    d["same_as"] = info.same_as;
    if (defs.server.known) d["server"] = distribution_json<J>(defs.server[info.definition]);
    if (defs.client.known) d["client"] = distribution_json<J>(defs.client[info.definition]);
    j[std::string(info.id)] = d;
  }
  return j;
}

template <class J>
J share_value(double share) {
  return std::isfinite(share) ? J(std::round(share * 1000.0) / 1000.0) : J(nullptr);
}

template <class J>
J joined_request_json(const model::JoinedRequest& r) {
  J j = J::object();
  j["client_request"] = r.client_id;
  j["server_request"] = r.server_id;
  j["new_connection"] = r.new_connection;
  j["client_ttft_ms"] = ms_value<J>(r.client_ttft_ms);
  j["server_ttft_ms"] = ms_value<J>(r.server_ttft_ms);
  j["before_server_ms"] = ms_value<J>(r.before_server_ms);
  j["after_server_ms"] = ms_value<J>(r.after_server_ms);
  j["client_e2e_ms"] = ms_value<J>(r.client_e2e_ms);
  j["server_e2e_ms"] = ms_value<J>(r.server_e2e_ms);
  j["client_tokens"] = r.client_tokens;
  j["server_tokens"] = r.server_tokens;
  j["client_gap_p50_ms"] = ms_value<J>(r.client_gap_p50_ms);
  j["server_gap_p50_ms"] = ms_value<J>(r.server_gap_p50_ms);
  j["client_gap_max_ms"] = ms_value<J>(r.client_gap_max_ms);
  j["server_gap_max_ms"] = ms_value<J>(r.server_gap_max_ms);
  j["lag_p50_ms"] = ms_value<J>(r.lag_p50_ms);
  j["lag_max_ms"] = ms_value<J>(r.lag_max_ms);
  j["bunched_tokens"] = r.bunched_tokens;
  return j;
}

// A client's token log joined per request to the server's (model/client_join.hpp).
template <class J>
J client_join_json(const model::ClientJoin& c) {
  J j = J::object();
  j["source"] = c.source;
  j["method"] = c.method;
  j["client_requests"] = c.client_requests;
  j["server_requests"] = c.server_requests;
  j["matched"] = c.matched;
  j["client_ttft_ms"] = distribution_json<J>(c.client_ttft_ms);
  j["server_ttft_ms"] = distribution_json<J>(c.server_ttft_ms);
  j["before_server_ms"] = distribution_json<J>(c.before_server_ms);
  j["after_server_ms"] = distribution_json<J>(c.after_server_ms);
  j["outside_ttft_ms"] = distribution_json<J>(c.outside_ttft_ms);
  j["outside_ttft_share"] = share_value<J>(c.outside_ttft_share);
  j["client_gap_ms"] = distribution_json<J>(c.client_gap_ms);
  j["server_gap_ms"] = distribution_json<J>(c.server_gap_ms);
  j["lag_ms"] = distribution_json<J>(c.lag_ms);
  j["held_lag_ms"] = distribution_json<J>(c.held_lag_ms);
  j["other_lag_ms"] = distribution_json<J>(c.other_lag_ms);
  j["gaps"] = c.gaps;
  j["bunched_tokens"] = c.bunched_tokens;
  j["bunched_share"] = share_value<J>(c.bunched_share);
  j["requests"] = J::array();
  for (const model::JoinedRequest& r : c.requests) j["requests"].push_back(joined_request_json<J>(r));
  return j;
}

template <class J>
J report_json(const Report& report) {
  J j = J::object();
  j["schema"] = kReportSchema;
  j["target"] = target_json<J>(report.target);
  J window = J::object();
  window["start_unix_ns"] = report.start_unix_ns;
  window["duration_ms"] = report.duration_ms;
  j["window"] = window;
  j["summary"] = summary_json<J>(report);
  j["requests"] = J::array();
  for (const RequestRow& row : report.request_rows) j["requests"].push_back(request_json<J>(row));
  j["outliers"] = J::array();
  for (const Outlier& o : report.outliers)
    j["outliers"].push_back(outlier_json<J>(o, report.realtime_minus_monotonic_ns));
  j["findings"] = J::array();
  for (const Finding& f : report.findings) j["findings"].push_back(finding_json<J>(f));
  j["probes"] = J::array();
  for (const ProbeStatus& probe : report.probes) j["probes"].push_back(probe_json<J>(probe));
  // Extensions.
  if (report.agent.known) j["agent"] = agent_json<J>(report.agent);
  j["token_source"] = report.token_source;
  j["attribution"] = attribution_json<J>(report);
  if (!report.outlier_flame.empty()) j["outlier_flame"] = flame_json<J>(report.outlier_flame);
  j["definitions"] = definitions_json<J>(report.definitions);
  if (report.client_join.present) j["client_join"] = client_join_json<J>(report.client_join);
  j["host"] = convert<J>(report.host, J::object());
  j["warnings"] = J::array();
  for (const std::string& w : report.warnings) j["warnings"].push_back(w);
  return j;
}

}  // namespace

nlohmann::json to_json(const Report& report) { return report_json<nlohmann::json>(report); }

nlohmann::ordered_json finding_to_json(const Finding& finding) { return finding_json<nlohmann::ordered_json>(finding); }

std::string render_json(const Report& report) {
  // Strings from token logs and targets (ids, comm) are not guaranteed UTF-8: replace, never throw.
  return report_json<nlohmann::ordered_json>(report).dump(2, ' ', false, kReplaceInvalidUtf8) + "\n";
}

}  // namespace ld::report
