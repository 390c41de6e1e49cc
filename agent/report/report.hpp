// The report model (schema latency-doctor/report/v1, ../shared/spec/interface.md) and its
// renderers. Built from a Timeline plus the trace's metadata; renderers are pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/stats.hpp"
#include "analysis/timeline.hpp"

namespace ld::report {

inline constexpr const char* kReportSchema = "latency-doctor/report/v1";

struct ProbeStatus {
  std::string name;
  std::string status;  // attached | unavailable | disabled
  std::string reason;
  uint64_t events = 0;
  uint64_t lost = 0;
};

struct Target {
  std::vector<int> pids;
  std::string comm;
  std::string exe;
};

struct RequestRow {
  std::string id;
  uint64_t start_unix_ns = 0;
  uint64_t input_bytes = 0;
  int64_t input_tokens = -1;
  double ttft_ms = 0;
  uint64_t tokens = 0;
  double tpot_median_ms = 0;  // NaN with < 2 tokens
  double tpot_stddev_ms = 0;  // NaN with < 2 tokens
  double tpot_max_ms = 0;     // NaN with < 2 tokens
  bool complete = false;      // the end of the response was seen
};

// The article's perception thresholds (digest.md): defaults, configurable by the caller.
struct Thresholds {
  double ttft_stuck_ms = 800;   // a first token later than this "feels stuck"
  double gap_broken_ms = 150;   // a gap longer than this reads as a broken sentence
  double gap_spike_ms = 300;    // a gap longer than this is a spike users complain about
};

// How many requests/gaps exceed each threshold.
struct ThresholdCounts {
  uint64_t ttft_stuck = 0;
  uint64_t gaps_broken = 0;
  uint64_t gaps_spike = 0;
};

struct Report {
  Target target;
  uint64_t start_unix_ns = 0;
  uint64_t duration_ms = 0;
  std::string token_source = "sse";  // "sse" or "jsonl:FILE"
  uint64_t requests = 0;
  uint64_t tokens = 0;
  uint64_t gaps = 0;                // TPOT gaps in tpot_ms (tokens - requests)
  analysis::Distribution ttft_ms;
  analysis::Distribution tpot_ms;   // over every gap of every request
  uint64_t non_streaming_requests = 0;
  uint64_t partial_requests = 0;
  uint64_t in_flight_requests = 0;
  uint64_t connections = 0;
  uint64_t multi_event_sends = 0;
  std::map<std::string, uint64_t> send_syscalls;
  Thresholds thresholds;
  ThresholdCounts over_thresholds;
  std::vector<RequestRow> request_rows;
  std::vector<ProbeStatus> probes;
  nlohmann::json outliers = nlohmann::json::array();  // filled by attribution (later)
  nlohmann::json findings = nlohmann::json::array();  // filled by the rules engine (later)
  std::vector<std::string> warnings;                  // also printed to stderr by the CLI
};

// realtime_minus_monotonic_ns converts the timeline's monotonic times to unix times.
Report build_report(const analysis::Timeline& timeline, const Target& target,
                    uint64_t window_start_mono_ns, uint64_t window_end_mono_ns,
                    int64_t realtime_minus_monotonic_ns, const Thresholds& thresholds = {});

nlohmann::json to_json(const Report& report);  // NaN values become null
std::string render_json(const Report& report);  // pretty, trailing newline; never throws on odd UTF-8
std::string render_text(const Report& report);

// Shared by the renderers: a monotonic time as unix ns (0 when it would be negative).
uint64_t mono_to_unix_ns(uint64_t mono_ns, int64_t realtime_minus_monotonic_ns);

}  // namespace ld::report
