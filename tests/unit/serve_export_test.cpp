// serve's metrics (prometheus-cpp registry) and their OTLP JSON, and the OTLP/HTTP client
// against a receiver in the test.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "export/metrics.hpp"
#include "export/otlp.hpp"
#include "test_http_receiver.hpp"

using ld::exporter::OtlpClient;
using ld::exporter::ServeMetrics;
using nlohmann::json;

namespace {

std::string exposition(const ServeMetrics& m) { return prometheus::TextSerializer().Serialize(m.collect()); }

const json* find_metric(const json& request, const std::string& name) {
  for (const auto& m : request["resourceMetrics"][0]["scopeMetrics"][0]["metrics"])
    if (m["name"] == name) return &m;
  return nullptr;
}

}  // namespace

TEST(ServeMetrics, ContractNamesBaseUnitsAndNoPerRequestLabels) {
  ServeMetrics m;
  ld::exporter::WindowObservations w;
  w.ttft_s = {0.05, 0.3, 2.0};
  w.gap_s = {0.002, 0.002, 0.3, 5.0};
  w.outlier_seconds = {{"disk_io", 0.6}, {"unknown", 0.1}};
  w.outliers = {{"tpot", 2}};
  w.findings = {{"fsync_on_token_path", "crit"}};
  m.add_window(w);
  using ld::model::ProbeState;
  m.set_probes({{"sock", ProbeState::kAttached, "", 100, 0},
                {"sched", ProbeState::kAttached, "", 50, 3},
                {"gil", ProbeState::kUnavailable, "x", 0, 0}});
  m.set_probes({{"sock", ProbeState::kAttached, "", 160, 0}, {"sched", ProbeState::kAttached, "", 70, 5}});
  m.set_agent(1.5, 40 << 20);
  const std::string text = exposition(m);
  for (const char* name :
       {"gen_ai_server_time_to_first_token_seconds_bucket", "gen_ai_server_time_to_first_token_seconds_count 3",
        "gen_ai_server_time_per_output_token_seconds_count 4",
        "latency_doctor_outlier_seconds_total{cause=\"disk_io\"} 0.6",
        "latency_doctor_findings{rule=\"fsync_on_token_path\",severity=\"crit\"} 1",
        "latency_doctor_events_lost_total{probe=\"sched\"} 5", "latency_doctor_events_total{probe=\"sock\"} 160",
        "latency_doctor_agent_cpu_seconds_total 1.5", "latency_doctor_agent_rss_bytes 41943040"})
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
  EXPECT_EQ(text.find("probe=\"gil\""), std::string::npos);  // unavailable probes have no series
  // A value past the last bound counts in +Inf only; one on a bound counts in that bucket (le).
  EXPECT_NE(text.find("gen_ai_server_time_per_output_token_seconds_bucket{le=\"2.5\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("gen_ai_server_time_per_output_token_seconds_bucket{le=\"0.0025\"} 2"), std::string::npos)
      << text;
  // A finding that no longer holds drops to 0.
  m.add_window({});
  EXPECT_NE(exposition(m).find("latency_doctor_findings{rule=\"fsync_on_token_path\",severity=\"crit\"} 0"),
            std::string::npos);
}

TEST(ServeMetrics, OtlpMetricsFollowTheOtlpJsonMapping) {
  ServeMetrics m;
  ld::exporter::WindowObservations w;
  w.ttft_s = {0.05, 0.3, 20.0};
  w.outlier_seconds = {{"disk_io", 0.6}};
  m.add_window(w);
  json r = ld::exporter::otlp_metrics_request(m.collect(), {{"service.name", "latency-doctor"}}, 1000, 2000);
  const json& resource = r["resourceMetrics"][0]["resource"]["attributes"][0];
  EXPECT_EQ(resource["key"], "service.name");
  EXPECT_EQ(resource["value"]["stringValue"], "latency-doctor");
  const json* ttft = find_metric(r, "gen_ai.server.time_to_first_token");
  ASSERT_NE(ttft, nullptr);
  EXPECT_EQ((*ttft)["unit"], "s");
  const json& point = (*ttft)["histogram"]["dataPoints"][0];
  EXPECT_EQ((*ttft)["histogram"]["aggregationTemporality"], 2);
  EXPECT_EQ(point["count"], "3");  // 64-bit integers as strings
  EXPECT_EQ(point["startTimeUnixNano"], "1000");
  EXPECT_EQ(point["timeUnixNano"], "2000");
  ASSERT_EQ(point["bucketCounts"].size(), point["explicitBounds"].size() + 1);
  uint64_t total = 0;
  for (const auto& c : point["bucketCounts"]) total += std::stoull(c.get<std::string>());
  EXPECT_EQ(total, 3u);
  EXPECT_EQ(point["bucketCounts"].back(), "1");  // 20 s: past 10 s
  const json* outliers = find_metric(r, "latency_doctor.outlier.duration");
  ASSERT_NE(outliers, nullptr);
  EXPECT_TRUE((*outliers)["sum"]["isMonotonic"].get<bool>());
  EXPECT_EQ((*outliers)["sum"]["dataPoints"][0]["attributes"][0]["key"], "cause");
  EXPECT_DOUBLE_EQ((*outliers)["sum"]["dataPoints"][0]["asDouble"].get<double>(), 0.6);
  const json* rss = find_metric(r, "latency_doctor.agent_rss");
  ASSERT_NE(rss, nullptr);
  EXPECT_EQ((*rss)["unit"], "By");
  EXPECT_TRUE((*rss).contains("gauge"));
}

TEST(ServeMetrics, OtlpSpansHaveHexIdsAndTypedAttributes) {
  ld::exporter::Span s;
  s.name = "slow token gap";
  s.start_unix_ns = 10;
  s.end_unix_ns = 20;
  s.attributes = {{"a.double", 1.5}, {"a.int", uint64_t{7}}, {"a.list", json::array({"disk_io", "unknown"})}};
  json r = ld::exporter::otlp_traces_request({s, s}, {{"service.name", "latency-doctor"}});
  const json& spans = r["resourceSpans"][0]["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.size(), 2u);
  for (const auto& span : spans) {
    EXPECT_EQ(span["traceId"].get<std::string>().size(), 32u);
    EXPECT_EQ(span["spanId"].get<std::string>().size(), 16u);
    EXPECT_EQ(span["traceId"].get<std::string>().find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(span["kind"], 1);
    EXPECT_EQ(span["startTimeUnixNano"], "10");
  }
  EXPECT_NE(spans[0]["traceId"], spans[1]["traceId"]);
  EXPECT_DOUBLE_EQ(spans[0]["attributes"][0]["value"]["doubleValue"].get<double>(), 1.5);
  EXPECT_EQ(spans[0]["attributes"][1]["value"]["intValue"], "7");
  EXPECT_EQ(spans[0]["attributes"][2]["value"]["arrayValue"]["values"][0]["stringValue"], "disk_io");
}

TEST(ServeOtlpClient, ParsesEndpoints) {
  auto u = OtlpClient::parse_url("http://collector:4318");
  EXPECT_EQ(u.host, "collector");
  EXPECT_EQ(u.port, 4318);
  EXPECT_EQ(u.path, "");
  u = OtlpClient::parse_url("https://[::1]/otlp/");
  EXPECT_TRUE(u.https);
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.path, "/otlp");
  EXPECT_THROW(OtlpClient::parse_url("grpc://collector:4317"), std::invalid_argument);
  EXPECT_THROW(OtlpClient::parse_url("http://:4318"), std::invalid_argument);
  EXPECT_THROW(OtlpClient::parse_url("http://c:99999"), std::invalid_argument);
}

TEST(ServeOtlpClient, PostsJsonOverPlainHttpAndReportsErrors) {
  ld::test::HttpReceiver receiver;
  OtlpClient client("http://127.0.0.1:" + std::to_string(receiver.port()) + "/base");
  EXPECT_EQ(client.post("/v1/traces", "{\"resourceSpans\":[]}"), "");
  auto got = receiver.requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].path, "/base/v1/traces");
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_EQ(got[0].body, "{\"resourceSpans\":[]}");
  receiver.set_status(400);
  EXPECT_NE(client.post("/v1/metrics", "{}").find("400"), std::string::npos);
  // Nothing listening: a one-line reason, no exception.
  const int port = receiver.port();
  receiver.stop();
  OtlpClient closed("http://127.0.0.1:" + std::to_string(port));
  EXPECT_NE(closed.post("/v1/metrics", "{}").find("cannot connect"), std::string::npos);
}
