// One definitions layer. Every definition (TTFT, TPOT per token, ITL per chunk, mean
// TPOT per request, TPOT with the first token, E2E) in the report's JSON, checked against numbers
// computed by hand (tests/data/definitions/expected.json says how), and stated in every format.
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/definitions.hpp"
#include "analysis/summary.hpp"
#include "model/definitions.hpp"
#include "report/report.hpp"
#include "tokens/token_log.hpp"

namespace {

using ld::model::Definition;
using nlohmann::json;

const std::string kDir = std::string(LD_TEST_DATA_DIR) + "/definitions";
constexpr uint64_t kMs = 1'000'000;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  return json::parse(in, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
}

ld::model::Timeline fixture_log() {
  auto log = ld::tokens::read_token_log(kDir + "/client.jsonl", 0);
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  return std::move(log.timeline);
}

}  // namespace

TEST(Definitions, JsonFieldsMatchTheHandComputedFixture) {
  ld::model::Report report;
  report.definitions.client = ld::analysis::measure_definitions(fixture_log());
  const json got = ld::report::to_json(report).at("definitions");
  const json want = read_json(kDir + "/expected.json");
  for (const auto& [key, expected] : want.items()) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(got.contains(key)) << got.dump(1);
    for (const auto& [side, numbers] : expected.items()) {
      ASSERT_TRUE(got[key].contains(side)) << got[key].dump(1);
      for (const auto& [stat, value] : numbers.items())
        EXPECT_NEAR(got[key][side].at(stat).get<double>(), value.get<double>(), 0.0006) << side << "." << stat;
    }
  }
  // Every definition is there, says what it is and what the tools call it; the side that was
  // not measured is left out, not zero.
  for (const auto& info : ld::model::kDefinitions) {
    const json& d = got.at(std::string(info.id));
    EXPECT_FALSE(d.at("meaning").get<std::string>().empty());
    EXPECT_FALSE(d.at("same_as").get<std::string>().empty());
    EXPECT_EQ(d.at("per"), std::string(info.population));
    EXPECT_FALSE(d.contains("server")) << info.id;
    EXPECT_TRUE(want.contains(std::string(info.id))) << "no hand-computed numbers for " << info.id;
  }
  EXPECT_FALSE(got["sides"].contains("server"));
}

// The server side: a send that carried three SSE events is one chunk of three tokens.
TEST(Definitions, ServerSendsWithSeveralEventsAreOneChunk) {
  ld::model::Timeline t;
  ld::model::Request r;
  r.id = "1:c1#1";
  r.start_ns = 0;
  r.token_ns = {100 * kMs, 150 * kMs, 200 * kMs};
  r.token_tid = {7, 7, 7};
  r.token_events = {1, 3, 1};
  t.requests.push_back(r);
  const auto set = ld::analysis::measure_definitions(t);
  EXPECT_TRUE(set.known);
  EXPECT_EQ(set.requests, 1u);
  EXPECT_EQ(set.tokens, 5u);
  EXPECT_EQ(set.chunks, 3u);
  EXPECT_DOUBLE_EQ(set[Definition::kTtft].p50, 100);
  EXPECT_DOUBLE_EQ(set[Definition::kE2e].p50, 200);
  EXPECT_EQ(set[Definition::kItlPerChunk].count, 2u);
  EXPECT_DOUBLE_EQ(set[Definition::kItlPerChunk].mean, 50);
  // 50 ms over three tokens, then 50 ms for one.
  EXPECT_EQ(set[Definition::kTpotPerToken].count, 4u);
  EXPECT_NEAR(set[Definition::kTpotPerToken].p50, 50.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(set[Definition::kTpotPerToken].mean, 25);
  EXPECT_DOUBLE_EQ(set[Definition::kMeanTpotPerRequest].p50, 25);  // (200 - 100) / (5 - 1)
  EXPECT_DOUBLE_EQ(set[Definition::kTpotInclFirst].p50, 40);       // 200 / 5
}

// One token per send (the common case): the three gap definitions and the contract's
// summary.tpot_ms are the same numbers.
TEST(Definitions, OneTokenPerChunkMakesTheGapDefinitionsAgreeWithTheSummary) {
  ld::model::Timeline t;
  for (int i = 0; i < 4; ++i) {
    ld::model::Request r;
    r.id = std::to_string(i);
    r.start_ns = static_cast<uint64_t>(i) * 1000 * kMs;
    for (int k = 0; k < 10; ++k) r.token_ns.push_back(r.start_ns + (200 + 40 * k + (k % 3) * 7 * i) * kMs);
    r.token_tid.assign(r.token_ns.size(), 1);
    t.requests.push_back(r);
  }
  const auto set = ld::analysis::measure_definitions(t);
  const auto summary = ld::analysis::build_report(t, {}, 0, 5000 * kMs, 0);
  for (Definition d : {Definition::kTpotPerToken, Definition::kItlPerChunk}) {
    EXPECT_EQ(set[d].count, summary.tpot_ms.count);
    EXPECT_DOUBLE_EQ(set[d].p50, summary.tpot_ms.p50);
    EXPECT_DOUBLE_EQ(set[d].p99, summary.tpot_ms.p99);
    EXPECT_DOUBLE_EQ(set[d].mean, summary.tpot_ms.mean);
  }
  EXPECT_DOUBLE_EQ(set[Definition::kTtft].p50, summary.ttft_ms.p50);
}

// Every human format states the definitions it measured.
TEST(Definitions, EveryFormatStatesThem) {
  auto report = ld::analysis::build_report(fixture_log(), {}, 0, 4000 * kMs, 0);
  report.definitions.client = ld::analysis::measure_definitions(fixture_log());
  const std::string text = ld::report::render_text(report);
  const std::string markdown = ld::report::render_markdown(report);
  const std::string html = ld::report::render_html(report);
  EXPECT_NE(text.find("definitions (ms; token = one SSE data event"), std::string::npos) << text;
  EXPECT_NE(markdown.find("## Definitions (ms)"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"definitions\">"), std::string::npos);
  for (const auto& info : ld::model::kDefinitions) {
    EXPECT_NE(text.find(std::string(info.label)), std::string::npos) << info.label;
    EXPECT_NE(text.find(std::string(info.known_as)), std::string::npos) << info.known_as;
    EXPECT_NE(markdown.find(std::string(info.label)), std::string::npos) << info.label;
  }
  // The numbers of the fixture: TTFT p50 100, ITL per chunk p50 80.
  EXPECT_NE(text.find("TTFT"), std::string::npos);
  EXPECT_NE(text.find("100.0"), std::string::npos);
}

// The token log's "local_port" (written by bench) is the client's port; a bad one is a
// file:line warning, never a failure.
TEST(Definitions, TokenLogLocalPort) {
  std::istringstream in(
      "{\"request\":\"a\",\"event\":\"start\",\"t_ns\":1000,\"clock\":\"monotonic\",\"local_port\":40123}\n"
      "{\"request\":\"a\",\"event\":\"token\",\"t_ns\":2000,\"clock\":\"monotonic\"}\n"
      "{\"request\":\"b\",\"event\":\"start\",\"t_ns\":1000,\"clock\":\"monotonic\",\"local_port\":70000}\n"
      "{\"request\":\"c\",\"event\":\"start\",\"t_ns\":1000,\"clock\":\"monotonic\",\"local_port\":\"x\"}\n");
  auto log = ld::tokens::parse_token_log(in, "t.jsonl", 0);
  ASSERT_EQ(log.timeline.requests.size(), 1u);
  EXPECT_EQ(log.timeline.requests[0].client_port, 40123);
  EXPECT_EQ(log.bad_lines, 2u);
  ASSERT_GE(log.warnings.size(), 2u);
  EXPECT_NE(log.warnings[0].find("t.jsonl:3: \"local_port\" must be a TCP port"), std::string::npos) << log.warnings[0];
  EXPECT_NE(log.warnings[1].find("t.jsonl:4:"), std::string::npos) << log.warnings[1];
}
