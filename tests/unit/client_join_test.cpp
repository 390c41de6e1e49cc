// Client and server side by side. A client's token log joined per request to the
// server's requests (analysis/client_join.hpp), on synthetic timelines: the join itself (by the
// client's port, or by time behind a proxy), the split of the client's TTFT into before the
// server / the server / after it, the bunched tokens of a buffering proxy, and the finding.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../integration/proc_util.hpp"
#include "analysis/client_join.hpp"
#include "report/report.hpp"
#include "rules/engine.hpp"

namespace {

using ld::model::Request;
using ld::model::Timeline;

constexpr uint64_t kMs = 1'000'000;

Request request(const std::string& id, double start_ms, std::vector<double> tokens_ms, uint16_t port = 0) {
  Request r;
  r.id = id;
  r.start_ns = static_cast<uint64_t>(start_ms * 1e6);
  for (double t : tokens_ms) r.token_ns.push_back(static_cast<uint64_t>(t * 1e6));
  r.token_tid.assign(r.token_ns.size(), 0);
  r.client_port = port;
  r.index_on_connection = 1;
  return r;
}

std::vector<double> steady(double first_ms, int tokens, double gap_ms) {
  std::vector<double> out;
  for (int i = 0; i < tokens; ++i) out.push_back(first_ms + i * gap_ms);
  return out;
}

std::vector<double> shifted(std::vector<double> v, double by_ms) {
  for (double& t : v) t += by_ms;
  return v;
}

const ld::rules::RuleSet& shipped_rules() {
  static const ld::rules::RuleSet set = [] {
    ld::rules::RuleSet s;
    ld::rules::load_rules_path(s, std::string(LD_TEST_DATA_DIR) + "/../../rules");
    return s;
  }();
  return set;
}

std::vector<std::string> findings_of(const ld::model::Report& r) {
  std::vector<std::string> ids;
  for (const auto& f :
       ld::rules::evaluate(shipped_rules(), ld::rules::facts_for_report(r, {}), ld::rules::Scope::kReport))
    ids.push_back(f.rule);
  return ids;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

// Two clients start together; the server reads them in the other order. Their ports say which
// is which, so each client gets its own server request (a join by time alone would swap them).
TEST(ClientJoin, ByClientPortOnADirectConnection) {
  Timeline server, client;
  server.requests = {request("9:c1#1", 0.30, steady(200, 10, 40), 40002),   // B, read first
                     request("9:c2#1", 0.35, steady(260, 10, 40), 40001)};  // A
  client.requests = {request("req-1", 0.00, shifted(steady(260, 10, 40), 0.2), 40001),
                     request("req-2", 0.05, shifted(steady(200, 10, 40), 0.2), 40002)};
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(join.present);
  EXPECT_EQ(join.method, "client_port");
  ASSERT_EQ(join.matched, 2u);
  EXPECT_EQ(join.requests[0].client_id, "req-1");
  EXPECT_EQ(join.requests[0].server_id, "9:c2#1");
  EXPECT_EQ(join.requests[1].server_id, "9:c1#1");
  const auto& a = join.requests[0];
  EXPECT_NEAR(a.before_server_ms, 0.35, 1e-6);
  EXPECT_NEAR(a.server_ttft_ms, 259.65, 1e-6);
  EXPECT_NEAR(a.after_server_ms, 0.2, 1e-6);
  // The client's TTFT is exactly before + server + after.
  EXPECT_NEAR(a.client_ttft_ms, a.before_server_ms + a.server_ttft_ms + a.after_server_ms, 1e-6);
  EXPECT_NEAR(a.lag_p50_ms, 0.2, 1e-6);
  EXPECT_EQ(a.bunched_tokens, 0u);
  EXPECT_EQ(join.gaps, 18u);
  EXPECT_LT(join.outside_ttft_ms.p50, 1.0);
  EXPECT_TRUE(findings_of([&] {
                ld::model::Report r;
                r.client_join = join;
                return r;
              }())
                  .empty());
}

// Behind a buffering proxy the server's peer is the proxy (another port): the join falls back to
// time, the tokens the server sent 40 ms apart arrive together at the end, and the report puts
// the extra time after the server's send and raises the proxy-buffering finding.
TEST(ClientJoin, ABufferingProxyIsOutsideTheServerAndFound) {
  Timeline server, client;
  for (int i = 0; i < 4; ++i) {
    const double t0 = i * 1000.0;
    server.requests.push_back(request("9:c1#" + std::to_string(i + 1), t0 + 0.5, steady(t0 + 200, 20, 40), 50000));
    // The proxy holds everything until the response ends, then the client reads it at once.
    client.requests.push_back(
        request("req-" + std::to_string(i + 1), t0, std::vector<double>(20, t0 + 200 + 19 * 40 + 1), 41000 + i));
  }
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  ASSERT_EQ(join.matched, 4u);
  EXPECT_EQ(join.method, "time");
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(join.requests[i].server_id, "9:c1#" + std::to_string(i + 1));
  EXPECT_NEAR(join.before_server_ms.p50, 0.5, 1e-6);
  EXPECT_NEAR(join.server_ttft_ms.p50, 199.5, 1e-6);
  EXPECT_NEAR(join.after_server_ms.p50, 761, 1e-6);
  EXPECT_NEAR(join.outside_ttft_share, 761.5 / 961, 1e-6);
  EXPECT_EQ(join.gaps, 4u * 19);
  EXPECT_EQ(join.bunched_tokens, 4u * 19);
  EXPECT_DOUBLE_EQ(join.bunched_share, 1.0);
  EXPECT_NEAR(join.lag_ms.max, 761, 1e-6);
  EXPECT_NEAR(join.client_gap_ms.p50, 0, 1e-9);
  EXPECT_NEAR(join.server_gap_ms.p50, 40, 1e-6);

  ld::model::Report r;
  r.client_join = join;
  const auto ids = findings_of(r);
  EXPECT_TRUE(has(ids, "proxy-buffering")) << ::testing::PrintToString(ids);
  EXPECT_FALSE(has(ids, "client-wait-outside-server"));  // the buffering finding says it better
  const std::string text = ld::report::render_text(r);
  EXPECT_NE(text.find("client and server side by side (token log c.jsonl, joined by time: 4 of 4 requests)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tokens that arrived together although sent apart: 76 of 76 (100%)"), std::string::npos) << text;
}

// Two clients through a buffering proxy, the second 3 ms after the first. The second's server
// request has the longer TTFT and the faster tokens, so it ends nearer the first client's read:
// a ranking by TTFT alone would give it to the first client and leave the second, whose own
// request started after the first's, with nothing it could have caused. Each gets its own.
TEST(ClientJoin, ConcurrentRequestsBehindAProxyEachGetTheirOwn) {
  Timeline server, client;
  server.requests = {request("9:c1#1", 0.2, steady(40.2, 20, 10), 50000),
                     request("9:c2#1", 3.2, steady(51.2, 20, 9.5), 50001)};
  client.requests = {request("req-1", 0.0, std::vector<double>(20, 231.2), 41000),
                     request("req-2", 3.0, std::vector<double>(20, 232.7), 41001)};
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_EQ(join.matched, 2u);
  EXPECT_EQ(join.requests[0].server_id, "9:c1#1");
  EXPECT_EQ(join.requests[1].server_id, "9:c2#1");
}

// When the closest candidate of one client is the only one another client could have caused,
// the join gives up the closer fit rather than a request: every client that can be matched is.
TEST(ClientJoin, AClosestFitDoesNotLeaveAnotherClientUnmatched) {
  Timeline server, client;
  // s1 could serve either client; s2 started too late for req-2's first token and serves req-1.
  server.requests = {request("9:c1#1", 5.0, steady(20, 5, 10), 50000),
                     request("9:c2#1", 6.0, steady(72, 5, 10), 50001)};
  client.requests = {request("req-1", 4.0, std::vector<double>(5, 70.5), 41000),
                     request("req-2", 4.5, std::vector<double>(5, 61), 41001)};
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  ASSERT_EQ(join.matched, 2u) << (warnings.empty() ? "" : warnings.front());
  EXPECT_EQ(join.requests[0].client_id, "req-1");
  EXPECT_EQ(join.requests[0].server_id, "9:c2#1");
  EXPECT_EQ(join.requests[1].server_id, "9:c1#1");
}

// Time spent before the server read the request (a slow connect, a queueing proxy) dominates.
TEST(ClientJoin, WaitBeforeTheServerReadIsFound) {
  Timeline server, client;
  for (int i = 0; i < 5; ++i) {
    const double t0 = i * 1000.0;
    server.requests.push_back(request("9:c" + std::to_string(i + 1) + "#1", t0 + 300, steady(t0 + 500, 10, 40), 0));
    client.requests.push_back(request("req-" + std::to_string(i + 1), t0, shifted(steady(t0 + 500, 10, 40), 1), 0));
  }
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  ASSERT_EQ(join.matched, 5u);
  EXPECT_NEAR(join.before_server_ms.p50, 300, 1e-6);
  EXPECT_NEAR(join.after_server_ms.p50, 1, 1e-6);
  ld::model::Report r;
  r.client_join = join;
  const auto ids = findings_of(r);
  EXPECT_TRUE(has(ids, "client-wait-outside-server")) << ::testing::PrintToString(ids);
  EXPECT_FALSE(has(ids, "proxy-buffering"));
}

// A client request the server never served (another server, before the trace) is not forced
// onto one: it stays unmatched, with a warning; a server request cannot serve two clients.
TEST(ClientJoin, UnmatchedRequestsAreWarnedAbout) {
  Timeline server, client;
  server.requests = {request("9:c1#1", 1000.2, steady(1200, 5, 40))};
  client.requests = {request("req-1", 0, steady(200, 5, 40)),                       // before the server's
                     request("req-2", 1000, shifted(steady(1200, 5, 40), 0.3)),     // this one
                     request("req-3", 1000.1, shifted(steady(1200, 5, 40), 0.4))};  // same window, taken
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:/tmp/c.jsonl", warnings);
  ASSERT_EQ(join.matched, 1u);
  EXPECT_EQ(join.requests[0].client_id, "req-2");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("/tmp/c.jsonl: 2 of 3 request(s) match no request in the server's sends"),
            std::string::npos)
      << warnings[0];
  // No server requests at all: no join, no warning.
  std::vector<std::string> none;
  EXPECT_FALSE(ld::analysis::join_client(client, Timeline{}, "jsonl:c", none).present);
  EXPECT_TRUE(none.empty());
}

// The JSON carries the join under explicit names.
TEST(ClientJoin, JsonFields) {
  Timeline server, client;
  server.requests = {request("9:c1#1", 0.5, steady(100, 3, 40), 40001)};
  client.requests = {request("req-1", 0, shifted(steady(100, 3, 40), 2), 40001)};
  std::vector<std::string> warnings;
  ld::model::Report r;
  r.client_join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  const auto j = ld::report::to_json(r).at("client_join");
  EXPECT_EQ(j["source"], "jsonl:c.jsonl");
  EXPECT_EQ(j["method"], "client_port");
  EXPECT_EQ(j["matched"], 1);
  EXPECT_DOUBLE_EQ(j["client_ttft_ms"]["p50"].get<double>(), 102);
  EXPECT_DOUBLE_EQ(j["server_ttft_ms"]["p50"].get<double>(), 99.5);
  EXPECT_DOUBLE_EQ(j["before_server_ms"]["p50"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["after_server_ms"]["p50"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(j["lag_ms"]["max"].get<double>(), 2);
  const auto& row = j["requests"][0];
  EXPECT_EQ(row["client_request"], "req-1");
  EXPECT_EQ(row["server_request"], "9:c1#1");
  EXPECT_EQ(row["new_connection"], true);
  EXPECT_DOUBLE_EQ(row["client_gap_p50_ms"].get<double>(), 40);
  // Without a join the key is absent (older readers see the schema they know).
  EXPECT_FALSE(ld::report::to_json(ld::model::Report{}).contains("client_join"));
}

// `report --client`: a bad value is a usage error, an unreadable log a warning (the trace's own
// report still comes), never a crash.
TEST(ClientJoin, ReportCliClientFlag) {
  const std::string exe = std::string(LD_BUILD_DIR) + "/latency-doctor";
  const std::string trace = std::string(LD_TEST_FIXTURES_DIR) + "/golden/server-disk.ldtrace";
  {
    ld::test::Child child({exe, "report", trace, "--client", "sse"});
    EXPECT_EQ(child.wait(std::chrono::seconds(60)).value_or(-1), 1);
    EXPECT_EQ(child.err(), "latency-doctor report: error: --client sse: expected jsonl:FILE (a client's token log)\n");
  }
  {
    ld::test::Child child({exe, "report", trace, "--client", "/nonexistent/client.jsonl", "--format", "json"});
    EXPECT_EQ(child.wait(std::chrono::seconds(60)).value_or(-1), 0);
    EXPECT_NE(child.err().find("warning: cannot read /nonexistent/client.jsonl: No such file or directory; the report "
                               "has no client side"),
              std::string::npos)
        << child.err();
    const auto j = nlohmann::json::parse(child.out());
    EXPECT_FALSE(j.contains("client_join"));
    EXPECT_TRUE(j["definitions"]["sides"].contains("server"));
  }
}

// Tokens whose send Nagle held are told apart from the others in the delivery lag, and the Nagle
// finding quotes both.
TEST(ClientJoin, HeldTokensLagApartFromTheOthers) {
  Timeline server, client;
  Request s = request("9:c1#1", 0.3, steady(100, 10, 20), 40001);
  s.token_tcp.assign(10, ld::model::kTcpRead);
  std::vector<double> received = shifted(steady(100, 10, 20), 0.1);
  for (size_t i : {0u, 4u, 8u}) {
    s.token_tcp[i] |= ld::model::kTcpHeld;
    received[i] += 25;  // waited for the client's delayed ACK
  }
  server.requests = {s};
  client.requests = {request("req-1", 0, received, 40001)};
  std::vector<std::string> warnings;
  const auto join = ld::analysis::join_client(client, server, "jsonl:c.jsonl", warnings);
  ASSERT_EQ(join.matched, 1u);
  EXPECT_EQ(join.held_lag_ms.count, 3u);
  EXPECT_NEAR(join.held_lag_ms.p50, 25.1, 1e-6);
  EXPECT_EQ(join.other_lag_ms.count, 7u);
  EXPECT_NEAR(join.other_lag_ms.p50, 0.1, 1e-6);
}
