// User-space frames: CPython's line tables decoded as the interpreters themselves do
// (tests/data/frames/linetables.jsonl, written by linetables_gen.py under 3.10-3.13), the
// frames of slow tokens against the typical token's from synthetic records, the finding's facts
// and every format's frames section; the outliers' folded stacks and their flame graph.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "analysis/frames.hpp"
#include "events.h"
#include "model/frames.hpp"
#include "probes/python_lines.hpp"
#include "report/flame_graph.hpp"
#include "report/report.hpp"
#include "report/svg.hpp"
#include "rules/report_facts.hpp"

using ld::analysis::EvidenceStore;
using nlohmann::json;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kPid = 100, kTid = 101;

TEST(PythonLines, EveryInstructionOfTheInterpretersOwnTables) {
  std::ifstream in(std::string(LD_TEST_DATA_DIR) + "/frames/linetables.jsonl");
  ASSERT_TRUE(in.is_open());
  std::string line;
  int versions = 0;
  while (std::getline(in, line)) {
    const json j = json::parse(line);
    const std::string v = j.at("version");
    SCOPED_TRACE(v);
    const uint32_t version = 0x0300 | static_cast<uint32_t>(std::stoi(v.substr(2)));
    const std::vector<uint8_t> table = j.at("table").get<std::vector<uint8_t>>();
    const int first = j.at("firstlineno");
    size_t checked = 0;
    for (const json& pair : j.at("lines")) {
      const int64_t instr = pair[0];
      const int want = pair[1];
      EXPECT_EQ(ld::probes::python_line(version, first, table.data(), table.size(), instr), want) << "instr " << instr;
      ++checked;
    }
    EXPECT_GT(checked, 40u);
    ++versions;
  }
  EXPECT_GE(versions, 4);
}

TEST(PythonLines, CutOrGarbageTablesGiveNoLineNotACrash) {
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xc0, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
  EXPECT_EQ(ld::probes::python_line(0x030b, 10, junk, sizeof(junk), 1000), -1);
  EXPECT_EQ(ld::probes::python_line(0x030a, 10, junk, sizeof(junk), 1000), -1);
  EXPECT_EQ(ld::probes::python_line(0x030b, 10, junk, 0, 3), -1);
  EXPECT_EQ(ld::probes::python_line(0x030b, 10, junk, 0, -1), 10);  // not started: the first line
  EXPECT_EQ(ld::probes::python_line(0x0309, 10, junk, sizeof(junk), 0), -1);
}

// ---- frames of slow tokens, from records as the perf probe writes them

std::vector<uint8_t> ustack_record(uint32_t tgid, int64_t id,
                                   const std::vector<std::pair<std::string, std::string>>& frames) {
  std::vector<uint8_t> buf(sizeof(ld_ustack) + frames.size() * sizeof(ld_uframe), 0);
  auto* r = reinterpret_cast<ld_ustack*>(buf.data());
  r->hdr.type = LD_EV_USTACK;
  r->hdr.size = static_cast<uint16_t>(buf.size());
  r->hdr.tgid = tgid;
  r->stack_id = id;
  r->depth = static_cast<uint32_t>(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    ld_uframe f{};
    std::strncpy(f.func, frames[i].first.c_str(), sizeof(f.func) - 1);
    std::strncpy(f.module, frames[i].second.c_str(), sizeof(f.module) - 1);
    std::memcpy(buf.data() + sizeof(ld_ustack) + i * sizeof(ld_uframe), &f, sizeof(f));
  }
  return buf;
}

struct Py {
  std::string func, file;
  int line;
};
std::vector<uint8_t> pystack_record(uint32_t tgid, uint64_t id, const std::vector<Py>& frames) {
  std::vector<uint8_t> buf(sizeof(ld_pystack) + frames.size() * sizeof(ld_pyframe), 0);
  auto* r = reinterpret_cast<ld_pystack*>(buf.data());
  r->hdr.type = LD_EV_PYSTACK;
  r->hdr.size = static_cast<uint16_t>(buf.size());
  r->hdr.tgid = tgid;
  r->stack_id = id;
  r->depth = static_cast<uint32_t>(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    ld_pyframe f{};
    f.line = frames[i].line;
    std::strncpy(f.func, frames[i].func.c_str(), sizeof(f.func) - 1);
    std::strncpy(f.file, frames[i].file.c_str(), sizeof(f.file) - 1);
    std::memcpy(buf.data() + sizeof(ld_pystack) + i * sizeof(ld_pyframe), &f, sizeof(f));
  }
  return buf;
}

void add(EvidenceStore& store, const std::vector<uint8_t>& rec) {
  ASSERT_TRUE(store.add(*reinterpret_cast<const ld_hdr*>(rec.data()), rec.size()));
}

void sample(EvidenceStore& store, uint64_t ts, int32_t ustack, uint64_t pystack) {
  ld_cpu_frames f{};
  f.hdr.type = LD_EV_CPU_FRAMES;
  f.hdr.size = sizeof(f);
  f.hdr.tgid = kPid;
  f.hdr.tid = kTid;
  f.hdr.ts_ns = ts;
  f.kstack_id = -1;
  f.user_mode = 1;
  f.ustack_id = ustack;
  f.pystack_id = pystack;
  ASSERT_TRUE(store.add(f.hdr, sizeof(f)));
}

// One request of 31 tokens, 10 ms apart, on thread kTid, but gap 15 takes 250 ms (the outlier);
// a sample every ms of each gap. `slow` and `typical` pick a sample's stacks by its place.
struct Scenario {
  ld::model::Report report;
  EvidenceStore store;
};

template <class Slow, class Typical>
void build(Scenario& s, Slow slow, Typical typical, const ld::analysis::FrameOptions& options = {}) {
  ld::model::RequestRow row;
  row.id = "r1";
  uint64_t t = 1000 * kMs;
  row.token_mono_ns.push_back(t);
  row.token_tid.push_back(kTid);
  for (int i = 1; i <= 30; ++i) {
    const uint64_t gap = i == 15 ? 250 * kMs : 10 * kMs;
    for (uint64_t at = t + kMs / 2; at < t + gap; at += kMs) {
      if (i == 15) slow(s.store, at, at - t);
      else typical(s.store, at);
    }
    t += gap;
    row.token_mono_ns.push_back(t);
    row.token_tid.push_back(kTid);
  }
  row.tokens = row.token_mono_ns.size();
  s.report.request_rows.push_back(row);
  ld::model::Outlier o;
  o.kind = ld::model::WindowKind::kTpot;
  o.request = "r1";
  o.token_index = 15;
  o.start_mono_ns = row.token_mono_ns[14];
  o.end_mono_ns = row.token_mono_ns[15];
  o.duration_ms = 250;
  o.tid = kTid;
  o.causes = {{ld::model::Cause::kCompute, 250, 1.0, json::object()}};
  s.report.outliers.push_back(o);
  s.report.attributed = true;
  s.store.finish();
  ld::analysis::attach_frames(s.report, s.store, options);
}

TEST(Frames, NativeSlowTokenNamesTheFunctionItRanBeyondATypicalToken) {
  Scenario s;
  add(s.store, ustack_record(kPid, 1,
                             {{"ld_wl::slow_detokenize", "ld-wl-frames_server"},
                              {"ld_wl::serve", "ld-wl-frames_server"},
                              {"start_thread", "libc.so.6"}}));
  add(s.store, ustack_record(kPid, 2,
                             {{"clock_gettime", "libc.so.6"},
                              {"ld_wl::compute_token", "ld-wl-frames_server"},
                              {"ld_wl::serve", "ld-wl-frames_server"},
                              {"start_thread", "libc.so.6"}}));
  build(
      s, [](EvidenceStore& st, uint64_t at, uint64_t into) { sample(st, at, into < 8 * kMs ? 2 : 1, 0); },
      [](EvidenceStore& st, uint64_t at) { sample(st, at, 2, 0); });
  const auto& o = s.report.outliers.front();
  EXPECT_EQ(o.frame_samples, 250u);
  ASSERT_FALSE(o.frames.empty());
  EXPECT_EQ(o.frames[0].function, "ld_wl::slow_detokenize");
  EXPECT_EQ(o.frames[0].where, "ld-wl-frames_server");
  EXPECT_FALSE(o.frames[0].python);
  EXPECT_NEAR(o.frames[0].share, 242.0 / 250.0, 1e-9);
  EXPECT_EQ(o.frames[0].typical_share, 0.0);
  // The functions every token runs are not "extra": the caller, the thread's start, the step.
  for (const auto& f : o.frames) {
    EXPECT_NE(f.function, "ld_wl::serve");
    EXPECT_NE(f.function, "ld_wl::compute_token");
  }
  ASSERT_FALSE(s.report.typical.frames.empty());
  EXPECT_EQ(s.report.typical.frames[0].function, "clock_gettime");  // innermost of the typical stack
  EXPECT_EQ(s.report.typical.frame_samples, 29u * 10u);
}

TEST(Frames, PythonFramesComeFirstWithTheirLine) {
  Scenario s;
  add(s.store, ustack_record(kPid, 3, {{"_PyEval_EvalFrameDefault", "python3.11"}, {"main", "python3.11"}}));
  add(s.store, pystack_record(kPid, 10,
                              {{"render_usage_summary", "/srv/app/server.py", 31},
                               {"Handler.do_POST", "/srv/app/server.py", 60}}));
  add(s.store, pystack_record(kPid, 11,
                              {{"render_usage_summary", "/srv/app/server.py", 33},
                               {"Handler.do_POST", "/srv/app/server.py", 60}}));
  add(s.store,
      pystack_record(kPid, 12,
                     {{"step_token", "/srv/app/server.py", 20}, {"Handler.do_POST", "/srv/app/server.py", 58}}));
  build(
      s, [](EvidenceStore& st, uint64_t at, uint64_t into) { sample(st, at, 3, into % 3 ? 10 : 11); },
      [](EvidenceStore& st, uint64_t at) { sample(st, at, 3, 12); });
  const auto& o = s.report.outliers.front();
  ASSERT_FALSE(o.frames.empty());
  EXPECT_TRUE(o.frames[0].python);
  EXPECT_EQ(o.frames[0].function, "render_usage_summary");
  EXPECT_EQ(o.frames[0].where, "server.py:31");  // the line most samples were at
  EXPECT_DOUBLE_EQ(o.frames[0].share, 1.0);
  // The interpreter's own frames run in every token: no excess.
  for (const auto& f : o.frames) EXPECT_NE(f.function, "_PyEval_EvalFrameDefault");
  ASSERT_FALSE(s.report.typical.frames.empty());
  EXPECT_EQ(s.report.typical.frames[0].function, "step_token");

  // The finding's facts and every format's frames section name it.
  const auto facts = ld::rules::report_facts(s.report);
  ASSERT_NE(facts.get("frames.top"), nullptr);
  EXPECT_EQ(std::get<std::string>(*facts.get("frames.top")), "render_usage_summary");
  EXPECT_EQ(std::get<double>(*facts.get("frames.top_outliers")), 1.0);
  const std::string said = " (server.py:31) in 1 of 1 slow tokens, 100% of their samples (typical 0%)";
  EXPECT_NE(ld::report::render_text(s.report).find("render_usage_summary" + said), std::string::npos);
  EXPECT_NE(ld::report::render_html(s.report).find("render_usage_summary" + said), std::string::npos);
  EXPECT_NE(ld::report::render_markdown(s.report).find("render\\_usage\\_summary" + said), std::string::npos);
  const json j = json::parse(ld::report::render_json(s.report));
  EXPECT_EQ(j["outliers"][0]["frames"][0]["function"], "render_usage_summary");
  EXPECT_EQ(j["outliers"][0]["frames"][0]["runtime"], "python");
  EXPECT_EQ(j["attribution"]["typical"]["frames"][0]["function"], "step_token");
}

TEST(Frames, NoFramesInTheTraceLeavesTheReportAsItWas) {
  Scenario s;
  build(
      s,
      [](EvidenceStore& st, uint64_t at, uint64_t) {
        ld_cpu_sample c{};
        c.hdr.type = LD_EV_CPU_SAMPLE;
        c.hdr.size = sizeof(c);
        c.hdr.tgid = kPid;
        c.hdr.tid = kTid;
        c.hdr.ts_ns = at;
        c.kstack_id = -1;
        c.user_mode = 1;
        ASSERT_TRUE(st.add(c.hdr, sizeof(c)));
      },
      [](EvidenceStore&, uint64_t) {});
  EXPECT_TRUE(s.report.outliers.front().frames.empty());
  EXPECT_TRUE(s.report.typical.frames.empty());
  EXPECT_EQ(ld::report::render_text(s.report).find("frames ("), std::string::npos);
}

TEST(Frames, ShortOrLyingStackRecordsAreRefused) {
  EvidenceStore store;
  auto rec = ustack_record(kPid, 1, {{"f", "m"}, {"g", "m"}});
  reinterpret_cast<ld_ustack*>(rec.data())->depth = 9;  // more frames than the record holds
  EXPECT_FALSE(store.add(*reinterpret_cast<const ld_hdr*>(rec.data()), rec.size()));
  auto py = pystack_record(kPid, 1, {{"f", "x.py", 1}});
  EXPECT_FALSE(store.add(*reinterpret_cast<const ld_hdr*>(py.data()), sizeof(ld_pystack) + 10));
  EXPECT_FALSE(store.has_frames());
}

// ---- the outliers' samples as folded stacks (report.outlier_flame) and the flame graph

using Stack = std::vector<std::string>;

void native_stacks(EvidenceStore& store) {
  add(store, ustack_record(kPid, 1,
                           {{"ld_wl::slow_detokenize", "ld-wl-frames_server"},
                            {"ld_wl::serve", "ld-wl-frames_server"},
                            {"start_thread", "libc.so.6"}}));
  add(store, ustack_record(kPid, 2,
                           {{"clock_gettime", "libc.so.6"},
                            {"ld_wl::compute_token", "ld-wl-frames_server"},
                            {"ld_wl::serve", "ld-wl-frames_server"},
                            {"start_thread", "libc.so.6"}}));
}

uint64_t sum_of(const ld::model::FlameProfile& f) {
  return std::accumulate(f.stacks.begin(), f.stacks.end(), uint64_t{0},
                         [](uint64_t n, const ld::model::FlameStack& s) { return n + s.samples; });
}

TEST(Flame, OutliersSamplesFoldedRootFirstMostSamplesFirst) {
  Scenario s;
  native_stacks(s.store);
  build(
      s, [](EvidenceStore& st, uint64_t at, uint64_t into) { sample(st, at, into < 8 * kMs ? 2 : 1, 0); },
      [](EvidenceStore& st, uint64_t at) { sample(st, at, 2, 0); });
  const auto& flame = s.report.outlier_flame;
  EXPECT_EQ(flame.samples, 250u);  // the outlier's window only: the typical tokens' are not in it
  ASSERT_EQ(flame.stacks.size(), 2u);
  EXPECT_EQ(flame.stacks[0].frames, (Stack{"start_thread (libc.so.6)", "ld_wl::serve (ld-wl-frames_server)",
                                           "ld_wl::slow_detokenize (ld-wl-frames_server)"}));
  EXPECT_EQ(flame.stacks[0].samples, 242u);
  EXPECT_FALSE(flame.stacks[0].python);
  EXPECT_EQ(flame.stacks[1].frames, (Stack{"start_thread (libc.so.6)", "ld_wl::serve (ld-wl-frames_server)",
                                           "ld_wl::compute_token (ld-wl-frames_server)", "clock_gettime (libc.so.6)"}));
  EXPECT_EQ(flame.stacks[1].samples, 8u);

  // A second outlier whose window overlaps the first on the same thread: its samples once.
  ld::model::Outlier twin = s.report.outliers.front();
  twin.start_mono_ns += 100 * kMs;
  twin.end_mono_ns += 5 * kMs;  // 5 ms of a typical gap beyond
  s.report.outliers.push_back(twin);
  ld::analysis::attach_frames(s.report, s.store);
  EXPECT_EQ(s.report.outlier_flame.samples, 255u);
  EXPECT_EQ(sum_of(s.report.outlier_flame), 255u);
}

TEST(Flame, DeepStacksKeepTheirInnermostFrames) {
  Scenario s;
  native_stacks(s.store);
  ld::analysis::FrameOptions options;
  options.flame_depth = 2;
  build(
      s, [](EvidenceStore& st, uint64_t at, uint64_t) { sample(st, at, 1, 0); }, [](EvidenceStore&, uint64_t) {},
      options);
  ASSERT_EQ(s.report.outlier_flame.stacks.size(), 1u);
  EXPECT_EQ(s.report.outlier_flame.stacks[0].frames,
            (Stack{"ld_wl::serve (ld-wl-frames_server)", "ld_wl::slow_detokenize (ld-wl-frames_server)"}));
}

TEST(Flame, PythonStacksAloneWithTheirLinesAndUnnamedFramesKept) {
  Scenario s;
  add(s.store, ustack_record(kPid, 3, {{"_PyEval_EvalFrameDefault", "python3.11"}, {"main", "python3.11"}}));
  add(s.store, ustack_record(kPid, 4, {{"?", "libfoo.so"}, {"", ""}, {"main", "app"}}));
  add(s.store, pystack_record(kPid, 10,
                              {{"render_usage_summary", "/srv/app/server.py", 31},
                               {"Handler.do_POST", "/srv/app/server.py", 60}}));
  // 100 samples in Python, 150 in native code without symbols.
  build(
      s,
      [](EvidenceStore& st, uint64_t at, uint64_t into) {
        sample(st, at, into < 100 * kMs ? 3 : 4, into < 100 * kMs ? 10 : 0);
      },
      [](EvidenceStore& st, uint64_t at) { sample(st, at, 3, 10); });
  const auto& flame = s.report.outlier_flame;
  EXPECT_EQ(flame.samples, 250u);
  ASSERT_EQ(flame.stacks.size(), 2u);
  EXPECT_EQ(flame.stacks[0].frames, (Stack{"main (app)", "[unknown]", "[unknown] (libfoo.so)"}));
  EXPECT_EQ(flame.stacks[0].samples, 150u);
  EXPECT_FALSE(flame.stacks[0].python);
  // The Python frames only, not the interpreter's native ones under them.
  EXPECT_EQ(flame.stacks[1].frames, (Stack{"Handler.do_POST (server.py:60)", "render_usage_summary (server.py:31)"}));
  EXPECT_EQ(flame.stacks[1].samples, 100u);
  EXPECT_TRUE(flame.stacks[1].python);
}

TEST(Flame, AtMost200StacksTheRestSummed) {
  Scenario s;
  for (int64_t id = 1; id <= 210; ++id)
    add(s.store, ustack_record(kPid, id, {{"f" + std::to_string(id), "m"}, {"main", "m"}}));
  // 250 samples: stacks 1..209 one each, stack 210 the other 41.
  build(
      s,
      [](EvidenceStore& st, uint64_t at, uint64_t into) {
        sample(st, at, static_cast<int32_t>(std::min<uint64_t>(into / kMs + 1, 210)), 0);
      },
      [](EvidenceStore&, uint64_t) {});
  const auto& flame = s.report.outlier_flame;
  EXPECT_EQ(flame.samples, 250u);
  ASSERT_EQ(flame.stacks.size(), 201u);
  EXPECT_EQ(flame.stacks[0].frames, (Stack{"main (m)", "f210 (m)"}));
  EXPECT_EQ(flame.stacks[0].samples, 41u);
  EXPECT_EQ(flame.stacks[1].samples, 1u);
  EXPECT_EQ(flame.stacks.back().frames, Stack{ld::model::kOtherStacks});
  EXPECT_EQ(flame.stacks.back().samples, 10u);
  EXPECT_EQ(sum_of(flame), 250u);
}

// A profile with a C++ template's name: main -> std::vector<int> (6), main -> g (4); Python
// Handler.do_POST (5). The call tree: the root, main, std::vector<int>, g, Handler.do_POST.
ld::model::Report flame_report() {
  ld::model::Report r;
  r.outlier_flame.samples = 15;
  r.outlier_flame.stacks = {{{"main (app)", "std::vector<int> (app)"}, false, 6},
                            {{"Handler.do_POST (server.py:60)"}, true, 5},
                            {{"main (app)", "g (app)"}, false, 4}};
  return r;
}

std::string flame_svg_of(const std::string& html) {
  const size_t at = html.find(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1000 54\" width=\"1000\" "
      "height=\"54\" role=\"img\" aria-label=\"Flame graph");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) - at);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Flame, HtmlDrawsABoxPerCallTreeNodeWithEscapedTooltips) {
  const std::string html = ld::report::render_html(flame_report());
  const std::string svg = flame_svg_of(html);  // three rows of 18 px: the root, main, its callees
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(count(svg, "<rect "), 5u);
  EXPECT_NE(svg.find("<title>std::vector&lt;int&gt; (app) — 6 samples (40.0%)</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>main (app) — 10 samples (66.7%)</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>all samples of the slow tokens — 15 samples (100.0%)</title>"), std::string::npos);
  EXPECT_EQ(html.find("std::vector<int>"), std::string::npos);
  // main is wider than its callees together: 2/3 of the width, they split it 6:4.
  EXPECT_NE(svg.find("<rect x=\"0.0\" y=\"18.0\" width=\"665.7\""), std::string::npos);
  EXPECT_NE(svg.find("<rect x=\"0.0\" y=\"36.0\" width=\"399.0\""), std::string::npos);
  EXPECT_NE(svg.find("<rect x=\"400.0\" y=\"36.0\" width=\"265.7\""), std::string::npos);
  // Python in blue, native warm: the red channel is the larger only for native code.
  const size_t py = svg.find("Handler.do_POST");
  const size_t fill = svg.find("fill=\"#", py);  // the group's tooltip, then its box
  ASSERT_NE(fill, std::string::npos);
  EXPECT_LT(std::stoi(svg.substr(fill + 7, 2), nullptr, 16), std::stoi(svg.substr(fill + 11, 2), nullptr, 16));
  EXPECT_NE(html.find("Root at the top"), std::string::npos);
  // Nothing without frames.
  EXPECT_EQ(ld::report::render_html(ld::model::Report{}).find("Flame graph"), std::string::npos);
}

TEST(Flame, NarrowBoxesAreLeftOutAndLongLabelsCut) {
  ld::model::FlameProfile p;
  p.samples = 1000;
  p.stacks = {{{"main (app)", std::string(300, 'x')}, false, 997}, {{"rare (app)", "under (app)"}, false, 3}};
  const ld::report::FlameGraph g = ld::report::flame_graph(p, 1000);
  EXPECT_EQ(g.boxes, 3u);    // the root, main, xxx...
  EXPECT_EQ(g.dropped, 2u);  // rare (0.3% of the width) and what it called
  EXPECT_EQ(g.depth, 2u);
  EXPECT_EQ(g.svg.find("rare"), std::string::npos);
  EXPECT_NE(g.svg.find(std::string(100, 'x') + "…</text>"), std::string::npos);
  EXPECT_EQ(g.svg.find(std::string(200, 'x') + "</text>"), std::string::npos);
  EXPECT_TRUE(ld::report::flame_graph({}, 1000).svg.empty());
  EXPECT_EQ(ld::report::fit_text("héllo wörld", 5), "héll…");
  EXPECT_EQ(ld::report::fit_text("héllo", 5), "héllo");
  EXPECT_EQ(ld::report::fit_text("héllo", 2), "");
}

TEST(Flame, JsonHasTheStacksOnlyWhenThereAreAny) {
  const json j = json::parse(ld::report::render_json(flame_report()));
  ASSERT_TRUE(j.contains("outlier_flame"));
  EXPECT_EQ(j["outlier_flame"]["samples"], 15);
  ASSERT_EQ(j["outlier_flame"]["stacks"].size(), 3u);
  EXPECT_EQ(j["outlier_flame"]["stacks"][0]["frames"], json({"main (app)", "std::vector<int> (app)"}));
  EXPECT_EQ(j["outlier_flame"]["stacks"][0]["runtime"], "native");
  EXPECT_EQ(j["outlier_flame"]["stacks"][0]["samples"], 6);
  EXPECT_EQ(j["outlier_flame"]["stacks"][1]["runtime"], "python");
  EXPECT_FALSE(json::parse(ld::report::render_json(ld::model::Report{})).contains("outlier_flame"));
}

TEST(Frames, KindOfCodeForTheRemedy) {
  auto kind = [](bool py, const char* fn, const char* where) {
    ld::model::FrameShare f;
    f.python = py;
    f.function = fn;
    f.where = where;
    return ld::model::frame_kind(f);
  };
  EXPECT_EQ(kind(true, "JSONEncoder.iterencode", "encoder.py:200"), "json");
  EXPECT_EQ(kind(true, "dumps", "__init__.py:231"), "json");
  EXPECT_EQ(kind(true, "Logger._log", "__init__.py:1600"), "logging");
  EXPECT_EQ(kind(false, "gc_collect_main", "python3.11"), "gc");
  EXPECT_EQ(kind(false, "ld_wl::slow_detokenize", "ld-wl-frames_server"), "tokenizer");
  EXPECT_EQ(kind(true, "render_usage_summary", "server.py:31"), "code");
}

}  // namespace
