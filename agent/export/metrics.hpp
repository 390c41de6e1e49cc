// The daemon's metrics (serve): one prometheus-cpp registry, served for scraping on
// --metrics-addr and read back (collect()) for the OTLP export, so both show the same numbers.
// Names follow Prometheus conventions (base units, _total counters) and the user contract
// (docs/deploy.md lists them); no label takes a per-request or per-process value.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "model/report.hpp"

namespace prometheus {
class Registry;
class Exposer;
}  // namespace prometheus

namespace ld::exporter {

// What one analysis window observed: each observation is counted in exactly one window.
struct WindowObservations {
  std::vector<double> ttft_s;                     // one per request whose first token fell in it
  std::vector<double> gap_s;                      // one per token gap that ended in it
  std::map<std::string, double> outlier_seconds;  // by cause id (model::cause_id)
  std::map<std::string, uint64_t> outliers;       // by kind: ttft | tpot
  // The findings of this window's analysis: the ones active now (rule -> severity).
  std::map<std::string, std::string> findings;
};

class ServeMetrics {
 public:
  ServeMetrics();
  ~ServeMetrics();
  ServeMetrics(const ServeMetrics&) = delete;
  ServeMetrics& operator=(const ServeMetrics&) = delete;

  // Serves GET /metrics on `address` ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:9464") from one
  // thread of its own. Throws std::runtime_error with a one-line reason (port taken, bad address).
  void serve_http(const std::string& address);

  void add_window(const WindowObservations& window);
  // The probes' cumulative counters (ProbeSession::status()): counters follow them.
  void set_probes(const std::vector<model::ProbeStatus>& probes);
  void set_agent(double cpu_seconds, uint64_t rss_bytes);
  void set_targets(size_t targets);
  void target_discovered();
  void set_flight_bytes(uint64_t bytes);
  void capture_taken(const std::string& trigger);
  void window_done(double analysis_seconds, uint64_t records);
  void records_dropped(uint64_t records);
  void otlp_failed(const std::string& signal);

  // Everything, as the scrape shows it (for the OTLP export).
  std::vector<prometheus::MetricFamily> collect() const;

  // Bucket bounds (seconds) of the two GenAI histograms: the OpenTelemetry GenAI semantic
  // conventions' advice, with finer buckets below 10 ms for fast token gaps.
  static const std::vector<double>& ttft_buckets();
  static const std::vector<double>& tpot_buckets();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ld::exporter
