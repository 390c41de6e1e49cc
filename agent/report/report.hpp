// The report model (schema latency-doctor/report/v1, ../shared/spec/interface.md) and its
// renderers. Built from a Timeline plus the trace's metadata; renderers are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/stats.hpp"
#include "analysis/timeline.hpp"

namespace ld::report {

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
  double tpot_stddev_ms = 0;
};

struct Report {
  Target target;
  uint64_t start_unix_ns = 0;
  uint64_t duration_ms = 0;
  std::string token_source;  // "sse" or "jsonl:FILE"
  uint64_t requests = 0;
  uint64_t tokens = 0;
  analysis::Distribution ttft_ms;
  analysis::Distribution tpot_ms;   // over every gap of every request
  uint64_t non_streaming_requests = 0;
  uint64_t partial_requests = 0;
  std::vector<RequestRow> request_rows;
  std::vector<ProbeStatus> probes;
  nlohmann::json outliers = nlohmann::json::array();  // filled by attribution (later)
  nlohmann::json findings = nlohmann::json::array();  // filled by the rules engine (later)
  std::vector<std::string> warnings;                  // also printed to stderr by the CLI
};

// realtime_minus_monotonic_ns converts the timeline's monotonic times to unix times.
Report build_report(const analysis::Timeline& timeline, const Target& target,
                    uint64_t window_start_mono_ns, uint64_t window_end_mono_ns,
                    int64_t realtime_minus_monotonic_ns);

nlohmann::json to_json(const Report& report);  // NaN values become null
std::string render_json(const Report& report);  // pretty, trailing newline
std::string render_text(const Report& report);

}  // namespace ld::report
