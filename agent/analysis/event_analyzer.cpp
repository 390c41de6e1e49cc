#include "analysis/event_analyzer.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/attribution.hpp"
#include "analysis/client_join.hpp"
#include "analysis/definitions.hpp"
#include "analysis/frames.hpp"
#include "analysis/record_view.hpp"
#include "analysis/summary.hpp"
#include "events.h"
#include "tokens/token_log.hpp"
#include "trace/trace_header.hpp"

namespace ld::analysis {

using namespace model;
namespace {

// Token-log requests outside the trace window belong to another run: leave them out.
void keep_requests_in_window(Timeline& timeline, uint64_t start, uint64_t end, std::vector<std::string>& warnings) {
  auto outside = [&](const Request& r) { return r.start_ns < start || (end && r.start_ns > end); };
  auto removed = std::count_if(timeline.requests.begin(), timeline.requests.end(), outside);
  if (removed == 0) return;
  timeline.requests.erase(std::remove_if(timeline.requests.begin(), timeline.requests.end(), outside),
                          timeline.requests.end());
  warnings.push_back(
      fmt::format("{} request(s) of the token log started outside the trace "
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
      if (auto* io = record_as<ld_sock_io>(rec, size)) tls_.on_sock(*io);
      else malformed_++;
      break;
    case LD_EV_H2_FRAMES:
      if (auto* h2 = record_as<ld_h2_frames>(rec, size)) {
        if (h2->tls) tls_.on_tls_frames(*h2);
        else sockets_.add(*h2);
      } else {
        malformed_++;
      }
      break;
    case LD_EV_TLS_IO:
      if (auto* tls = record_as<ld_tls_io>(rec, size)) tls_.on_tls(*tls);
      else malformed_++;
      break;
    case LD_EV_SOCK_CLOSE:
      if (auto* c = record_as<ld_sock_close>(rec, size)) {
        tls_.on_close(c->sock_id);
        sockets_.add(*c);
      } else {
        malformed_++;
      }
      break;
    case LD_EV_TASK_EXIT:
      if (auto* e = record_as<ld_task_exit>(rec, size)) sockets_.add(*e);
      else malformed_++;
      break;
    default:
      if (rec.type >= LD_EV_TYPE_MAX) unknown_types_++;
      else if (!evidence_.add(rec, size)) malformed_++;
  }
}

void EventAnalyzer::add_sock_io(const ld_sock_io& io) {
  if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) request_lines_++;
  sockets_.add(io);
}

model::Report EventAnalyzer::finish(const nlohmann::json& header, const nlohmann::json& trailer,
                                    const std::string& token_source, std::vector<std::string> warnings,
                                    const std::string& client_source) {
  return finish(trace::read_meta(header, trailer), token_source, std::move(warnings), client_source);
}

model::Report EventAnalyzer::finish(const trace::TraceMeta& meta, const std::string& token_source,
                                    std::vector<std::string> warnings, const std::string& client_source) {
  const trace::TraceHeader& header = meta.header;
  const int64_t offset = header.realtime_minus_monotonic_ns;
  const uint64_t start = header.start_mono_ns.value_or(first_ts_);
  const uint64_t end = meta.trailer.end_mono_ns.value_or(last_ts_);
  if (!meta.trailer.present)
    warnings.push_back(
        "the trace has no trailer (was the agent killed?): the window ends at the "
        "last event and probe counters are unknown");
  if (header.record_layout_version > LD_RECORD_LAYOUT_VERSION)
    warnings.push_back(
        fmt::format("the trace's records are of layout {}, this latency-doctor reads layout {}: "
                    "read it with the version that recorded it ({})",
                    header.record_layout_version, LD_RECORD_LAYOUT_VERSION,
                    header.agent_version.empty() ? "unknown" : header.agent_version));
  if (malformed_) warnings.push_back(fmt::format("{} malformed event record(s) skipped", malformed_));
  if (unknown_types_)
    warnings.push_back(
        fmt::format("{} event record(s) of types this version does not know "
                    "were skipped (trace from a newer latency-doctor?)",
                    unknown_types_));

  tls_.finish();
  Timeline timeline = sockets_.finish();
  if (timeline.h2_unseen_frames)
    warnings.push_back(
        fmt::format("{} HTTP/2 send(s) or receive(s) held frames past the first 512 bytes, which the kernel "
                    "reads: tokens in those frames are missing",
                    timeline.h2_unseen_frames));
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

  // The client side: a client's token log joined to the server's requests.
  std::optional<Timeline> client_log;
  std::string client_name;
  if (client_source.rfind("jsonl:", 0) == 0) {
    try {
      auto log = tokens::read_token_log(client_source.substr(6), offset);
      for (auto& w : log.warnings) warnings.push_back(std::move(w));
      client_log = std::move(log.timeline);
      client_name = client_source;
      keep_requests_in_window(*client_log, start, end, warnings);
    } catch (const std::exception& e) {
      warnings.push_back(fmt::format("{}; the report has no client side", e.what()));
    }
  }
  const Timeline& server_side = from_log ? server_timeline : timeline;
  const Timeline* client_side = client_log ? &*client_log : from_log ? &timeline : nullptr;
  if (client_side && !client_log) client_name = used_source;

  auto report = build_report(timeline, header.target, start, std::max(start, end), offset);
  if (!server_side.requests.empty()) report.definitions.server = measure_definitions(server_side);
  if (client_side && !client_side->requests.empty()) {
    report.definitions.client = measure_definitions(*client_side);
    report.client_join = join_client(*client_side, server_side, client_name, warnings);
  }
  report.token_source = used_source;
  report.probes = meta.trailer.probes.empty() ? header.probes : meta.trailer.probes;
  report.agent = meta.trailer.agent;
  report.host = header.host;
  evidence_.finish();
  std::set<uint32_t> tgids;
  for (int pid : report.target.pids) tgids.insert(static_cast<uint32_t>(pid));
  attribute(report, timeline, from_log ? &server_timeline : nullptr, evidence_, tgids, header.target_start_mono_ns);
  attach_frames(report, evidence_);
  if (!report.attributed && !report.outliers.empty())
    warnings.push_back(
        "no evidence probe ran (only sock?): outliers are found but their causes are unknown; "
        "record with --probes all");
  if (tracks_) {
    // Syscall numbers are read with the traced host's table.
    auto tracks = tracks_->finish(header.machine);
    for (auto& w : tracks.warnings) warnings.push_back(std::move(w));
    report.tracks = std::make_shared<const ThreadTracks>(std::move(tracks));
  }
  if (auto mistyped = meta.mistyped_warning(); !mistyped.empty()) warnings.push_back(std::move(mistyped));
  for (auto& w : warnings) report.warnings.push_back(std::move(w));
  return report;
}

}  // namespace ld::analysis
