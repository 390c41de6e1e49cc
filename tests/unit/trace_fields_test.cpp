// A trace whose header or trailer has fields of the wrong JSON type (hand-edited, damaged)
// still gives its report: each such field counts as absent and is named in one warning.

#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "report/report.hpp"

namespace {

using nlohmann::json;

json good_header() {
  return {{"clock", {{"start_mono_ns", 1'000'000'000ULL}, {"realtime_minus_monotonic_ns", 5}}},
          {"target", {{"pids", json::array({42})}, {"comm", "vllm"}, {"exe", "/usr/bin/python3"}, {"start_mono_ns", 1}}},
          {"host", {{"machine", "x86_64"}}}};
}

json good_trailer() {
  return {{"end_mono_ns", 6'000'000'000ULL},
          {"probes", json::array({{{"name", "sock"}, {"status", "attached"}, {"reason", ""}, {"events", 10}, {"lost", 0}}})}};
}

std::string mistyped_warning(const ld::model::Report& report) {
  for (const auto& w : report.warnings)
    if (w.find("wrong type") != std::string::npos) return w;
  return "";
}

ld::model::Report analyse(const json& header, const json& trailer, bool tracks = false) {
  ld::analysis::EventAnalyzer analyzer;
  if (tracks) analyzer.keep_thread_tracks();
  return analyzer.finish(header, trailer, "sse", {});
}

TEST(TraceFields, WellTypedFieldsAreReadWithoutWarning) {
  const auto report = analyse(good_header(), good_trailer());
  EXPECT_EQ(report.target.comm, "vllm");
  EXPECT_EQ(report.target.pids, std::vector<int>{42});
  ASSERT_EQ(report.probes.size(), 1u);
  EXPECT_EQ(report.probes[0].events, 10u);
  EXPECT_EQ(mistyped_warning(report), "");
}

TEST(TraceFields, EachMistypedFieldCostsOnlyItself) {
  struct Case {
    const char* where;
    json header, trailer;
  };
  std::vector<Case> cases;
  auto header_with = [](auto edit) { json h = good_header(); edit(h); return h; };
  auto trailer_with = [](auto edit) { json t = good_trailer(); edit(t); return t; };
  cases.push_back({"header clock", header_with([](json& h) { h["clock"] = "soon"; }), good_trailer()});
  cases.push_back({"header clock.start_mono_ns", header_with([](json& h) { h["clock"]["start_mono_ns"] = "1"; }), good_trailer()});
  cases.push_back({"header clock.realtime_minus_monotonic_ns",
                   header_with([](json& h) { h["clock"]["realtime_minus_monotonic_ns"] = 1.5; }), good_trailer()});
  cases.push_back({"header target", header_with([](json& h) { h["target"] = json::array({1}); }), good_trailer()});
  cases.push_back({"header target.comm", header_with([](json& h) { h["target"]["comm"] = 7; }), good_trailer()});
  cases.push_back({"header target.start_mono_ns", header_with([](json& h) { h["target"]["start_mono_ns"] = -3; }), good_trailer()});
  cases.push_back({"header host", header_with([](json& h) { h["host"] = 1; }), good_trailer()});
  cases.push_back({"header host.machine", header_with([](json& h) { h["host"]["machine"] = false; }), good_trailer()});
  cases.push_back({"trailer end_mono_ns", good_header(), trailer_with([](json& t) { t["end_mono_ns"] = "6"; })});
  cases.push_back({"probes[].name", good_header(), trailer_with([](json& t) { t["probes"][0]["name"] = 1; })});
  cases.push_back({"probes[].events", good_header(), trailer_with([](json& t) { t["probes"][0]["events"] = "many"; })});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.where);
    ld::model::Report report;
    ASSERT_NO_THROW(report = analyse(c.header, c.trailer, /*tracks=*/true));
    const std::string warning = mistyped_warning(report);
    EXPECT_NE(warning.find(c.where), std::string::npos) << warning;
    // The other fields are still read.
    if (std::string(c.where).rfind("header target", 0) != 0) {
      EXPECT_EQ(report.target.comm, "vllm");
    }
    EXPECT_EQ(report.probes.size(), 1u);
  }
}

TEST(TraceFields, AHeaderThatIsNoObjectStillGivesAReport) {
  for (const json& header : {json("text"), json::array(), json(nullptr), json(3)}) {
    ld::model::Report report;
    ASSERT_NO_THROW(report = analyse(header, good_trailer(), /*tracks=*/true)) << header.dump();
    EXPECT_EQ(report.probes.size(), 1u);
  }
}

}  // namespace
