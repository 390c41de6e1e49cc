#include "trace/trace_header.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ld::trace {
namespace {

using nlohmann::json;

// obj[key], or null when obj is no object or has no such key (never throws: nlohmann's value()
// throws on a mistyped field).
const json& member(const json& obj, const char* key) {
  static const json absent;
  if (!obj.is_object()) return absent;
  const auto it = obj.find(key);
  return it == obj.end() ? absent : *it;
}

// Each field read with the JSON type it should have; one of another type counts as absent and
// is remembered under `where` ("header clock.start_mono_ns"): it costs that field, not the rest.
class Fields {
 public:
  explicit Fields(std::vector<std::string>& mistyped) : mistyped_(mistyped) {}

  std::optional<uint64_t> u64(const json& obj, const char* key, const char* where) {
    const json& v = member(obj, key);
    // A count made in memory may be a signed integer; a parsed one is unsigned.
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
    return mistyped(v, where, std::optional<uint64_t>{});
  }
  uint64_t u64(const json& obj, const char* key, uint64_t fallback, const char* where) {
    return u64(obj, key, where).value_or(fallback);
  }
  int64_t i64(const json& obj, const char* key, int64_t fallback, const char* where) {
    const json& v = member(obj, key);
    return v.is_number_integer() ? v.get<int64_t>() : mistyped(v, where, fallback);
  }
  double number(const json& obj, const char* key, double fallback, const char* where) {
    const json& v = member(obj, key);
    return v.is_number() ? v.get<double>() : mistyped(v, where, fallback);
  }
  bool boolean(const json& obj, const char* key, bool fallback, const char* where) {
    const json& v = member(obj, key);
    return v.is_boolean() ? v.get<bool>() : mistyped(v, where, fallback);
  }
  std::string str(const json& obj, const char* key, const std::string& fallback, const char* where) {
    const json& v = member(obj, key);
    return v.is_string() ? v.get<std::string>() : mistyped(v, where, fallback);
  }
  json object(const json& obj, const char* key, const char* where) {
    const json& v = member(obj, key);
    return v.is_object() ? v : mistyped(v, where, json::object());
  }
  std::vector<std::string> strings(const json& obj, const char* key, const char* where) {
    const json& v = member(obj, key);
    std::vector<std::string> out;
    if (!v.is_array()) return mistyped(v, where, out);
    for (const auto& item : v)
      if (item.is_string()) out.push_back(item.get<std::string>());
    return out;
  }

 private:
  template <typename T>
  T mistyped(const json& v, const char* where, T fallback) {
    if (!v.is_null() && std::find(mistyped_.begin(), mistyped_.end(), where) == mistyped_.end())
      mistyped_.emplace_back(where);
    return fallback;
  }
  std::vector<std::string>& mistyped_;
};

json probes_to_json(const std::vector<model::ProbeStatus>& probes) {
  json list = json::array();
  for (const auto& p : probes)
    list.push_back({{"name", p.name},
                    {"status", std::string(p.status_name())},
                    {"reason", p.reason},
                    {"events", p.events},
                    {"lost", p.lost}});
  return list;
}

std::vector<model::ProbeStatus> probes_from(const json& list, Fields& fields) {
  std::vector<model::ProbeStatus> probes;
  if (!list.is_array()) return probes;
  for (const auto& p : list) {
    if (!p.is_object()) continue;
    // One field after another, in the order `mistyped` names them.
    model::ProbeStatus probe;
    probe.name = fields.str(p, "name", "?", "probes[].name");
    std::string status = fields.str(p, "status", "?", "probes[].status");
    if (auto known = model::parse_probe_state(status)) probe.status = *known;
    else probe.other_status = std::move(status);  // "?" when absent, as the reports show it
    probe.reason = fields.str(p, "reason", "", "probes[].reason");
    probe.events = fields.u64(p, "events", 0, "probes[].events");
    probe.lost = fields.u64(p, "lost", 0, "probes[].lost");
    probes.push_back(std::move(probe));
  }
  return probes;
}

// The trailer's "agent". All or nothing: a missing, mistyped or absurd part leaves the cost
// unknown, which every report says rather than show a wrong figure.
model::AgentCost agent_cost_from(const json& agent) {
  if (!agent.is_object()) return {};
  auto number = [&](const char* key, double& out) {
    const json& f = member(agent, key);
    if (!f.is_number()) return false;
    out = f.get<double>();
    return std::isfinite(out) && out >= 0 && out < 1e15;
  };
  model::AgentCost cost;
  double wakeups = 0;
  if (!number("attach_ms", cost.attach_ms) || !number("attach_cpu_ms", cost.attach_cpu_ms) ||
      !number("recording_ms", cost.recording_ms) || !number("cpu_ms", cost.cpu_ms) || !number("wakeups", wakeups) ||
      !number("stop_cpu_ms", cost.stop_cpu_ms) || !number("peak_rss_mib", cost.peak_rss_mib))
    return {};
  cost.wakeups = static_cast<uint64_t>(wakeups);
  cost.known = true;
  return cost;
}

json agent_cost_to_json(const model::AgentCost& cost) {
  if (!cost.known) return json::object();
  return {{"attach_ms", cost.attach_ms},       {"attach_cpu_ms", cost.attach_cpu_ms},
          {"recording_ms", cost.recording_ms}, {"cpu_ms", cost.cpu_ms},
          {"wakeups", cost.wakeups},           {"stop_cpu_ms", cost.stop_cpu_ms},
          {"peak_rss_mib", cost.peak_rss_mib}};
}

json followed_to_json(const std::vector<model::FollowedProcess>& followed) {
  json out = json::array();
  for (const auto& f : followed) out.push_back({{"pid", f.pid}, {"comm", f.comm}, {"why", f.why}});
  return out;
}

std::vector<model::FollowedProcess> followed_from(const json& followed, Fields& fields) {
  std::vector<model::FollowedProcess> out;
  if (!followed.is_array()) return out;
  for (const auto& f : followed) {
    if (!f.is_object()) continue;
    const int64_t pid = fields.i64(f, "pid", 0, "header target.followed[].pid");
    if (pid <= 0 || pid > INT32_MAX) continue;
    out.push_back({static_cast<int>(pid), fields.str(f, "comm", "", "header target.followed[].comm"),
                   fields.str(f, "why", "", "header target.followed[].why")});
  }
  return out;
}

}  // namespace

json to_json(const TraceHeader& h) {
  json pids = json::array();
  for (int pid : h.target.pids) pids.push_back(pid);
  json clock = {{"realtime_minus_monotonic_ns", h.realtime_minus_monotonic_ns}};
  if (h.start_mono_ns) clock["start_mono_ns"] = *h.start_mono_ns;
  json out = {
      {"agent", {{"name", "latency-doctor"}, {"version", h.agent_version}}},
      {"record_layout_version", h.record_layout_version},
      {"created_unix_ns", h.created_unix_ns},
      {"clock", clock},
      {"target",
       {{"pids", pids},
        {"comm", h.target.comm},
        {"exe", h.target.exe},
        {"start_mono_ns", h.target_start_mono_ns},
        {"children", h.children},
        {"followed", followed_to_json(h.target.followed)}}},
      {"host", h.host},
      {"token_source", h.token_source},
      {"duration_requested_ms", h.duration_requested_ms},
      {"probes_requested", h.probes_requested},
  };
  if (!h.probes.empty()) out["probes"] = probes_to_json(h.probes);
  return out;
}

json to_json(const TraceTrailer& t) {
  json out = {{"stop_reason", std::string(t.stop_reason_name())},
              {"attach_ms", t.attach_ms},
              {"probes", probes_to_json(t.probes)},
              {"agent", agent_cost_to_json(t.agent)}};
  if (t.end_mono_ns) out["end_mono_ns"] = *t.end_mono_ns;
  return out;
}

std::string TraceMeta::mistyped_warning() const {
  if (mistyped.empty()) return "";
  return fmt::format("trace field(s) of the wrong type ignored: {}", fmt::join(mistyped, ", "));
}

TraceMeta read_meta(const json& header, const json& trailer) {
  TraceMeta meta;
  Fields fields(meta.mistyped);
  TraceHeader& h = meta.header;
  TraceTrailer& t = meta.trailer;

  const json clock = fields.object(header, "clock", "header clock");
  h.realtime_minus_monotonic_ns =
      fields.i64(clock, "realtime_minus_monotonic_ns", 0, "header clock.realtime_minus_monotonic_ns");
  h.start_mono_ns = fields.u64(clock, "start_mono_ns", "header clock.start_mono_ns");
  t.present = trailer.is_object() && trailer.contains("end_mono_ns");
  if (t.present) t.end_mono_ns = fields.u64(trailer, "end_mono_ns", "trailer end_mono_ns");

  const json target = fields.object(header, "target", "header target");
  if (const json& pids = member(target, "pids"); pids.is_array())
    for (const auto& pid : pids)
      if (pid.is_number_integer()) h.target.pids.push_back(pid.get<int>());
  h.target.comm = fields.str(target, "comm", "", "header target.comm");
  h.target.exe = fields.str(target, "exe", "", "header target.exe");
  h.target.followed = followed_from(member(target, "followed"), fields);

  h.probes = probes_from(member(header, "probes"), fields);
  t.probes = probes_from(member(trailer, "probes"), fields);
  t.agent = agent_cost_from(member(trailer, "agent"));

  h.host = fields.object(header, "host", "header host");
  h.target_start_mono_ns = fields.u64(target, "start_mono_ns", 0, "header target.start_mono_ns");
  h.machine = fields.str(h.host, "machine", "x86_64", "header host.machine");
  h.token_source = fields.str(header, "token_source", "sse", "header token_source");

  const json agent = fields.object(header, "agent", "header agent");
  h.agent_version = fields.str(agent, "version", "", "header agent.version");
  h.created_unix_ns = fields.u64(header, "created_unix_ns", 0, "header created_unix_ns");
  h.record_layout_version = static_cast<uint32_t>(
      std::min<uint64_t>(fields.u64(header, "record_layout_version", 1, "header record_layout_version"), UINT32_MAX));
  h.children = fields.boolean(target, "children", false, "header target.children");
  h.duration_requested_ms = fields.u64(header, "duration_requested_ms", 0, "header duration_requested_ms");
  h.probes_requested = fields.strings(header, "probes_requested", "header probes_requested");
  std::string stop_reason = fields.str(trailer, "stop_reason", "", "trailer stop_reason");
  if (auto known = parse_stop_reason(stop_reason)) t.stop_reason = *known;
  else {
    t.stop_reason = StopReason::kOther;
    t.other_stop_reason = std::move(stop_reason);
  }
  t.attach_ms = fields.number(trailer, "attach_ms", 0, "trailer attach_ms");
  return meta;
}

}  // namespace ld::trace
