// A trace whose header or trailer has fields of the wrong JSON type (hand-edited, damaged)
// still gives its report: each such field counts as absent and is named in one warning.

#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "report/report.hpp"
#include "trace/trace_header.hpp"

namespace {

using nlohmann::json;

json good_header() {
  return {
      {"clock", {{"start_mono_ns", 1'000'000'000ULL}, {"realtime_minus_monotonic_ns", 5}}},
      {"target", {{"pids", json::array({42})}, {"comm", "vllm"}, {"exe", "/usr/bin/python3"}, {"start_mono_ns", 1}}},
      {"host", {{"machine", "x86_64"}}}};
}

json good_trailer() {
  return {{"end_mono_ns", 6'000'000'000ULL},
          {"probes",
           json::array({{{"name", "sock"}, {"status", "attached"}, {"reason", ""}, {"events", 10}, {"lost", 0}}})}};
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
  auto header_with = [](auto edit) {
    json h = good_header();
    edit(h);
    return h;
  };
  auto trailer_with = [](auto edit) {
    json t = good_trailer();
    edit(t);
    return t;
  };
  cases.push_back({"header clock", header_with([](json& h) { h["clock"] = "soon"; }), good_trailer()});
  cases.push_back(
      {"header clock.start_mono_ns", header_with([](json& h) { h["clock"]["start_mono_ns"] = "1"; }), good_trailer()});
  cases.push_back({"header clock.realtime_minus_monotonic_ns",
                   header_with([](json& h) { h["clock"]["realtime_minus_monotonic_ns"] = 1.5; }), good_trailer()});
  cases.push_back({"header target", header_with([](json& h) { h["target"] = json::array({1}); }), good_trailer()});
  cases.push_back({"header target.comm", header_with([](json& h) { h["target"]["comm"] = 7; }), good_trailer()});
  cases.push_back(
      {"header target.start_mono_ns", header_with([](json& h) { h["target"]["start_mono_ns"] = -3; }), good_trailer()});
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

// The typed header and trailer: what the recorder writes reads back as the same values, and
// a trace of an early version (probes in the header, no agent cost) still reads.
TEST(TraceMeta, HeaderAndTrailerRoundTripThroughJson) {
  ld::trace::TraceHeader h;
  h.agent_version = "9.9.9";
  h.created_unix_ns = 1'700'000'000'000'000'000ULL;
  h.realtime_minus_monotonic_ns = -42;
  h.start_mono_ns = 123;
  h.target.pids = {7, 8};
  h.target.comm = "vllm";
  h.target.exe = "/usr/bin/python3";
  h.target_start_mono_ns = 100;
  h.children = true;
  h.host = {{"machine", "aarch64"}, {"facts", {{"sysctl.vm.swappiness", 60}}}};
  h.token_source = "jsonl:client.jsonl";
  h.duration_requested_ms = 30'000;
  h.probes_requested = {"sock", "sched"};
  ld::trace::TraceTrailer t;
  t.present = true;
  t.end_mono_ns = 456;
  t.stop_reason = ld::trace::StopReason::kSignal;
  t.attach_ms = 12.5;
  t.probes = {{"sock", ld::model::ProbeState::kAttached, "why", 10, 2}};
  t.agent = {true, 1.5, 2.5, 3000, 4.25, 5, 6.5, 40.125};

  const auto meta = ld::trace::read_meta(ld::trace::to_json(h), ld::trace::to_json(t));
  EXPECT_TRUE(meta.mistyped.empty()) << meta.mistyped_warning();
  const auto& rh = meta.header;
  EXPECT_EQ(rh.agent_version, "9.9.9");
  EXPECT_EQ(rh.created_unix_ns, h.created_unix_ns);
  EXPECT_EQ(rh.realtime_minus_monotonic_ns, -42);
  EXPECT_EQ(rh.start_mono_ns, 123u);
  EXPECT_EQ(rh.target.pids, (std::vector<int>{7, 8}));
  EXPECT_EQ(rh.target.comm, "vllm");
  EXPECT_EQ(rh.target.exe, "/usr/bin/python3");
  EXPECT_EQ(rh.target_start_mono_ns, 100u);
  EXPECT_TRUE(rh.children);
  EXPECT_EQ(rh.machine, "aarch64");
  EXPECT_EQ(rh.host, h.host);
  EXPECT_EQ(rh.token_source, "jsonl:client.jsonl");
  EXPECT_EQ(rh.duration_requested_ms, 30'000u);
  EXPECT_EQ(rh.probes_requested, h.probes_requested);
  const auto& rt = meta.trailer;
  EXPECT_TRUE(rt.present);
  EXPECT_EQ(rt.end_mono_ns, 456u);
  EXPECT_EQ(rt.stop_reason, ld::trace::StopReason::kSignal);
  EXPECT_EQ(ld::trace::to_json(rt)["stop_reason"], "signal");
  EXPECT_DOUBLE_EQ(rt.attach_ms, 12.5);
  ASSERT_EQ(rt.probes.size(), 1u);
  EXPECT_EQ(rt.probes[0].lost, 2u);
  EXPECT_TRUE(rt.agent.known);
  EXPECT_EQ(rt.agent.wakeups, 5u);
  EXPECT_DOUBLE_EQ(rt.agent.peak_rss_mib, 40.125);
}

TEST(TraceMeta, AProbeStatusOfAnotherVersionIsKeptAsWritten) {
  json trailer = good_trailer();
  trailer["probes"] = json::array(
      {{{"name", "sock"}, {"status", "attached"}}, {{"name", "gpu"}, {"status", "paused"}}, {{"name", "old"}}});
  const auto meta = ld::trace::read_meta(good_header(), trailer);
  ASSERT_EQ(meta.trailer.probes.size(), 3u);
  EXPECT_EQ(meta.trailer.probes[0].status, ld::model::ProbeState::kAttached);
  EXPECT_EQ(meta.trailer.probes[1].status, ld::model::ProbeState::kOther);
  EXPECT_EQ(meta.trailer.probes[1].status_name(), "paused");
  EXPECT_EQ(meta.trailer.probes[2].status_name(), "?");  // no status: what the reports always showed
  const json again = ld::trace::to_json(meta.trailer);
  EXPECT_EQ(again["probes"][0]["status"], "attached");
  EXPECT_EQ(again["probes"][1]["status"], "paused");
  EXPECT_EQ(again["probes"][2]["status"], "?");
}

TEST(TraceMeta, AStopReasonOfAnotherVersionIsKeptAsWritten) {
  for (const char* name : {"duration", "signal", "target-exit", "segment", "window", "dump", "", "oom-kill"}) {
    json trailer = good_trailer();
    trailer["stop_reason"] = name;
    const auto meta = ld::trace::read_meta(good_header(), trailer);
    EXPECT_TRUE(meta.mistyped.empty()) << name;
    EXPECT_EQ(meta.trailer.stop_reason_name(), name);
    EXPECT_EQ(meta.trailer.stop_reason == ld::trace::StopReason::kOther, std::string(name) == "oom-kill") << name;
    EXPECT_EQ(ld::trace::to_json(meta.trailer)["stop_reason"], name);
  }
  const auto none = ld::trace::read_meta(good_header(), good_trailer());  // no stop_reason at all
  EXPECT_EQ(none.trailer.stop_reason, ld::trace::StopReason::kNone);
  EXPECT_EQ(ld::trace::to_json(none.trailer)["stop_reason"], "");
}

TEST(TraceMeta, AnEarlyTraceWithProbesInTheHeaderAndNoTrailerStillReads) {
  json header = good_header();
  header["probes"] = good_trailer()["probes"];
  const auto meta = ld::trace::read_meta(header, nullptr);
  EXPECT_FALSE(meta.trailer.present);
  EXPECT_FALSE(meta.trailer.end_mono_ns.has_value());
  EXPECT_FALSE(meta.trailer.agent.known);
  ASSERT_EQ(meta.header.probes.size(), 1u);
  EXPECT_EQ(meta.header.probes[0].events, 10u);
  EXPECT_EQ(meta.header.token_source, "sse");  // absent: socket sends
  EXPECT_TRUE(meta.mistyped.empty());
  const auto report = analyse(header, nullptr);
  ASSERT_EQ(report.probes.size(), 1u);
  EXPECT_EQ(report.probes[0].name, "sock");
}

TEST(TraceMeta, RecordsOfANewerLayoutAreSaidToNeedTheirOwnVersion) {
  json header = good_header();
  header["record_layout_version"] = LD_RECORD_LAYOUT_VERSION + 1;
  header["agent"] = {{"name", "latency-doctor"}, {"version", "9.0.0"}};
  const auto report = analyse(header, good_trailer());
  bool said = false;
  for (const auto& w : report.warnings)
    said = said || w.find("read it with the version that recorded it (9.0.0)") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(ld::trace::read_meta(good_header(), nullptr).header.record_layout_version, 1u);  // before the field
}
