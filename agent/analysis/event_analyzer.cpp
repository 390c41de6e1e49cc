#include "analysis/event_analyzer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/attribution.hpp"
#include "analysis/record_view.hpp"
#include "analysis/summary.hpp"
#include "events.h"
#include "tokens/token_log.hpp"

namespace ld::analysis {

using namespace model;
namespace {

// The header's and trailer's fields, each read with the JSON type it should have. A field of
// another type (a hand-edited or damaged trace) counts as absent and is named in one warning:
// it costs that field, never the report (nlohmann's value() throws on a mistyped field).
// obj[key], or null when obj is no object or has no such key (never throws).
const nlohmann::json& member(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json absent;
  if (!obj.is_object()) return absent;
  const auto it = obj.find(key);
  return it == obj.end() ? absent : *it;
}

class TraceFields {
 public:

  // `where` names the field in the warning ("header clock.start_mono_ns").
  uint64_t u64(const nlohmann::json& obj, const char* key, uint64_t fallback, const char* where) {
    const nlohmann::json& v = member(obj, key);
    // A trailer made in memory (attach) may hold a count as a signed integer; a parsed one as
    // unsigned.
    const bool whole = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    return whole ? v.get<uint64_t>() : mistyped(v, where, fallback);
  }
  int64_t i64(const nlohmann::json& obj, const char* key, int64_t fallback, const char* where) {
    const nlohmann::json& v = member(obj, key);
    return v.is_number_integer() ? v.get<int64_t>() : mistyped(v, where, fallback);
  }
  std::string str(const nlohmann::json& obj, const char* key, const std::string& fallback, const char* where) {
    const nlohmann::json& v = member(obj, key);
    return v.is_string() ? v.get<std::string>() : mistyped(v, where, fallback);
  }
  nlohmann::json object(const nlohmann::json& obj, const char* key, const char* where) {
    const nlohmann::json& v = member(obj, key);
    return v.is_object() ? v : mistyped(v, where, nlohmann::json::object());
  }

  void warn(std::vector<std::string>& warnings) const {
    if (!mistyped_.empty())
      warnings.push_back(fmt::format("trace field(s) of the wrong type ignored: {}", fmt::join(mistyped_, ", ")));
  }

 private:
  template <typename T>
  T mistyped(const nlohmann::json& v, const char* where, T fallback) {
    if (!v.is_null() && std::find(mistyped_.begin(), mistyped_.end(), where) == mistyped_.end())
      mistyped_.emplace_back(where);
    return fallback;
  }
  std::vector<std::string> mistyped_;
};

model::Target target_from_header(const nlohmann::json& header, TraceFields& fields) {
  model::Target target;
  const nlohmann::json t = fields.object(header, "target", "header target");
  if (t.contains("pids") && t["pids"].is_array())
    for (const auto& pid : t["pids"])
      if (pid.is_number_integer()) target.pids.push_back(pid.get<int>());
  target.comm = fields.str(t, "comm", "", "header target.comm");
  target.exe = fields.str(t, "exe", "", "header target.exe");
  return target;
}

std::vector<model::ProbeStatus> probes_from(const nlohmann::json& list, TraceFields& fields) {
  std::vector<model::ProbeStatus> probes;
  if (!list.is_array()) return probes;
  for (const auto& p : list) {
    if (!p.is_object()) continue;
    probes.push_back({fields.str(p, "name", "?", "probes[].name"), fields.str(p, "status", "?", "probes[].status"),
                      fields.str(p, "reason", "", "probes[].reason"), fields.u64(p, "events", 0, "probes[].events"),
                      fields.u64(p, "lost", 0, "probes[].lost")});
  }
  return probes;
}

// The trailer's "agent" (probes/recorder.cpp). A missing or mistyped field leaves the cost
// unknown; it never fails the report.
model::AgentCost agent_cost_from(const nlohmann::json& trailer) {
  const nlohmann::json& agent = member(trailer, "agent");
  if (!agent.is_object()) return {};
  auto number = [&](const char* key, double& out) {
    const nlohmann::json& f = member(agent, key);
    if (!f.is_number()) return false;
    out = f.get<double>();
    return std::isfinite(out) && out >= 0 && out < 1e15;
  };
  model::AgentCost cost;
  double wakeups = 0;
  if (!number("attach_ms", cost.attach_ms) || !number("attach_cpu_ms", cost.attach_cpu_ms) ||
      !number("recording_ms", cost.recording_ms) || !number("cpu_ms", cost.cpu_ms) ||
      !number("wakeups", wakeups) || !number("stop_cpu_ms", cost.stop_cpu_ms) ||
      !number("peak_rss_mib", cost.peak_rss_mib))
    return {};
  cost.wakeups = static_cast<uint64_t>(wakeups);
  cost.known = true;
  return cost;
}

// Token-log requests outside the trace window belong to another run: leave them out.
void keep_requests_in_window(Timeline& timeline, uint64_t start, uint64_t end,
                             std::vector<std::string>& warnings) {
  auto outside = [&](const Request& r) { return r.start_ns < start || (end && r.start_ns > end); };
  auto removed = std::count_if(timeline.requests.begin(), timeline.requests.end(), outside);
  if (removed == 0) return;
  timeline.requests.erase(std::remove_if(timeline.requests.begin(), timeline.requests.end(), outside),
                          timeline.requests.end());
  warnings.push_back(fmt::format("{} request(s) of the token log started outside the trace "
                                 "window and were left out",
                                 removed));
}

}  // namespace

void EventAnalyzer::on_record(const ld_hdr& rec, size_t size) {
  records_++;
  if (tracks_) tracks_->on_record(rec, size);
  if (!first_ts_ || rec.ts_ns < first_ts_) first_ts_ = rec.ts_ns;
  last_ts_ = std::max(last_ts_, rec.ts_ns);
  switch (rec.type) {
    case LD_EV_SOCK_IO:
      if (auto* io = record_as<ld_sock_io>(rec, size)) {
        if (io->dir == LD_DIR_RECV && io->cls == LD_PC_HTTP_REQUEST) request_lines_++;
        sockets_.add(*io);
      } else {
        malformed_++;
      }
      break;
    case LD_EV_SOCK_CLOSE:
      if (auto* c = record_as<ld_sock_close>(rec, size)) sockets_.add(*c); else malformed_++;
      break;
    case LD_EV_TASK_EXIT:
      if (auto* e = record_as<ld_task_exit>(rec, size)) sockets_.add(*e); else malformed_++;
      break;
    default:
      if (rec.type >= LD_EV_TYPE_MAX) unknown_types_++;
      else if (!evidence_.add(rec, size)) malformed_++;
  }
}

model::Report EventAnalyzer::finish(const nlohmann::json& header, const nlohmann::json& trailer,
                                     const std::string& token_source,
                                     std::vector<std::string> warnings) {
  TraceFields fields;
  const nlohmann::json clock = fields.object(header, "clock", "header clock");
  const int64_t offset = fields.i64(clock, "realtime_minus_monotonic_ns", 0, "header clock.realtime_minus_monotonic_ns");
  const uint64_t start = fields.u64(clock, "start_mono_ns", first_ts_, "header clock.start_mono_ns");
  uint64_t end = last_ts_;
  if (trailer.is_object() && trailer.contains("end_mono_ns"))
    end = fields.u64(trailer, "end_mono_ns", last_ts_, "trailer end_mono_ns");
  else
    warnings.push_back("the trace has no trailer (was the agent killed?): the window ends at the "
                       "last event and probe counters are unknown");
  if (malformed_) warnings.push_back(fmt::format("{} malformed event record(s) skipped", malformed_));
  if (unknown_types_)
    warnings.push_back(fmt::format("{} event record(s) of types this version does not know "
                                   "were skipped (trace from a newer latency-doctor?)",
                                   unknown_types_));

  Timeline timeline = sockets_.finish();
  Timeline server_timeline;  // kept when a token log replaces it: attribution maps onto it
  bool from_log = false;
  std::string used_source = token_source;
  if (token_source.rfind("jsonl:", 0) == 0) {
    try {
      auto log = tokens::read_token_log(token_source.substr(6), offset);
      for (auto& w : log.warnings) warnings.push_back(std::move(w));
      server_timeline = std::move(timeline);
      timeline = std::move(log.timeline);
      from_log = true;
      keep_requests_in_window(timeline, start, end, warnings);
    } catch (const std::exception& e) {
      // The recording is worth more than the token log: report from socket sends instead.
      warnings.push_back(fmt::format("{}; token times taken from socket sends instead", e.what()));
      used_source = "sse";
    }
  }

  auto report = analysis::build_report(timeline, target_from_header(header, fields), start, std::max(start, end),
                                     offset);
  report.token_source = used_source;
  const nlohmann::json& trailer_probes = member(trailer, "probes");
  report.probes = probes_from(trailer_probes.is_array() ? trailer_probes : member(header, "probes"), fields);
  report.agent = agent_cost_from(trailer);
  report.host = fields.object(header, "host", "header host");
  evidence_.finish();
  std::set<uint32_t> tgids;
  for (int pid : report.target.pids) tgids.insert(static_cast<uint32_t>(pid));
  const uint64_t target_start =
      fields.u64(member(header, "target"), "start_mono_ns", 0, "header target.start_mono_ns");
  attribute(report, timeline, from_log ? &server_timeline : nullptr, evidence_, tgids, target_start);
  if (!report.attributed && !report.outliers.empty())
    warnings.push_back("no evidence probe ran (only sock?): outliers are found but their causes are unknown; "
                       "record with --probes all");
  if (tracks_) {
    // Syscall numbers are read with the traced host's table.
    auto tracks = tracks_->finish(fields.str(report.host, "machine", "x86_64", "header host.machine"));
    for (auto& w : tracks.warnings) warnings.push_back(std::move(w));
    report.tracks = std::make_shared<const ThreadTracks>(std::move(tracks));
  }
  fields.warn(warnings);
  for (auto& w : warnings) report.warnings.push_back(std::move(w));
  return report;
}

}  // namespace ld::analysis
