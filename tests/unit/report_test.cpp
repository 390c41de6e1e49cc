#include <cmath>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/summary.hpp"
#include "report/report.hpp"

namespace {

using ld::analysis::build_report;
using ld::model::Report;
using ld::model::Request;
using ld::model::Timeline;
using nlohmann::json;

constexpr uint64_t kMs = 1'000'000;
constexpr int64_t kOffset = 1'700'000'000'000'000'000;

Request request(const std::string& id, uint64_t start_ms, std::vector<uint64_t> tokens_ms) {
  Request r;
  r.id = id;
  r.tgid = 42;
  r.start_ns = start_ms * kMs;
  for (uint64_t t : tokens_ms) {
    r.token_ns.push_back(t * kMs);
    r.token_tid.push_back(43);
  }
  r.input_bytes = 321;
  r.complete = true;
  return r;
}

// a: ttft 100, gaps 20 30; b: ttft 900, gap 400; c: ttft 50, one token (no TPOT).
Timeline sample_timeline() {
  Timeline t;
  t.requests.push_back(request("42:c1#1", 0, {100, 120, 150}));
  t.requests.push_back(request("42:c1#2", 1000, {1900, 2300}));
  t.requests.push_back(request("42:c2#1", 3000, {3050}));
  t.requests[2].input_tokens = 17;
  t.requests[2].complete = false;
  t.non_streaming_requests = 2;
  t.partial_requests = 1;
  t.connections = 2;
  t.send_syscalls["write"] = 6;
  return t;
}

Report sample_report() {
  ld::model::Target target{{1234, 1235}, "python3", "/usr/bin/python3.11", {}};
  Report r = build_report(sample_timeline(), target, 0, 30'000 * kMs, kOffset);
  r.probes.push_back({"sock", ld::model::ProbeState::kAttached, "", 1000, 0});
  r.probes.push_back({"sched", ld::model::ProbeState::kUnavailable, "no tracepoint sched_switch", 0, 0});
  return r;
}

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

// Every contract key is there (extensions may add more).
void expect_keys(const json& j, const std::set<std::string>& contract) {
  ASSERT_TRUE(j.is_object());
  const auto keys = keys_of(j);
  for (const auto& k : contract) EXPECT_TRUE(keys.count(k)) << "missing key " << k << " in " << j.dump();
}

TEST(Report, BuildComputesSummaryAndRows) {
  const Report r = sample_report();
  EXPECT_EQ(r.requests, 3u);
  EXPECT_EQ(r.tokens, 6u);
  EXPECT_EQ(r.gaps, 3u);
  EXPECT_EQ(r.start_unix_ns, static_cast<uint64_t>(kOffset));
  EXPECT_EQ(r.duration_ms, 30'000u);
  EXPECT_EQ(r.ttft_ms.count, 3u);
  EXPECT_DOUBLE_EQ(r.ttft_ms.p50, 100);
  EXPECT_DOUBLE_EQ(r.ttft_ms.p90, 740);  // 100 + 0.8 * (900 - 100)
  EXPECT_DOUBLE_EQ(r.ttft_ms.max, 900);
  // TPOT over the pooled gaps {20, 30, 400}.
  EXPECT_DOUBLE_EQ(r.tpot_ms.p50, 30);
  EXPECT_DOUBLE_EQ(r.tpot_ms.mean, 150);
  EXPECT_DOUBLE_EQ(r.tpot_ms.max, 400);
  EXPECT_EQ(r.over_thresholds.ttft_stuck, 1u);
  EXPECT_EQ(r.over_thresholds.gaps_broken, 1u);
  EXPECT_EQ(r.over_thresholds.gaps_spike, 1u);
  ASSERT_EQ(r.request_rows.size(), 3u);
  EXPECT_EQ(r.request_rows[0].start_unix_ns, static_cast<uint64_t>(kOffset));
  EXPECT_EQ(r.request_rows[1].start_unix_ns, static_cast<uint64_t>(kOffset) + 1000 * kMs);
  EXPECT_DOUBLE_EQ(r.request_rows[0].tpot_median_ms, 25);
  EXPECT_DOUBLE_EQ(r.request_rows[0].tpot_stddev_ms, 5);
  EXPECT_DOUBLE_EQ(r.request_rows[1].tpot_stddev_ms, 0);
  EXPECT_TRUE(std::isnan(r.request_rows[2].tpot_median_ms));
  EXPECT_TRUE(std::isnan(r.request_rows[2].tpot_stddev_ms));
  EXPECT_EQ(r.non_streaming_requests, 2u);
  EXPECT_EQ(r.partial_requests, 1u);
}

TEST(Report, JsonFollowsTheContract) {
  const json j = json::parse(ld::report::render_json(sample_report()));
  expect_keys(j, {"schema", "target", "window", "summary", "requests", "outliers", "findings", "probes"});
  EXPECT_EQ(j["schema"], "latency-doctor/report/v1");

  expect_keys(j["target"], {"pids", "comm", "exe"});
  EXPECT_EQ(j["target"]["pids"], json::array({1234, 1235}));
  EXPECT_EQ(j["target"]["comm"], "python3");
  EXPECT_EQ(j["target"]["exe"], "/usr/bin/python3.11");

  expect_keys(j["window"], {"start_unix_ns", "duration_ms"});
  EXPECT_TRUE(j["window"]["start_unix_ns"].is_number_unsigned());
  EXPECT_EQ(j["window"]["start_unix_ns"].get<uint64_t>(), static_cast<uint64_t>(kOffset));
  EXPECT_EQ(j["window"]["duration_ms"], 30000);

  const json& s = j["summary"];
  expect_keys(s, {"requests", "tokens", "ttft_ms", "tpot_ms"});
  EXPECT_EQ(s["requests"], 3);
  EXPECT_EQ(s["tokens"], 6);
  EXPECT_EQ(keys_of(s["ttft_ms"]), (std::set<std::string>{"p50", "p90", "p95", "p99", "max"}));
  EXPECT_EQ(keys_of(s["tpot_ms"]), (std::set<std::string>{"p50", "p90", "p99", "mean", "stddev", "max"}));
  for (const auto& v : s["ttft_ms"]) EXPECT_TRUE(v.is_number());
  for (const auto& v : s["tpot_ms"]) EXPECT_TRUE(v.is_number());
  EXPECT_DOUBLE_EQ(s["ttft_ms"]["p90"].get<double>(), 740.0);
  EXPECT_DOUBLE_EQ(s["tpot_ms"]["stddev"].get<double>(), 176.824);  // sd{20,30,400} = sqrt(93800/3), 3 decimals
  EXPECT_EQ(s["non_streaming_requests"], 2);
  EXPECT_EQ(s["partial_requests"], 1);

  ASSERT_EQ(j["requests"].size(), 3u);
  for (const auto& row : j["requests"]) {
    expect_keys(row, {"id", "start_unix_ns", "input_bytes", "ttft_ms", "tokens", "tpot_median_ms", "tpot_stddev_ms"});
    EXPECT_TRUE(row["id"].is_string());
    EXPECT_TRUE(row["start_unix_ns"].is_number_unsigned());
    EXPECT_TRUE(row["input_bytes"].is_number_unsigned());
    EXPECT_TRUE(row["ttft_ms"].is_number());
    EXPECT_TRUE(row["tokens"].is_number_unsigned());
  }
  EXPECT_EQ(j["requests"][0]["id"], "42:c1#1");
  EXPECT_EQ(j["requests"][0]["input_bytes"], 321);
  EXPECT_DOUBLE_EQ(j["requests"][0]["tpot_median_ms"].get<double>(), 25.0);
  EXPECT_FALSE(j["requests"][0].contains("input_tokens"));  // unknown: left out
  EXPECT_EQ(j["requests"][2]["input_tokens"], 17);
  // NaN -> null: one token has no TPOT.
  EXPECT_TRUE(j["requests"][2]["tpot_median_ms"].is_null());
  EXPECT_TRUE(j["requests"][2]["tpot_stddev_ms"].is_null());

  EXPECT_EQ(j["outliers"], json::array());
  EXPECT_EQ(j["findings"], json::array());
  ASSERT_EQ(j["probes"].size(), 2u);
  for (const auto& p : j["probes"]) {
    EXPECT_EQ(keys_of(p), (std::set<std::string>{"name", "status", "reason", "events", "lost"}));
    EXPECT_TRUE(p["events"].is_number_unsigned());
    EXPECT_TRUE(p["lost"].is_number_unsigned());
  }
  EXPECT_EQ(j["probes"][1]["reason"], "no tracepoint sched_switch");
  EXPECT_EQ(j["token_source"], "sse");
}

TEST(Report, JsonKeepsTheContractOrderAndEndsWithANewline) {
  const std::string text = ld::report::render_json(sample_report());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_LT(text.find("\"schema\""), text.find("\"target\""));
  EXPECT_LT(text.find("\"target\""), text.find("\"window\""));
  EXPECT_LT(text.find("\"summary\""), text.find("\"outliers\""));
  EXPECT_EQ(ld::report::to_json(sample_report()), json::parse(text));
}

TEST(Report, EmptyTimelineGivesNullsNotNaN) {
  const Report r = build_report(Timeline{}, {}, 0, 0, 0);
  const std::string text = ld::report::render_json(r);
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  const json j = json::parse(text);
  EXPECT_EQ(j["summary"]["requests"], 0);
  for (const auto& v : j["summary"]["ttft_ms"]) EXPECT_TRUE(v.is_null());
  for (const auto& v : j["summary"]["tpot_ms"]) EXPECT_TRUE(v.is_null());
  EXPECT_EQ(j["requests"], json::array());
  EXPECT_EQ(j["probes"], json::array());
  EXPECT_EQ(j["target"]["pids"], json::array());
}

TEST(Report, MillisecondsAreRoundedToThreeDecimals) {
  Timeline t;
  Request r;
  r.id = "x";
  r.start_ns = 0;
  r.token_ns = {123'456'789, 123'456'789 + 1'234'567};
  t.requests.push_back(r);
  const json j = json::parse(ld::report::render_json(build_report(t, {}, 0, 1, 0)));
  EXPECT_DOUBLE_EQ(j["requests"][0]["ttft_ms"].get<double>(), 123.457);
  EXPECT_DOUBLE_EQ(j["requests"][0]["tpot_median_ms"].get<double>(), 1.235);
}

// A held send delays the token after it; a complete stream's last send held back (llama-server's
// empty-text event right after the last token) delays only the stream's end.
TEST(Report, HeldSendsCountAllButACompleteStreamsLast) {
  using ld::model::kTcpHeld;
  using ld::model::kTcpRead;
  Timeline t;
  Request r;
  r.id = "a";
  r.token_ns = {1'000'000, 2'000'000, 3'000'000, 4'000'000};
  r.token_tcp = {kTcpRead, kTcpRead | kTcpHeld, kTcpRead, kTcpRead | kTcpHeld};
  r.complete = true;
  t.requests.push_back(r);
  r.id = "b";  // cut off by the end of the trace: its last send is a token like the others
  r.complete = false;
  t.requests.push_back(r);
  const ld::model::TcpSends sends = build_report(t, {}, 0, 10'000'000, 0).tcp_sends;
  EXPECT_EQ(sends.token_sends, 8u);
  EXPECT_EQ(sends.nagle, 8u);
  EXPECT_EQ(sends.held, 3u);
  EXPECT_EQ(sends.nagle_requests, 2u);
}

TEST(Report, OutliersAndFindingsFollowTheContract) {
  Report r = sample_report();
  ld::model::Outlier o;
  o.kind = ld::model::WindowKind::kTpot;
  o.request = "42:c1#2";
  o.token_index = 1;
  o.start_unix_ns = 1;
  o.duration_ms = 400.0;
  o.baseline_ms = 25.0;
  o.causes.push_back({ld::model::Cause::kDiskIo, 350.0, 0.875, {{"syscall", "fsync"}, {"path", "/var/log/app.log"}}});
  o.causes.push_back({ld::model::Cause::kUnknown, 50.0, 0.125, json::object()});
  r.outliers.push_back(o);
  ld::model::Finding f;
  f.rule = "fsync";
  f.cause = ld::model::Cause::kDiskIo;
  f.severity = "warn";
  f.title = "fsync on the token path";
  f.evidence = "3 fsync";
  f.remedy = "log asynchronously";
  f.sysctl.push_back({"vm.swappiness", "1", "60", ""});
  f.verify = "strace -f -e fsync -p 1234";
  r.findings.push_back(f);
  const json j = json::parse(ld::report::render_json(r));
  ASSERT_EQ(j["outliers"].size(), 1u);
  expect_keys(j["outliers"][0],
              {"kind", "request", "token_index", "start_unix_ns", "duration_ms", "baseline_ms", "causes"});
  EXPECT_EQ(j["outliers"][0]["causes"][0]["cause"], "disk_io");
  EXPECT_DOUBLE_EQ(j["outliers"][0]["causes"][0]["share"].get<double>(), 0.875);
  EXPECT_EQ(j["outliers"][0]["causes"][0]["evidence"]["path"], "/var/log/app.log");
  expect_keys(j["findings"][0], {"rule", "cause", "severity", "title", "evidence", "remedy", "sysctl", "verify"});
  EXPECT_EQ(j["findings"][0]["sysctl"][0]["current"], "60");
  const std::string text = ld::report::render_text(r);
  EXPECT_NE(text.find("fsync on the token path"), std::string::npos);
  EXPECT_NE(text.find("fix: log asynchronously"), std::string::npos);
  EXPECT_NE(text.find("sysctl vm.swappiness = 1 (now 60)"), std::string::npos) << text;
  EXPECT_NE(text.find("tpot 42:c1#2 token 1: 400.0 ms (baseline 25.0 ms) = disk_io 350.0 ms "
                      "(fsync /var/log/app.log) + unknown 50.0 ms"),
            std::string::npos)
      << text;
}

TEST(Report, TextShowsTheNumbers) {
  const std::string text = ld::report::render_text(sample_report());
  for (const char* expected : {
           "pids 1234,1235 (python3) /usr/bin/python3.11",
           "2023-11-14 22:13:20.000 UTC, 30.0 s",
           "3 streaming requests, 6 tokens, 2 connections",
           "2 non-streaming requests",
           "1 response already running at trace start",
           "TTFT ms",
           "740.0",  // TTFT p90
           "900.0",  // TTFT max
           "TPOT ms",
           "150.0",  // TPOT mean
           "176.8",  // TPOT sd
           "TTFT > 800 ms (feels stuck)",
           "TPOT gap > 150 ms (broken sentence)",
           "TPOT gap > 300 ms (spike)",
           "42:c1#1",
           "42:c2#1",
           "spike>300",
           "incomplete",
           "no tracepoint sched_switch",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing \"" << expected << "\" in\n" << text;
  }
  EXPECT_EQ(text.find("nan"), std::string::npos);
  EXPECT_EQ(text.find("ringbuf"), std::string::npos);  // nothing lost
}

TEST(Report, TextThresholdCounts) {
  const std::string text = ld::report::render_text(sample_report());
  const auto line_of = [&](const std::string& needle) {
    const size_t at = text.find(needle);
    const size_t begin = text.rfind('\n', at) + 1;
    return text.substr(begin, text.find('\n', at) - begin);
  };
  EXPECT_NE(line_of("feels stuck").find("1 of 3 requests"), std::string::npos) << line_of("feels stuck");
  EXPECT_NE(line_of("broken sentence").find("1 of 3 gaps"), std::string::npos);
}

TEST(Report, TextLostEventsSayHowToFixThem) {
  Report r = sample_report();
  r.probes[0].lost = 12;
  const std::string text = ld::report::render_text(r);
  EXPECT_NE(text.find("sock lost 12 events"), std::string::npos) << text;
  EXPECT_NE(text.find("raise --ringbuf-size"), std::string::npos);
}

TEST(Report, TextWithoutRequestsExplainsWhatToTry) {
  Timeline t;
  t.non_streaming_requests = 3;
  Report r = build_report(t, {{7}, "server", "", {}}, 0, 5'000 * kMs, kOffset);
  r.warnings.push_back("tokens.jsonl:2: not valid JSON (at byte 1); line skipped");
  const std::string text = ld::report::render_text(r);
  EXPECT_NE(text.find("no streaming responses seen: is the server using TLS, HTTP/2, or a unix socket?"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--tokens jsonl:FILE"), std::string::npos);
  EXPECT_NE(text.find("3 non-streaming requests (no SSE data events"), std::string::npos);
  EXPECT_NE(text.find("tokens.jsonl:2: not valid JSON"), std::string::npos);
  EXPECT_NE(text.find("pid 7 (server)"), std::string::npos);

  r.token_source = "jsonl:/tmp/t.jsonl";
  const std::string from_log = ld::report::render_text(r);
  EXPECT_NE(from_log.find("token log /tmp/t.jsonl"), std::string::npos);
  EXPECT_NE(from_log.find("no requests with tokens in the token log"), std::string::npos);
}

TEST(Report, TextCapsTheRequestTable) {
  Timeline t;
  for (int i = 0; i < 60; ++i)
    t.requests.push_back(request("r" + std::to_string(i), i * 10, {static_cast<uint64_t>(i * 10 + 5)}));
  const std::string text = ld::report::render_text(build_report(t, {}, 0, 1000 * kMs, 0));
  EXPECT_NE(text.find("r49"), std::string::npos);
  EXPECT_EQ(text.find("r50 "), std::string::npos);
  EXPECT_NE(text.find("… 10 more (use --format json)"), std::string::npos);
}

TEST(Report, TextColumnsAreAligned) {
  const std::string text = ld::report::render_text(sample_report());
  const size_t header = text.find("  id ");
  ASSERT_NE(header, std::string::npos);
  const size_t header_end = text.find('\n', header);
  const std::string header_line = text.substr(header, header_end - header);
  const size_t tokens_col_end = header_line.find("tokens") + 6;
  // The next row's "tokens" cell (3) ends in the same column as its header.
  const size_t row = header_end + 1;
  const std::string row_line = text.substr(row, text.find('\n', row) - row);
  EXPECT_EQ(row_line.substr(tokens_col_end - 1, 1), "3") << header_line << "\n" << row_line;
}

TEST(Report, OddStringsNeitherThrowNorReachTheTerminal) {
  Timeline t;
  t.requests.push_back(request("bad\xff\xfe id\x1b[31m", 0, {10}));
  Report r = build_report(t, {{1}, "a\nb", "/x", {}}, 0, 1, 0);
  EXPECT_NO_THROW({
    const json j = json::parse(ld::report::render_json(r));
    EXPECT_TRUE(j["requests"][0]["id"].is_string());
  });
  const std::string text = ld::report::render_text(r);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("(a?b)"), std::string::npos);
}

}  // namespace
