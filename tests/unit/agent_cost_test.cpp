// What the agent cost while recording: the trailer's "agent" object, read back by the analysis
// and shown by every report format.

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "report/report.hpp"

namespace {

using nlohmann::json;

json trailer_with(json agent) {
  return {{"end_mono_ns", 6'000'000'000ULL},
          {"probes",
           json::array({{{"name", "sock"}, {"status", "attached"}, {"reason", ""}, {"events", 10}, {"lost", 0}}})},
          {"agent", std::move(agent)}};
}

json recorded_agent() {
  return {{"attach_ms", 200.0}, {"attach_cpu_ms", 300.0}, {"recording_ms", 5000.0}, {"cpu_ms", 10.0},
          {"wakeups", 5},       {"stop_cpu_ms", 100.0},   {"peak_rss_mib", 42.0}};
}

ld::model::Report analyse(const json& trailer) {
  const json header = {{"clock", {{"start_mono_ns", 1'000'000'000ULL}}}};
  ld::analysis::EventAnalyzer analyzer;
  return analyzer.finish(header, trailer, "sse", {});
}

}  // namespace

TEST(AgentCost, TrailerIsReadAndShownInEveryFormat) {
  const auto report = analyse(trailer_with(recorded_agent()));
  ASSERT_TRUE(report.agent.known);
  EXPECT_EQ(report.agent.wakeups, 5u);

  const std::string sentence =
      "the agent attached in 200 ms (300 ms of CPU), then used 10.0 ms of CPU in 5.0 s of recording "
      "(0.200% of one CPU), woke 5 times, 1.0 a second; stopping took 100 ms of CPU; peak memory 42 MiB";
  EXPECT_NE(ld::report::render_text(report).find(sentence), std::string::npos) << ld::report::render_text(report);
  EXPECT_NE(ld::report::render_markdown(report).find("the agent attached in 200 ms"), std::string::npos);
  EXPECT_NE(ld::report::render_html(report).find("the agent attached in 200 ms"), std::string::npos);

  const json j = json::parse(ld::report::render_json(report));
  ASSERT_TRUE(j.contains("agent"));
  EXPECT_DOUBLE_EQ(j["agent"]["cpu_percent_of_one_cpu"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["agent"]["cpu_ms"].get<double>(), 10.0);
  EXPECT_EQ(j["agent"]["wakeups"], 5);
  EXPECT_DOUBLE_EQ(j["agent"]["stop_cpu_ms"].get<double>(), 100.0);
}

TEST(AgentCost, MissingOrMistypedCostIsUnknownNotAFailure) {
  json mistyped = recorded_agent();
  mistyped["cpu_ms"] = "ten";
  json negative = recorded_agent();
  negative["wakeups"] = -1;
  json partial = recorded_agent();
  partial.erase("peak_rss_mib");
  for (const json& trailer : {trailer_with(mistyped), trailer_with(negative), trailer_with(partial),
                              trailer_with("not an object"), json{{"end_mono_ns", 6'000'000'000ULL}}}) {
    ld::model::Report report;
    ASSERT_NO_THROW(report = analyse(trailer)) << trailer.dump();
    EXPECT_FALSE(report.agent.known) << trailer.dump();
    EXPECT_EQ(ld::report::render_text(report).find("the agent attached"), std::string::npos);
    EXPECT_FALSE(json::parse(ld::report::render_json(report)).contains("agent"));
  }
}
