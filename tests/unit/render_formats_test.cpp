// The HTML, Markdown and Perfetto renderers, from Reports built by hand so that every plot and
// table has something to show (outliers with causes, findings, a fit, a typical profile).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/summary.hpp"
#include "analysis/thread_tracks.hpp"
#include "model/cause.hpp"
#include "report/report.hpp"
#include "report/report_view.hpp"
#include "report/svg.hpp"

namespace {

using ld::model::CauseTime;
using ld::model::Outlier;
using ld::model::Report;
using ld::model::Request;
using ld::model::Timeline;
using nlohmann::json;

constexpr uint64_t kMs = 1'000'000;
constexpr int64_t kOffset = 1'700'000'000'000'000'000;
constexpr uint64_t kBase = 5'000 * kMs;  // monotonic time of the window start
const std::string kHostile = "<script>alert('x')</script>|pwn";

Request request(const std::string& id, uint64_t start_ms, const std::vector<uint64_t>& tokens_ms, uint64_t input_bytes,
                uint32_t tid) {
  Request r;
  r.id = id;
  r.tgid = 42;
  r.start_ns = kBase + start_ms * kMs;
  for (uint64_t t : tokens_ms) {
    r.token_ns.push_back(kBase + t * kMs);
    r.token_tid.push_back(tid);
  }
  r.input_bytes = input_bytes;
  r.complete = true;
  return r;
}

std::vector<uint64_t> tokens_every(uint64_t first_ms, uint64_t gap_ms, size_t n) {
  std::vector<uint64_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(first_ms + gap_ms * i);
  return t;
}

Outlier outlier(const Report& r, ld::model::WindowKind kind, size_t row, size_t token, std::vector<CauseTime> causes) {
  const auto& req = r.request_rows.at(row);
  Outlier o;
  o.kind = kind;
  o.request = req.id;
  o.token_index = token;
  o.start_mono_ns = token == 0 ? req.start_mono_ns : req.token_mono_ns.at(token - 1);
  o.end_mono_ns = req.token_mono_ns.at(token);
  o.start_unix_ns = ld::model::mono_to_unix_ns(o.start_mono_ns, kOffset);
  o.duration_ms = static_cast<double>(o.end_mono_ns - o.start_mono_ns) / 1e6;
  o.baseline_ms = 40;
  o.tid = req.token_tid.at(token);
  o.causes = std::move(causes);
  return o;
}

// Three requests (one with a 400 ms fsync gap, one with a slow first token), a fit, findings,
// host facts, a hostile process name and lost events.
Report sample_report() {
  Timeline t;
  t.requests.push_back(request("42:c1#1", 0, tokens_every(100, 40, 10), 1000, 43));
  auto slow = tokens_every(1100, 40, 10);
  for (size_t i = 5; i < slow.size(); ++i) slow[i] += 360;  // token 5 comes 400 ms after token 4
  t.requests.push_back(request("42:c1#2", 1000, slow, 4000, 43));
  t.requests.push_back(request("42:c2#1", 3000, tokens_every(3900, 40, 6), 16000, 44));
  ld::model::Target target{{42, 43}, kHostile, "/opt/llm/server|v2", {{43, kHostile, "a child of 42"}}};
  Report r = ld::analysis::build_report(t, target, kBase, kBase + 10'000 * kMs, kOffset);
  r.attributed = true;
  r.outliers.push_back(
      outlier(r, ld::model::WindowKind::kTpot, 1, 5,
              {{ld::model::Cause::kDiskIo, 300, 0.75, {{"syscall", "fsync"}, {"path", "/var/log/<app>.log"}}},
               {ld::model::Cause::kCompute, 60, 0.15, json::object()}}));
  r.outliers.push_back(outlier(r, ld::model::WindowKind::kTtft, 2, 0,
                               {{ld::model::Cause::kKvAlloc, 500, 0.55, {{"mmap_bytes", 1 << 30}}}}));
  r.typical = {40,
               1600,
               {{ld::model::Cause::kCompute, 1400, 0.875, json::object()},
                {ld::model::Cause::kCpuContention, 100, 0.0625, json::object()}},
               {},
               0,
               {},
               0};
  r.ttft_fit = {true, "bytes", 5.0, 20.0, 0.93, 3};
  r.periodicity = {true, 60.0, 4, "pid 812 (prometheus) ran"};
  ld::model::Finding f;
  f.rule = "disk-fsync-on-token-path";
  f.cause = ld::model::Cause::kDiskIo;
  f.severity = "crit";
  f.title = "fsync | on the token path";
  f.evidence = "1 gap waited 300 ms in fsync of /var/log/<app>.log";
  f.remedy = "log asynchronously, or to tmpfs";
  f.sysctl.push_back({"vm.dirty_background_bytes", "67108864", "0", "more dirty data in memory"});
  f.verify = "strace -f -e fsync -p 42";
  r.findings.push_back(f);
  r.host = {{"kernel", "6.1.0-test"},
            {"cpu_model", "Test CPU @ 2.0GHz"},
            {"cpus", 2},
            {"governor", "powersave"},
            {"sysctl", {{"net.core.somaxconn", "4096"}}},
            {"cgroup", {{"cpu_max", "200000 100000"}}}};
  r.probes.push_back({"sock", ld::model::ProbeState::kAttached, "", 1000, 0});
  r.probes.push_back({"sched", ld::model::ProbeState::kAttached, "", 5000, 17});
  r.warnings.push_back("a warning with <b>markup</b>");
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// ---------------------------------------------------------------- shared pieces

TEST(ReportView, EscapeXmlNeutralisesMarkupAndBadBytes) {
  EXPECT_EQ(ld::report::escape_xml("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(ld::report::escape_xml(std::string("a\x01"
                                               "b")),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ld::report::escape_xml("\xC3\xA9"), "\xC3\xA9");                                  // é stays
  EXPECT_EQ(ld::report::escape_xml("\xC3"), "\xEF\xBF\xBD");                                  // truncated sequence
  EXPECT_EQ(ld::report::escape_xml("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ld::report::escape_xml("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
}

TEST(ReportView, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(ld::report::nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(ld::report::nice_ticks(0, 0.9, 4), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8}));
  EXPECT_EQ(ld::report::nice_ticks(0, 0, 4).size(), 1u);
  EXPECT_EQ(ld::report::nice_ticks(0, NAN, 4).size(), 1u);
  EXPECT_LE(ld::report::nice_ticks(0, 1e-320, 4).size(), 16u);  // denormal range: no endless loop
  EXPECT_LE(ld::report::nice_ticks(-1e300, 1e300, 4).size(), 16u);
}

TEST(CauseVocabulary, OneTableNamesEveryCauseWithItsOwnColour) {
  using ld::model::Cause;
  std::set<std::string_view> colours, ids;
  for (const auto& info : ld::model::kCauses) {
    colours.insert(info.color);
    ids.insert(info.id);
    EXPECT_EQ(ld::model::parse_cause(info.id), info.cause) << info.id;  // id and enum round-trip
    EXPECT_EQ(ld::model::cause_id(info.cause), info.id);
    EXPECT_FALSE(info.label.empty());
    EXPECT_FALSE(info.description.empty());
  }
  EXPECT_EQ(colours.size(), ld::model::kCauses.size());
  // The contract's vocabulary, in its order.
  const std::vector<std::string_view> contract{
      "kv_alloc",           "cpu_frequency",   "gil",          "disk_io", "time_wait", "cpu_contention",
      "cgroup_throttle",    "lock_contention", "swap_reclaim", "network", "app_wait",  "cold_start",
      "batch_interference", "gpu_busy",        "compute",      "unknown"};
  ASSERT_EQ(ids.size(), contract.size());
  for (size_t i = 0; i < contract.size(); ++i) EXPECT_EQ(ld::model::kCauses[i].id, contract[i]);
  EXPECT_EQ(ld::model::parse_cause("made_up"), std::nullopt);
  EXPECT_EQ(ld::model::cause_id(static_cast<Cause>(200)), "unknown");  // a damaged value reads as unknown
  EXPECT_TRUE(ld::model::cause_color_is_light(Cause::kUnknown));
  EXPECT_FALSE(ld::model::cause_color_is_light(Cause::kCgroupThrottle));
}

TEST(ReportView, LengthQuartilesPerRequest) {
  const Report r = sample_report();
  const auto s = ld::report::length_stats(r);
  EXPECT_EQ(s.input_bytes.n, 3u);
  EXPECT_DOUBLE_EQ(s.input_bytes.p25, 2500);  // 1000, 4000, 16000
  EXPECT_DOUBLE_EQ(s.input_bytes.p50, 4000);
  EXPECT_DOUBLE_EQ(s.input_bytes.p75, 10000);
  EXPECT_EQ(s.input_tokens.n, 0u);            // no token log: unknown
  EXPECT_DOUBLE_EQ(s.output_tokens.p50, 10);  // 10, 10, 6
  EXPECT_DOUBLE_EQ(s.output_tokens.p25, 8);
}

TEST(ReportView, HistogramPutsAFarTailInOneOverflowBin) {
  std::vector<double> gaps(99, 40.0);
  gaps.push_back(5000);
  const auto h = ld::report::make_histogram(gaps, 10);
  EXPECT_EQ(h.above, 1u);
  EXPECT_LT(h.hi, 5000);
  uint64_t in_bins = 0;
  for (uint64_t c : h.counts) in_bins += c;
  EXPECT_EQ(in_bins, 99u);

  const auto even = ld::report::make_histogram({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5);
  EXPECT_EQ(even.above, 0u);
  EXPECT_DOUBLE_EQ(even.hi, 10);
  EXPECT_EQ(even.counts, (std::vector<uint64_t>{2, 2, 2, 2, 3}));  // the max falls in the last bin
  EXPECT_TRUE(ld::report::make_histogram({}, 5).counts.empty());
}

TEST(ReportView, BoxWhiskersStopAtOnePointFiveIqr) {
  const auto b = ld::report::box_stats({10, 11, 12, 13, 14, 100});
  EXPECT_DOUBLE_EQ(b.p50, 12.5);
  EXPECT_DOUBLE_EQ(b.whisker_lo, 10);
  EXPECT_DOUBLE_EQ(b.whisker_hi, 14);  // 100 is beyond p75 + 1.5 IQR
}

TEST(ReportView, CauseTotalsAddTheUnexplainedRestAsUnknown) {
  const Report r = sample_report();
  const auto gaps = ld::report::outlier_totals(r, ld::model::WindowKind::kTpot);
  EXPECT_EQ(gaps.windows, 1u);
  EXPECT_DOUBLE_EQ(gaps.total_ms, 400);
  ASSERT_EQ(gaps.causes.size(), 3u);
  EXPECT_EQ(gaps.causes[0].cause, ld::model::Cause::kDiskIo);
  EXPECT_EQ(gaps.causes[1].cause, ld::model::Cause::kCompute);
  EXPECT_EQ(gaps.causes[2].cause, ld::model::Cause::kUnknown);
  EXPECT_DOUBLE_EQ(gaps.causes[2].ms, 40);
  double shares = 0;
  for (const auto& c : gaps.causes) shares += c.share;
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_EQ(ld::report::dominant_cause(r.outliers[1]), ld::model::Cause::kKvAlloc);
}

TEST(ReportView, TtftBucketsByInputLengthCarryTheFit) {
  const Report r = sample_report();
  const auto buckets = ld::report::ttft_by_input(r, 5);
  ASSERT_EQ(buckets.size(), 3u);  // fewer requests than buckets
  EXPECT_DOUBLE_EQ(buckets[0].input_lo, 1000);
  EXPECT_DOUBLE_EQ(buckets[2].input_hi, 16000);
  EXPECT_DOUBLE_EQ(buckets[2].ttft_p50, 900);
  EXPECT_DOUBLE_EQ(buckets[1].fitted_ms, 5.0 * std::sqrt(4000.0) + 20.0);
}

TEST(ReportView, EnvironmentNamesHostFactsVersionProbesAndLostEvents) {
  const auto rows = ld::report::environment_rows(sample_report());
  std::map<std::string, std::string> by_label;
  for (const auto& row : rows) by_label[row.label] = row.value;
  EXPECT_EQ(by_label["kernel"], "6.1.0-test");
  EXPECT_EQ(by_label["CPU model"], "Test CPU @ 2.0GHz");
  EXPECT_EQ(by_label["CPU governor"], "powersave");
  EXPECT_EQ(by_label["sysctl.net.core.somaxconn"], "4096");
  EXPECT_EQ(by_label["cgroup.cpu_max"], "200000 100000");
  EXPECT_EQ(by_label["server executable"], "/opt/llm/server|v2");
  EXPECT_EQ(by_label["lost events"], "17");
  EXPECT_EQ(by_label["latency-doctor"], LD_VERSION);
  EXPECT_NE(by_label["trace window"].find("UTC"), std::string::npos);
}

TEST(ReportView, TimelineSampleKeepsEveryOutlierRequest) {
  Timeline t;
  for (size_t i = 0; i < 300; ++i)
    t.requests.push_back(
        request("42:c" + std::to_string(i) + "#1", i * 10, tokens_every(i * 10 + 50, 20, 20), 100, 43));
  Report r = ld::analysis::build_report(t, {{42}, "srv", "", {}}, kBase, kBase + 20'000 * kMs, kOffset);
  for (size_t row : {3u, 150u, 151u, 299u}) r.outliers.push_back(outlier(r, ld::model::WindowKind::kTpot, row, 3, {}));

  const auto sample = ld::report::sample_timeline(r, 2000, 150);
  EXPECT_TRUE(sample.downsampled);
  EXPECT_EQ(sample.outlier_requests, 4u);
  for (size_t row : {3u, 150u, 151u, 299u})
    EXPECT_TRUE(std::binary_search(sample.rows.begin(), sample.rows.end(), row)) << row;
  EXPECT_LE(sample.rows.size(), 150u);
  EXPECT_TRUE(std::is_sorted(sample.rows.begin(), sample.rows.end()));
  size_t tokens = 0;
  for (size_t row : sample.rows) tokens += r.request_rows[row].token_mono_ns.size();
  EXPECT_LE(tokens / sample.token_stride, 2000u);

  const auto all = ld::report::sample_timeline(r, 100'000, 1000);
  EXPECT_FALSE(all.downsampled);
  EXPECT_EQ(all.rows.size(), 300u);
  EXPECT_EQ(all.token_stride, 1u);
}

// ---------------------------------------------------------------- HTML

TEST(RenderHtml, IsOneSelfContainedPageWithEveryPlot) {
  const std::string html = ld::report::render_html(sample_report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* id : {"summary", "findings", "timeline", "tpot", "ttft", "causes", "outliers", "lengths", "requests",
                         "environment", "probes", "warnings"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(count(html, "<svg"), 4u);  // timeline, TPOT, TTFT, causes
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
  EXPECT_EQ(count(html, "<section"), count(html, "</section>"));
  EXPECT_EQ(count(html, "<table"), count(html, "</table>"));
  // Nothing to fetch: the only URL is the SVG namespace name.
  std::string without_ns = html;
  for (size_t at; (at = without_ns.find("http://www.w3.org/2000/svg")) != std::string::npos;) without_ns.erase(at, 26);
  EXPECT_EQ(lower(without_ns).find("http:"), std::string::npos);
  EXPECT_EQ(lower(without_ns).find("https:"), std::string::npos);
  EXPECT_EQ(lower(without_ns).find("url("), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(lower(html).find("src="), std::string::npos);
  EXPECT_EQ(lower(html).find("<link"), std::string::npos);
  EXPECT_NE(html.find("@media print"), std::string::npos);
}

TEST(RenderHtml, EscapesEveryStringFromTheTrace) {
  const std::string html = ld::report::render_html(sample_report());
  EXPECT_EQ(lower(html).find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;|pwn"), std::string::npos);
  EXPECT_EQ(html.find("<b>markup</b>"), std::string::npos);
  EXPECT_NE(html.find("/var/log/&lt;app&gt;.log"), std::string::npos);
}

TEST(RenderHtml, ColoursOutliersByCauseAndDrawsTheFit) {
  const Report r = sample_report();
  const std::string html = ld::report::render_html(r);
  const size_t timeline = html.find("<section id=\"timeline\"");
  const std::string timeline_svg = html.substr(timeline, html.find("</svg>", timeline) - timeline);
  const auto fill = [](ld::model::Cause c) { return "fill=\"" + std::string(ld::model::cause_info(c).color) + "\""; };
  EXPECT_NE(timeline_svg.find(fill(ld::model::Cause::kDiskIo)), std::string::npos);
  EXPECT_NE(timeline_svg.find(fill(ld::model::Cause::kKvAlloc)), std::string::npos);
  EXPECT_NE(timeline_svg.find("gap outlier, request 42:c1#2 token 5: 400.0 ms"), std::string::npos);

  const size_t ttft = html.find("<section id=\"ttft\"");
  const std::string ttft_section = html.substr(ttft, html.find("</section>", ttft) - ttft);
  EXPECT_NE(ttft_section.find("<polyline"), std::string::npos);  // the fitted curve
  EXPECT_NE(ttft_section.find("R² 0.93"), std::string::npos);

  Report no_fit = r;
  no_fit.ttft_fit.valid = false;
  const std::string html2 = ld::report::render_html(no_fit);
  const size_t ttft2 = html2.find("<section id=\"ttft\"");
  EXPECT_EQ(html2.substr(ttft2, html2.find("</section>", ttft2) - ttft2).find("<polyline"), std::string::npos);
  EXPECT_NE(html2.find("No fit was computed"), std::string::npos);  // 3 distinct inputs: data was enough
  no_fit.request_rows[1].input_bytes = no_fit.request_rows[0].input_bytes;
  EXPECT_NE(ld::report::render_html(no_fit).find("needs at least 3 requests with distinct input lengths"),
            std::string::npos);
}

TEST(RenderHtml, ShowsFindingsWithRemedyAndSysctlLines) {
  const std::string html = ld::report::render_html(sample_report());
  EXPECT_NE(html.find("fsync | on the token path"), std::string::npos);
  EXPECT_NE(html.find("log asynchronously, or to tmpfs"), std::string::npos);
  EXPECT_NE(html.find("vm.dirty_background_bytes = 67108864    # now: 0"), std::string::npos);
  EXPECT_NE(html.find("strace -f -e fsync -p 42"), std::string::npos);
  EXPECT_NE(html.find("Outliers recur every 60.0 s"), std::string::npos);
  EXPECT_NE(html.find("17 events were lost"), std::string::npos);
}

TEST(RenderHtml, LargeTraceIsDownsampledButKeepsEveryOutlier) {
  Timeline t;
  for (size_t i = 0; i < 400; ++i)
    t.requests.push_back(
        request("42:c" + std::to_string(i) + "#1", i * 10, tokens_every(i * 10 + 50, 20, 30), 100, 43));
  Report r = ld::analysis::build_report(t, {{42}, "srv", "", {}}, kBase, kBase + 20'000 * kMs, kOffset);
  for (size_t row : {7u, 200u, 399u})
    r.outliers.push_back(
        outlier(r, ld::model::WindowKind::kTpot, row, 4, {{ld::model::Cause::kGil, 15, 0.75, json::object()}}));
  const std::string html = ld::report::render_html(r);
  EXPECT_NE(html.find("Large trace: showing"), std::string::npos);
  EXPECT_NE(html.find("all 3 with an outlier"), std::string::npos);
  for (size_t row : {7u, 200u, 399u})
    EXPECT_NE(html.find("gap outlier, request 42:c" + std::to_string(row) + "#1 token 4"), std::string::npos) << row;
  // The timeline draws at most the token budget (one <line> per token mark).
  const size_t timeline = html.find("<section id=\"timeline\"");
  const std::string svg = html.substr(timeline, html.find("</svg>", timeline) - timeline);
  EXPECT_LE(count(svg, "<line"), 2000u + 100u);  // + axis ticks
  EXPECT_LT(html.size(), 2'000'000u);
}

TEST(RenderHtml, EmptyReportStillRenders) {
  const std::string html = ld::report::render_html(Report{});
  EXPECT_NE(html.find("No streaming responses were seen"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
}

// Values no sane trace produces must still render, in every format.
TEST(RenderFormats, OddValuesNeverCrash) {
  Report r = sample_report();
  r.request_rows[0].token_tid.resize(2);  // fewer threads than tokens
  r.request_rows[1].ttft_ms = NAN;
  r.request_rows[2].token_mono_ns.insert(r.request_rows[2].token_mono_ns.begin(), 1);  // not ascending
  r.request_rows[2].id = "";
  Outlier& o = r.outliers[0];
  o.duration_ms = NAN;
  o.end_mono_ns = 0;                                                                            // ends before it starts
  o.causes.push_back({static_cast<ld::model::Cause>(200), -5, INFINITY, json::array({1, 2})});  // damaged
  r.outliers.push_back(r.outliers[1]);
  r.outliers.back().request = "no such request";
  r.typical.total_ms = INFINITY;
  r.host = json::array({"not", "an", "object"});
  r.start_unix_ns = 0;
  r.ttft_fit.a = NAN;
  for (const auto& render : {ld::report::render_html, ld::report::render_markdown, ld::report::render_perfetto})
    EXPECT_FALSE(render(r).empty());
  EXPECT_NO_THROW(json::parse(ld::report::render_perfetto(r)));
}

// ---------------------------------------------------------------- Markdown

// Splits a table row on the '|' that are not backslash-escaped.
size_t cells_in_row(const std::string& line) {
  size_t pipes = 0;
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) pipes++;
  return pipes - 1;
}

TEST(RenderMarkdown, TablesKeepTheirShapeWithHostileText) {
  const std::string md = ld::report::render_markdown(sample_report());
  EXPECT_EQ(md.rfind("# latency-doctor report: ", 0), 0u);
  for (const char* heading : {"## Summary", "## Findings and remedies", "## Where the time went", "## Outliers (2)",
                              "## TPOT distribution", "## TTFT against input length", "## Input and output lengths",
                              "## Requests", "## Environment", "## Probes", "## Warnings (1)"})
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
  // Every row of a table has as many cells as its header.
  std::istringstream lines(md);
  std::string line;
  size_t header_cells = 0, tables = 0;
  bool in_table = false;
  while (std::getline(lines, line)) {
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    if (!in_table) {
      header_cells = cells_in_row(line);
      in_table = true;
      tables++;
      continue;
    }
    EXPECT_EQ(cells_in_row(line), header_cells) << line;
  }
  EXPECT_GE(tables, 8u);
  EXPECT_NE(md.find("\\<script\\>alert('x')\\</script\\>\\|pwn"), std::string::npos);
  EXPECT_NE(md.find("/opt/llm/server\\|v2"), std::string::npos);
  EXPECT_EQ(md.find("<b>"), std::string::npos);
}

TEST(RenderMarkdown, CarriesFindingsCausesAndDistributions) {
  const std::string md = ld::report::render_markdown(sample_report());
  EXPECT_NE(md.find("### [crit] fsync \\| on the token path"), std::string::npos);
  EXPECT_NE(md.find("vm.dirty_background_bytes = 67108864"), std::string::npos);
  EXPECT_NE(md.find("```sh\nstrace -f -e fsync -p 42\n```"), std::string::npos);
  EXPECT_NE(md.find("| disk\\_io | disk IO |"), std::string::npos);
  EXPECT_NE(md.find("300.0 (75%)"), std::string::npos);                    // disk_io of the 400 ms gap
  EXPECT_NE(md.find("| 2500.0 | 4000.0 | 10000.0 |"), std::string::npos);  // input bytes P25/P50/P75
  EXPECT_NE(md.find("R² 0.93"), std::string::npos);
  EXPECT_NE(md.find("**17 events were lost**"), std::string::npos);
}

TEST(RenderMarkdown, CodeFenceOutgrowsBackticksInTheCommand) {
  Report r = sample_report();
  r.findings[0].verify = "echo ```; cat x";
  const std::string md = ld::report::render_markdown(r);
  EXPECT_NE(md.find("````sh\necho ```; cat x\n````"), std::string::npos);
}

// ---------------------------------------------------------------- Perfetto

std::shared_ptr<const ld::model::ThreadTracks> sample_tracks() {
  auto tracks = std::make_shared<ld::model::ThreadTracks>();
  ld::model::ThreadTrack t;
  t.tid = 43;
  t.tgid = 42;
  t.name = "engine";
  t.slices.push_back({kBase + 1000 * kMs, kBase + 1100 * kMs, ld::model::ThreadState::kRunning, ""});
  t.slices.push_back({kBase + 1100 * kMs, kBase + 1400 * kMs, ld::model::ThreadState::kBlocked,
                      "fsync /var/log/app.log; woken by an interrupt or timer"});
  t.slices.push_back(
      {kBase + 1400 * kMs, kBase + 1410 * kMs, ld::model::ThreadState::kRunnable, "woken, waiting to be switched in"});
  tracks->threads.push_back(t);
  return tracks;
}

TEST(RenderPerfetto, HasThreadTracksTokensAndOutlierSlices) {
  Report r = sample_report();
  r.tracks = sample_tracks();
  const json trace = json::parse(ld::report::render_perfetto(r));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["otherData"]["schema"], "latency-doctor/perfetto/v1");

  std::map<std::string, size_t> by_phase;
  std::map<uint64_t, std::string> thread_names;
  std::set<std::string> states;
  size_t outlier_begins = 0, outlier_ends = 0;
  for (const auto& ev : trace["traceEvents"]) {
    by_phase[ev["ph"]]++;
    if (ev["ph"] == "M" && ev["name"] == "thread_name") thread_names[ev["tid"]] = ev["args"]["name"];
    if (ev["ph"] == "X") {
      EXPECT_EQ(ev["pid"], 42);
      EXPECT_EQ(ev["tid"], 43);
      states.insert(ev["args"]["state"].get<std::string>());
      if (ev["args"]["state"] == "blocked") {
        EXPECT_EQ(ev["name"], "fsync /var/log/app.log");
      }
    }
    if (ev["cat"] == "outlier") {
      if (ev["ph"] == "b") {
        outlier_begins++;
        ASSERT_TRUE(ev["args"]["causes"].is_array());
        if (ev["args"]["kind"] == "tpot") {
          EXPECT_EQ(ev["name"], "slow gap: disk_io");
          EXPECT_EQ(ev["args"]["causes"][0]["cause"], "disk_io");
          EXPECT_EQ(ev["args"]["causes"][0]["evidence"]["syscall"], "fsync");
        }
      }
      if (ev["ph"] == "e") outlier_ends++;
    }
  }
  EXPECT_EQ(states, (std::set<std::string>{"running", "blocked", "runnable"}));
  EXPECT_EQ(by_phase["X"], 3u);
  EXPECT_EQ(by_phase["i"], r.tokens);
  EXPECT_EQ(outlier_begins, r.outliers.size());
  EXPECT_EQ(outlier_ends, r.outliers.size());
  EXPECT_EQ(thread_names[43], "engine 43");
  EXPECT_TRUE(thread_names.count(44));                        // the other sending thread has a track too
  EXPECT_EQ(trace["otherData"]["target"]["comm"], kHostile);  // JSON escaping keeps it data
}

TEST(RenderPerfetto, TimesAreMonotonicMicroseconds) {
  const Report r = sample_report();
  const json trace = json::parse(ld::report::render_perfetto(r));
  const uint64_t first_token_ns = r.request_rows[0].token_mono_ns[0];
  bool found = false;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] == "i" && ev["args"]["request"] == "42:c1#1" && ev["args"]["index"] == 0) {
      EXPECT_DOUBLE_EQ(ev["ts"].get<double>(), static_cast<double>(first_token_ns) / 1000.0);
      EXPECT_EQ(ev["name"], "first token");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(RenderPerfetto, WithoutTracksSaysSoAndKeepsTokensAndOutliers) {
  Report r = sample_report();
  r.request_rows[2].token_tid.assign(r.request_rows[2].token_tid.size(), 0);  // e.g. a token log
  const json trace = json::parse(ld::report::render_perfetto(r));
  EXPECT_NE(trace["otherData"]["thread_states"].get<std::string>().find("not in this export"), std::string::npos);
  size_t instants = 0, slices = 0;
  bool unknown_thread_track = false;
  for (const auto& ev : trace["traceEvents"]) {
    instants += ev["ph"] == "i";
    slices += ev["ph"] == "X";
    if (ev["ph"] == "M" && ev["name"] == "thread_name" &&
        ev["args"]["name"].get<std::string>().find("sending thread unknown") != std::string::npos)
      unknown_thread_track = true;
  }
  EXPECT_EQ(instants, r.tokens);
  EXPECT_EQ(slices, 0u);
  EXPECT_TRUE(unknown_thread_track);
}

TEST(RenderPerfetto, EmptyReportIsValidJson) {
  const json trace = json::parse(ld::report::render_perfetto(Report{}));
  EXPECT_TRUE(trace["traceEvents"].is_array());
}

}  // namespace
