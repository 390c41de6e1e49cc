// The flight recorder of serve: the last minutes of trace on disk, as .ldtrace segments
// (the chunk format of `record`: each chunk CRC-checked, written when full or flushed), so a
// kill -9 loses at most what arrived since the last flush (one read interval) and every
// segment reads back with `latency-doctor report` up to its last whole chunk.
//
// DIR/flight-<unix ns of its start>.ldtrace: one segment per --flight-segment (or an eighth of
// --flight-max), the oldest removed past --flight-keep or --flight-max. dump() cuts a time range
// out of them into one trace (the `dump` command and the automatic captures).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/report.hpp"
#include "util/time.hpp"

struct ld_hdr;

namespace ld::trace {
class TraceWriter;
}

namespace ld::serve {

struct FlightOptions {
  std::string dir = "/var/lib/latency-doctor";
  uint64_t keep_ms = 15 * 60 * util::kMsPerSec;  // segments older than this go
  uint64_t max_bytes = 256ull << 20;             // and the oldest go past this much disk
  uint64_t segment_ms = 60 * util::kMsPerSec;    // a new segment this often (or at max_bytes / 8)
};

// The kernel's boot id: monotonic times of two segments compare only within one boot.
std::string current_boot_id();

struct DumpStats {
  uint64_t records = 0;
  uint64_t segments = 0;  // segments that gave records
  std::vector<std::string> warnings;
};

// The trailer a closed segment or a cut-out trace gets: the probes' table at `end_ns`.
nlohmann::json segment_trailer(const std::vector<model::ProbeStatus>& probes, uint64_t end_ns);

class FlightRecorder {
 public:
  // Creates DIR (0700) if needed and removes what an earlier run left half-done (.dump-*).
  // Throws std::runtime_error with a one-line reason.
  explicit FlightRecorder(FlightOptions options);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Opens the first segment with this trace header (trace::to_json of the session's header).
  void start(const nlohmann::json& header, uint64_t now_mono_ns);
  // The header the next segments get (targets changed).
  void set_header(const nlohmann::json& header);
  void append(const ld_hdr& rec, size_t size);
  // Writes what is buffered (a chunk) now.
  void flush();
  // Starts a new segment when the current one is old or large enough (the closed one gets
  // `trailer`), and removes the segments past the limits. Returns a one-line problem or "".
  std::string tick(uint64_t now_mono_ns, const nlohmann::json& trailer);
  // Flushes and closes the current segment with its trailer.
  void finish(const nlohmann::json& trailer);

  // Writes the records of [since, until] (CLOCK_MONOTONIC ns) of every segment of this boot
  // into a new trace at `out_path` (0600), with one header (the latest segment's, every
  // segment's targets) and `trailer`. Safe to call from another thread while recording.
  DumpStats dump(const std::string& out_path, uint64_t since_mono_ns, uint64_t until_mono_ns,
                 const nlohmann::json& trailer);

  uint64_t disk_bytes() const;
  const FlightOptions& options() const { return options_; }
  // The segment files, oldest first (absolute paths).
  std::vector<std::string> segments() const;
  std::string current_segment() const;

 private:
  void open_segment(uint64_t now_mono_ns);
  void prune_locked();
  FlightOptions options_;
  std::string boot_id_;
  mutable std::mutex mu_;
  nlohmann::json header_;
  std::unique_ptr<trace::TraceWriter> writer_;
  std::string current_;
  uint64_t segment_started_ns_ = 0;
  uint64_t sequence_ = 0;
  std::string error_;  // a write error: recording goes on, the flight recorder stops
};

}  // namespace ld::serve
