// OTLP/HTTP export (serve --otlp-endpoint): the daemon's metrics and one span per outlier and
// per finding, as OTLP JSON (the protobuf JSON mapping with OTLP's rules: lowerCamelCase
// fields, trace and span ids in hex, enums as numbers, 64-bit integers as decimal strings),
// POSTed to ENDPOINT/v1/metrics and ENDPOINT/v1/traces. JSON rather than protobuf: no protobuf
// runtime or generated code in the agent, and every OpenTelemetry Collector's otlphttp
// receiver takes both (docs/deploy.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>
#include <nlohmann/json.hpp>

namespace ld::exporter {

// Resource attributes (service.name, host.name, ...): string values.
using Attributes = std::vector<std::pair<std::string, nlohmann::json>>;

// One OTLP KeyValue list from name -> scalar (string, bool, integer, double) or array of
// strings; other JSON values are written as their JSON text.
nlohmann::json otlp_attributes(const Attributes& attributes);

// The OpenTelemetry name and unit of a Prometheus family (gen_ai_server_time_to_first_token_
// seconds -> gen_ai.server.time_to_first_token, "s"; latency_doctor_outlier_seconds_total ->
// latency_doctor.outlier.time, "s"; ...).
struct OtelName {
  std::string name;
  std::string unit;
};
OtelName otel_name(const std::string& prometheus_name);

// ExportMetricsServiceRequest: counters as monotonic cumulative sums, gauges as gauges,
// histograms as cumulative explicit-bucket histograms (bucket counts per bucket, not
// cumulative as in Prometheus). start_ns: when the counters started (the daemon's start).
nlohmann::json otlp_metrics_request(const std::vector<prometheus::MetricFamily>& families, const Attributes& resource,
                                    uint64_t start_unix_ns, uint64_t now_unix_ns);

struct Span {
  std::string name;
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;
  Attributes attributes;
};
// ExportTraceServiceRequest: each span a trace of its own (random 16-byte trace id, 8-byte span
// id), kind INTERNAL.
nlohmann::json otlp_traces_request(const std::vector<Span>& spans, const Attributes& resource);

// A 16- or 8-byte random id as lowercase hex.
std::string random_hex_id(size_t bytes);

// POSTs JSON bodies to an OTLP/HTTP endpoint ("http://host:4318" or "https://..."). http://
// goes over a plain socket (HTTP/1.1, one connection a push): the agent maps no TLS or HTTP
// library for it. https:// loads libcurl with dlopen at the first push (bench/curl_api.hpp),
// as `bench` does, so a daemon without it never maps libcurl's TLS stack.
class OtlpClient {
 public:
  // Throws std::invalid_argument for an endpoint that is not http(s)://HOST[:PORT][/PATH].
  explicit OtlpClient(const std::string& endpoint, int timeout_ms = 5000);
  // POSTs to the endpoint's path + `path` ("/v1/traces"); "" on a 2xx answer, else a one-line
  // reason (connect error, timeout, "HTTP 400: ...").
  std::string post(const std::string& path, const std::string& json_body) const;
  const std::string& endpoint() const { return endpoint_; }

  struct Url {
    bool https = false;
    std::string host;  // without brackets for IPv6
    int port = 0;
    std::string path;  // "" or "/prefix" (no trailing slash)
  };
  // Throws std::invalid_argument naming the problem.
  static Url parse_url(const std::string& endpoint);

 private:
  std::string endpoint_;
  Url url_;
  int timeout_ms_;
};

}  // namespace ld::exporter
