// Every report format from a real trace (recorded from ld-sample-server under load, see
// tests/fixtures/formats/README.md), through the same EventAnalyzer the CLI uses.
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "report/report.hpp"
#include "trace/trace_file.hpp"

namespace {

using nlohmann::json;

const std::string kFixture = std::string(LD_TEST_DATA_DIR) + "/../fixtures/formats/sample.ldtrace";

ld::model::Report fixture_report(bool thread_tracks) {
  ld::analysis::EventAnalyzer analyzer;
  if (thread_tracks) analyzer.keep_thread_tracks();
  auto read = ld::trace::read_trace(kFixture, [&](const ld_hdr& rec) { analyzer.on_record(rec, rec.size); });
  return analyzer.finish(read.header, read.trailer, read.header.value("token_source", std::string("sse")),
                         read.warnings);
}

TEST(FormatsFixture, TheTraceHasRequestsAndSchedulerEvidence) {
  const auto report = fixture_report(true);
  EXPECT_GE(report.requests, 10u);
  EXPECT_GT(report.tokens, report.requests);
  ASSERT_NE(report.tracks, nullptr);
  EXPECT_FALSE(report.tracks->threads.empty());
}

TEST(FormatsFixture, PerfettoHasATrackPerThreadWithStatesAndTokens) {
  const auto report = fixture_report(true);
  const json trace = json::parse(ld::report::render_perfetto(report));
  std::set<uint64_t> state_tids, token_tids, named_tids;
  std::set<std::string> states;
  uint64_t tokens = 0;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") {
      state_tids.insert(ev["tid"].get<uint64_t>());
      states.insert(ev["args"]["state"].get<std::string>());
      EXPECT_GE(ev["dur"].get<double>(), 0.0);
    }
    if (ev["ph"] == "i") {
      tokens++;
      token_tids.insert(ev["tid"].get<uint64_t>());
    }
    if (ev["ph"] == "M" && ev["name"] == "thread_name") named_tids.insert(ev["tid"].get<uint64_t>());
  }
  EXPECT_EQ(tokens, report.tokens);
  EXPECT_EQ(state_tids.size(), report.tracks->threads.size());
  EXPECT_TRUE(states.count("running"));
  EXPECT_TRUE(states.count("blocked"));
  for (uint64_t tid : state_tids) EXPECT_TRUE(named_tids.count(tid)) << tid;
  for (uint64_t tid : token_tids) EXPECT_TRUE(named_tids.count(tid)) << tid;
  // The sample server sends tokens from threads the sched probe saw.
  for (uint64_t tid : token_tids) EXPECT_TRUE(state_tids.count(tid)) << "no states for token thread " << tid;
}

TEST(FormatsFixture, HtmlAndMarkdownShowTheRequests) {
  const auto report = fixture_report(false);
  const std::string html = ld::report::render_html(report);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("No streaming responses"), std::string::npos);
  EXPECT_NE(html.find(report.request_rows.front().id), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  const std::string md = ld::report::render_markdown(report);
  std::string md_id = report.request_rows.front().id;  // "4242:c1#1": Markdown escapes the '#'
  if (auto hash = md_id.find('#'); hash != std::string::npos) md_id.insert(hash, "\\");
  EXPECT_NE(md.find(md_id), std::string::npos) << md_id;
  EXPECT_NE(md.find("## TPOT distribution"), std::string::npos);
  // The JSON and text formats read the same report.
  EXPECT_EQ(json::parse(ld::report::render_json(report))["summary"]["requests"], report.requests);
  EXPECT_FALSE(ld::report::render_text(report).empty());
}

}  // namespace
