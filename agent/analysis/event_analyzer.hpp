// From a recorded event stream (live or read back from a trace) to a report.
// attach and report both go through this class, so a trace read back gives the report the
// live run gave.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "analysis/thread_tracks.hpp"
#include "analysis/timeline.hpp"
#include "analysis/tls_join.hpp"
#include "model/report.hpp"
#include "trace/trace_header.hpp"

struct ld_hdr;

namespace ld::analysis {

class EventAnalyzer {
 public:
  EventAnalyzer() = default;
  // Its TLS join calls back into it: it stays where it was made.
  EventAnalyzer(const EventAnalyzer&) = delete;
  EventAnalyzer& operator=(const EventAnalyzer&) = delete;

  // `size` is the record's byte length (hdr.size); records too short for their type are
  // counted as malformed and skipped, unknown types are counted and skipped.
  void on_record(const ld_hdr& rec, size_t size);

  // Opt-in (costs memory per scheduler record): finish() also fills report.tracks, the
  // per-thread states for the Perfetto export. Call before the first record.
  void keep_thread_tracks() { tracks_.emplace(); }

  uint64_t records() const { return records_; }
  uint64_t request_lines_seen() const { return request_lines_; }  // live progress only

  // token_source: "sse" (socket timeline) or "jsonl:PATH" (read now, aligned with the
  // trace header's clock offset). client_source: "" or "jsonl:PATH", a client's token log
  // joined per request to the server's (the report's times stay the server's); without it a
  // jsonl token_source is also the client side. Consumes the analyzer.
  model::Report finish(const trace::TraceMeta& meta, const std::string& token_source, std::vector<std::string> warnings,
                       const std::string& client_source = "");
  // The same from the header and trailer objects of a trace file (trace::read_meta).
  model::Report finish(const nlohmann::json& header, const nlohmann::json& trailer, const std::string& token_source,
                       std::vector<std::string> warnings, const std::string& client_source = "");

 private:
  void add_sock_io(const ld_sock_io& io);

  SocketTimelineBuilder sockets_;
  // Socket IO passes through it: TLS plaintext classes given to their ciphertext.
  TlsJoin tls_{[this](const ld_sock_io& io) { add_sock_io(io); }, [this](const ld_h2_frames& h2) { sockets_.add(h2); }};
  EvidenceStore evidence_;
  std::optional<ThreadTrackBuilder> tracks_;
  uint64_t records_ = 0;
  uint64_t malformed_ = 0;
  uint64_t unknown_types_ = 0;
  uint64_t request_lines_ = 0;
  uint64_t first_ts_ = 0;
  uint64_t last_ts_ = 0;
};

}  // namespace ld::analysis
