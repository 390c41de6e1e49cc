// The Perfetto export: Chrome trace-event JSON ("JSON Object Format"), which ui.perfetto.dev
// and chrome://tracing open as is.
//   - a process per target tgid, a thread track per target thread;
//   - thread states as complete slices ("X", cat "sched"): running, runnable, blocked (named by
//     what the thread waited in), from report.tracks when the analysis kept them;
//   - every token emission as an instant ("i") on the thread that sent it;
//   - requests and outliers as async slices ("b"/"e"), outliers carrying their causes.
// Times are CLOCK_MONOTONIC microseconds, the clock of perf and ftrace traces of the same host.
// Events are written one at a time, so a million tokens do not build a million-node JSON tree.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/cause.hpp"
#include "report/report.hpp"
#include "report/report_view.hpp"
#include "util/time.hpp"

namespace ld::report {

using namespace model;
namespace {

using nlohmann::json;

inline constexpr const char* kPerfettoSchema = "latency-doctor/perfetto/v1";
// Tokens whose sending thread is unknown (token logs) go on a track of their own.
constexpr uint32_t kUnknownThreadTid = 0x7fff0000;

using ThreadSet = std::set<std::pair<uint32_t, uint32_t>>;  // (pid, tid) of the tracks that carry events

using util::ns_to_us;

class EventWriter {
 public:
  void add(const json& event) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += event.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  std::string finish(const json& other_data) {
    // traceEvents first: the layout every trace viewer's streaming reader expects.
    return "{\"traceEvents\":[" + out_ + "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" +
           other_data.dump(-1, ' ', false, json::error_handler_t::replace) + "}\n";
  }

 private:
  std::string out_;
  bool first_ = true;
};

// Which process each thread belongs to: the thread tracks know; socket request ids start with
// the tgid ("4242:c1#3"); a single-process target is the last resort.
class ProcessMap {
 public:
  explicit ProcessMap(const Report& r) {
    if (r.tracks)
      for (const auto& t : r.tracks->threads) tgid_of_tid_[t.tid] = t.tgid;
    if (!r.target.pids.empty()) fallback_ = static_cast<uint32_t>(r.target.pids.front());
  }
  uint32_t tgid(uint32_t tid, const std::string& request_id) const {
    if (auto it = tgid_of_tid_.find(tid); it != tgid_of_tid_.end()) return it->second;
    if (uint32_t from_id = tgid_in_id(request_id)) return from_id;
    return fallback_;
  }

 private:
  static uint32_t tgid_in_id(const std::string& id) {
    const size_t colon = id.find(':');
    if (colon == 0 || colon == std::string::npos || colon > 9) return 0;
    for (size_t i = 0; i < colon; ++i)
      if (!std::isdigit(static_cast<unsigned char>(id[i]))) return 0;
    return static_cast<uint32_t>(std::stoul(id.substr(0, colon)));
  }
  std::map<uint32_t, uint32_t> tgid_of_tid_;
  uint32_t fallback_ = 0;
};

json metadata(const char* name, uint32_t pid, uint32_t tid, const json& args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

void write_names(EventWriter& w, const Report& r, const ThreadSet& threads) {
  std::set<uint32_t> pids;
  for (int pid : r.target.pids) pids.insert(static_cast<uint32_t>(pid));
  for (const auto& [pid, tid] : threads) pids.insert(pid);
  for (uint32_t pid : pids) {
    std::string name = r.target.comm.empty() ? "target" : r.target.comm;
    w.add(metadata("process_name", pid, 0, {{"name", fmt::format("{} {}", name, pid)}}));
  }
  std::map<uint32_t, std::string> names;
  if (r.tracks)
    for (const auto& t : r.tracks->threads) names[t.tid] = t.name;
  for (const auto& [pid, tid] : threads) {
    std::string name = tid == kUnknownThreadTid ? "tokens (sending thread unknown)" : names[tid];
    if (name.empty()) name = tid == pid ? "main thread" : "thread";
    w.add(metadata("thread_name", pid, tid,
                   {{"name", fmt::format("{} {}", name, tid == kUnknownThreadTid ? pid : tid)}}));
  }
}

void write_thread_states(EventWriter& w, const model::ThreadTracks& tracks) {
  for (const auto& t : tracks.threads) {
    for (const auto& s : t.slices) {
      const std::string state = model::thread_state_name(s.state);
      json ev = {{"ph", "X"},
                 {"cat", "sched"},
                 {"pid", t.tgid},
                 {"tid", t.tid},
                 {"ts", ns_to_us(s.start_ns)},
                 {"dur", ns_to_us(s.end_ns - s.start_ns)}};
      // The slice's name is what the UI prints on it: say what a blocked thread waited in.
      ev["name"] =
          s.state == model::ThreadState::kBlocked && !s.detail.empty() ? s.detail.substr(0, s.detail.find(';')) : state;
      ev["args"] = {{"state", state}, {"detail", s.detail}};
      w.add(ev);
    }
  }
}

void write_tokens(EventWriter& w, const Report& r, const ProcessMap& processes, ThreadSet& threads) {
  for (const RequestRow& row : r.request_rows) {
    for (size_t i = 0; i < row.token_mono_ns.size(); ++i) {
      const uint32_t sender = i < row.token_tid.size() ? row.token_tid[i] : 0;
      const uint32_t tid = sender ? sender : kUnknownThreadTid;
      const uint32_t pid = processes.tgid(sender, row.id);
      threads.insert({pid, tid});
      w.add({{"ph", "i"},
             {"s", "t"},
             {"cat", "token"},
             {"name", i == 0 ? "first token" : "token"},
             {"pid", pid},
             {"tid", tid},
             {"ts", ns_to_us(row.token_mono_ns[i])},
             {"args", {{"request", row.id}, {"index", i}}}});
    }
  }
}

// An async slice: a begin and an end event sharing cat and id.
void write_async(EventWriter& w, const std::string& cat, const std::string& id, const std::string& name, uint32_t pid,
                 uint32_t tid, uint64_t start_ns, uint64_t end_ns, const json& args) {
  w.add({{"ph", "b"},
         {"cat", cat},
         {"id", id},
         {"name", name},
         {"pid", pid},
         {"tid", tid},
         {"ts", ns_to_us(start_ns)},
         {"args", args}});
  w.add({{"ph", "e"},
         {"cat", cat},
         {"id", id},
         {"name", name},
         {"pid", pid},
         {"tid", tid},
         {"ts", ns_to_us(std::max(start_ns, end_ns))}});
}

void write_requests(EventWriter& w, const Report& r, const ProcessMap& processes) {
  for (size_t k = 0; k < r.request_rows.size(); ++k) {
    const RequestRow& row = r.request_rows[k];
    if (row.token_mono_ns.empty()) continue;
    const uint32_t sender = row.token_tid.empty() ? 0 : row.token_tid.front();
    const uint32_t pid = processes.tgid(sender, row.id);
    write_async(w, "request", fmt::format("request-{}", k), "request", pid, sender ? sender : kUnknownThreadTid,
                row.start_mono_ns, row.token_mono_ns.back(),
                {{"request", row.id},
                 {"ttft_ms", row.ttft_ms},
                 {"tokens", row.tokens},
                 {"input_bytes", row.input_bytes},
                 {"tpot_median_ms", std::isfinite(row.tpot_median_ms) ? json(row.tpot_median_ms) : json(nullptr)}});
  }
}

void write_outliers(EventWriter& w, const Report& r, const ProcessMap& processes) {
  for (size_t k = 0; k < r.outliers.size(); ++k) {
    const Outlier& o = r.outliers[k];
    json causes = json::array();
    for (const CauseTime& c : o.causes)
      causes.push_back({{"cause", cause_id(c.cause)}, {"ms", c.ms}, {"share", c.share}, {"evidence", c.evidence}});
    const Cause main_cause = dominant_cause(o);
    // One name per kind and main cause: the UI makes a track per async name.
    const std::string name =
        (o.kind == WindowKind::kTtft ? "slow first token: " : "slow gap: ") + std::string(cause_id(main_cause));
    write_async(w, "outlier", fmt::format("outlier-{}", k), name, processes.tgid(o.tid, o.request),
                o.tid ? o.tid : kUnknownThreadTid, o.start_mono_ns, o.end_mono_ns,
                {{"kind", std::string(window_kind_name(o.kind))},
                 {"request", o.request},
                 {"token_index", o.token_index},
                 {"duration_ms", o.duration_ms},
                 {"baseline_ms", o.baseline_ms},
                 {"causes", causes},
                 {"summary", causes_summary(o.causes)},
                 {"colour", cause_info(main_cause).color}});
  }
}

json other_data(const Report& r) {
  json data = {{"schema", kPerfettoSchema},
               {"generator", "latency-doctor " LD_VERSION},
               {"clock", "CLOCK_MONOTONIC, microseconds"},
               {"realtime_minus_monotonic_ns", r.realtime_minus_monotonic_ns},
               {"window_start_unix_ns", r.start_unix_ns},
               {"window_duration_ms", r.duration_ms},
               {"target", {{"pids", r.target.pids}, {"comm", r.target.comm}, {"exe", r.target.exe}}},
               {"requests", r.requests},
               {"tokens", r.tokens},
               {"outliers", r.outliers.size()}};
  if (!r.tracks) {
    data["thread_states"] = "not in this export: the analysis did not keep thread tracks";
  } else if (r.tracks->threads.empty()) {
    data["thread_states"] = "none: the trace has no scheduler records (record with the sched probe)";
  } else {
    data["thread_states"] = "from the sched probe's off-CPU intervals; short waits are folded into running";
  }
  return data;
}

}  // namespace

std::string render_perfetto(const Report& report) {
  const ProcessMap processes(report);
  ThreadSet threads;
  EventWriter events;
  if (report.tracks) {
    for (const auto& t : report.tracks->threads) threads.insert({t.tgid, t.tid});
    write_thread_states(events, *report.tracks);
  }
  write_tokens(events, report, processes, threads);
  write_requests(events, report, processes);
  write_outliers(events, report, processes);
  for (const Outlier& o : report.outliers)
    threads.insert({processes.tgid(o.tid, o.request), o.tid ? o.tid : kUnknownThreadTid});
  write_names(events, report, threads);
  return events.finish(other_data(report));
}

}  // namespace ld::report
