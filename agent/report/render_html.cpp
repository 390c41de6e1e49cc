// The HTML report: one self-contained page (inline CSS and SVG, no script, no network) that a
// person can read on a laptop, attach to an incident, or print. Every string from the trace is
// escaped; big traces are downsampled in the plots (never the outliers) and the page says so.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "model/cause.hpp"
#include "report/flame_graph.hpp"
#include "report/frames_view.hpp"
#include "report/report.hpp"
#include "report/report_view.hpp"
#include "report/svg.hpp"
#include "util/time.hpp"

namespace ld::report {

using namespace model;
namespace {

constexpr int kPlotWidth = 1000;
constexpr size_t kTimelineTokenBudget = 2000;  // token marks drawn in the timeline
constexpr size_t kTimelineMaxLanes = 150;      // requests drawn in the timeline
constexpr size_t kMaxScatterPoints = 3000;
constexpr size_t kMaxTableRows = 200;
constexpr int kHistogramBins = 40;

const char* const kStyle = R"css(
:root { --ink:#1f2328; --muted:#5b6570; --line:#d8dee4; --bg:#ffffff; --panel:#f6f8fa; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
p.sub, .note, figcaption { color: var(--muted); }
.note { font-size: 13px; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 12.5px; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
  overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv th { width: 28%; background: none; font-weight: 500; color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 10px; margin: 12px 0; }
@media (max-width: 720px) { .cards { grid-template-columns: repeat(2, 1fr); } }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; background: var(--panel); }
.card .k { color: var(--muted); font-size: 12px; }
.card .v { font-size: 19px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .v small { font-size: 12px; font-weight: 400; color: var(--muted); }
.finding { border: 1px solid var(--line); border-left: 5px solid #8c8c8c; border-radius: 6px;
  padding: 8px 12px; margin: 10px 0; }
.finding.crit { border-left-color: #b42318; } .finding.warn { border-left-color: #d97706; }
.finding.info { border-left-color: #0072b2; }
.finding h3 { font-size: 15px; margin: 2px 0 6px; }
.sev { display: inline-block; font-size: 11px; font-weight: 700; text-transform: uppercase; padding: 1px 6px;
  border-radius: 4px; color: #fff; background: #8c8c8c; margin-right: 6px; vertical-align: 1px; }
.sev.crit { background: #b42318; } .sev.warn { background: #b45309; } .sev.info { background: #0072b2; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; border: 1px solid rgba(0,0,0,.25); }
.chip { white-space: nowrap; margin-right: 8px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12.5px; margin: 4px 0 0; }
figure { margin: 8px 0 16px; }
svg { max-width: 100%; height: auto; display: block; }
svg text { font-size: 11px; fill: #333; }
svg text.axis { fill: #444; } svg text.note { fill: #555; font-style: italic; }
svg text.in { fill: #fff; font-weight: 600; }
.warn-box { border: 1px solid #f0c36d; background: #fff8e6; border-radius: 6px; padding: 6px 10px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
* { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
@page { size: A4; margin: 12mm; }
@media print {
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; }
  figure, .finding, .cards, tr { break-inside: avoid; }
  pre { white-space: pre-wrap; }
}
)css";

std::string h(const std::string& text) { return escape_xml(text); }

std::string color(Cause cause) { return std::string(cause_info(cause).color); }
std::string id(Cause cause) { return std::string(cause_id(cause)); }

std::string swatch(Cause cause) { return "<span class=\"sw\" style=\"background:" + h(color(cause)) + "\"></span>"; }

std::string cause_chip(const CauseTime& c) {
  return "<span class=\"chip\" title=\"" + h(std::string(cause_info(c.cause).label)) + "\">" + swatch(c.cause) +
         h(id(c.cause)) + " " + ms_cell(c.ms) + " ms</span>";
}

std::string section(const std::string& id, const std::string& title, const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + h(title) + "</h2>\n" + body + "</section>\n";
}

std::string note(const std::string& text) { return "<p class=\"note\">" + h(text) + "</p>\n"; }

// A table from header cells and rows of ready (escaped) HTML cells; `numeric` marks the
// right-aligned columns.
std::string table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows,
                  const std::set<size_t>& numeric) {
  std::string out = "<table><thead><tr>";
  for (size_t i = 0; i < headers.size(); ++i)
    out += (numeric.count(i) ? "<th class=\"num\">" : "<th>") + h(headers[i]) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i)
      out += (numeric.count(i) ? "<td class=\"num\">" : "<td>") + row[i] + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

std::vector<std::string> escaped(std::vector<std::string> cells) {
  for (std::string& cell : cells) cell = h(cell);
  return cells;
}

std::string legend(const std::vector<Cause>& causes) {
  std::string out = "<div class=\"legend\">";
  for (Cause c : causes)
    out += "<span>" + swatch(c) + h(id(c)) + " <span class=\"note\">" + h(std::string(cause_info(c).label)) +
           "</span></span>";
  return out + "</div>\n";
}

// Causes in the vocabulary's order, for legends.
std::vector<Cause> sorted_causes(const std::set<Cause>& causes) {
  std::vector<Cause> list(causes.begin(), causes.end());
  std::stable_sort(list.begin(), list.end(), [](Cause a, Cause b) { return cause_rank(a) < cause_rank(b); });
  return list;
}

// ---------------------------------------------------------------- header and summary

std::string title_of(const Report& r) {
  std::string who = r.target.comm.empty() ? "target" : r.target.comm;
  if (!r.target.pids.empty()) who += " (" + std::to_string(r.target.pids.front()) + ")";
  return "latency-doctor report: " + who;
}

std::string card(const std::string& key, const std::string& value, const std::string& small = "") {
  return "<div class=\"card\"><div class=\"k\">" + h(key) + "</div><div class=\"v\">" + h(value) +
         (small.empty() ? "" : " <small>" + h(small) + "</small>") + "</div></div>";
}

std::string header_html(const Report& r) {
  std::string sub = environment_rows(r).front().value;
  if (!r.target.exe.empty()) sub += " · " + r.target.exe;
  sub += " · " + (r.start_unix_ns ? utc_time(r.start_unix_ns) : std::string("start unknown"));
  sub += fmt::format(" · {:.1f} s window", util::ms_to_s(r.duration_ms));
  if (const std::string followed = followed_text(r.target); !followed.empty()) sub += " · also traced: " + followed;
  return "<header><h1>" + h(title_of(r)) + "</h1><p class=\"sub\">" + h(sub) + "</p></header>\n";
}

std::string summary_html(const Report& r) {
  std::string out = "<div class=\"cards\">";
  out += card("streaming requests", std::to_string(r.requests));
  out += card("tokens", std::to_string(r.tokens));
  out += card("TTFT p50 / p90", ms_cell(r.ttft_ms.p50) + " / " + ms_cell(r.ttft_ms.p90), "ms");
  out += card("TTFT p99", ms_cell(r.ttft_ms.p99), "ms");
  out += card("TPOT median", ms_cell(r.tpot_ms.p50), "ms");
  out += card("TPOT sd", ms_cell(r.tpot_ms.stddev), "ms");
  out += card("TPOT p99 / max", ms_cell(r.tpot_ms.p99) + " / " + ms_cell(r.tpot_ms.max), "ms");
  out += card("outliers", std::to_string(r.outliers.size()));
  out += "</div>\n";
  out += table(distribution_headers(),
               {distribution_cells("TTFT", r.ttft_ms), distribution_cells("TPOT (every gap)", r.tpot_ms)},
               {1, 2, 3, 4, 5, 6, 7, 8});
  const Thresholds& t = r.thresholds;
  out +=
      note(fmt::format("Thresholds from the source article: {} of {} requests had TTFT > {:g} ms (feels stuck); "
                       "{} of {} gaps > {:g} ms (broken sentence), {} > {:g} ms (spike).",
                       r.over_thresholds.ttft_stuck, r.requests, t.ttft_stuck_ms, r.over_thresholds.gaps_broken, r.gaps,
                       t.gap_broken_ms, r.over_thresholds.gaps_spike, t.gap_spike_ms));
  if (r.requests == 0) {
    out += "<p class=\"warn-box\">" +
           h(r.token_source == "sse"
                 ? "No streaming responses were seen. Is the server using TLS, HTTP/2 or a unix socket? "
                   "Try --tokens jsonl:FILE with token times logged by the application or the client."
                 : "No requests with tokens in the token log: check the warnings at the end.") +
           "</p>\n";
  }
  return section("summary", "Summary", out);
}

// ---------------------------------------------------------------- findings

std::string sysctl_block(const Finding& f) {
  if (f.sysctl.empty()) return "";
  std::string text = "# /etc/sysctl.d/90-latency-doctor.conf\n";
  for (const SysctlRec& s : f.sysctl) {
    if (!s.caveat.empty()) text += "# " + s.caveat + "\n";
    text += s.key + " = " + s.value + "    # now: " + (s.current.empty() ? "unknown" : s.current) + "\n";
  }
  return "<pre>" + h(text) + "</pre>";
}

std::string finding_html(const Finding& f) {
  const std::string sev = (f.severity == "crit" || f.severity == "warn" || f.severity == "info") ? f.severity : "";
  std::string out = "<div class=\"finding " + sev + "\"><h3><span class=\"sev " + sev + "\">" + h(f.severity) +
                    "</span>" + h(f.title) + "</h3>";
  out += "<div>" + swatch(f.cause) + h(id(f.cause)) + " <span class=\"note\">rule " + h(f.rule) + "</span></div>";
  if (!f.evidence.empty()) out += "<p>" + h(f.evidence) + "</p>";
  if (const std::string size = evidence_size_text(f); !size.empty()) out += "<p>Evidence size: " + h(size) + ".</p>";
  if (!f.remedy.empty()) out += "<p><strong>Remedy:</strong> " + h(f.remedy) + "</p>";
  out += sysctl_block(f);
  if (!f.verify.empty()) out += "<p><strong>Verify:</strong> <code>" + h(f.verify) + "</code></p>";
  return out + "</div>\n";
}

std::string findings_html(const Report& r) {
  std::string out;
  if (r.findings.empty()) {
    out = note(r.outliers.empty() ? "No findings: no outlier needed explaining and no host setting was flagged."
                                  : "No rule matched the outliers' causes; see the time split below.");
  }
  for (const Finding& f : r.findings) out += finding_html(f);
  return section("findings", "Findings and remedies", out);
}

// ---------------------------------------------------------------- per-request timeline

// The outlier's window split left to right by cause, in proportion to each cause's time.
void draw_outlier(Svg& svg, const Outlier& o, const LinearScale& x, double y, double height, const Report& r) {
  const double x0 = x(seconds_after_start(r, o.start_mono_ns));
  const double x1 = std::max(x(seconds_after_start(r, o.end_mono_ns)), x0 + 2);  // always visible
  std::vector<CauseTime> parts = o.causes;
  double explained = 0;
  for (const CauseTime& c : parts) explained += std::isfinite(c.ms) ? std::max(c.ms, 0.0) : 0;
  if (o.duration_ms > explained) parts.push_back({Cause::kUnknown, o.duration_ms - explained, 0, {}});
  const double total = std::max(explained, o.duration_ms);
  const std::string tip = fmt::format("{} outlier, request {} token {}: {} ms (baseline {} ms): {}",
                                      o.kind == WindowKind::kTtft ? "first-token" : "gap", o.request, o.token_index,
                                      ms_cell(o.duration_ms), ms_cell(o.baseline_ms), causes_summary(parts));
  double at = x0;
  for (const CauseTime& c : parts) {
    if (!(c.ms > 0) || !(total > 0)) continue;
    const double w = (x1 - x0) * c.ms / total;
    svg.rect(at, y, w, height, color(c.cause), tip);
    at += w;
  }
  if (parts.empty() || !(total > 0)) svg.rect(x0, y, x1 - x0, height, color(Cause::kUnknown), tip);
}

void draw_request_lane(Svg& svg, const RequestRow& row, const LinearScale& x, double y, double height, size_t stride,
                       const Report& r) {
  if (row.token_mono_ns.empty()) return;
  const double start = x(seconds_after_start(r, row.start_mono_ns));
  const double first = x(seconds_after_start(r, row.token_mono_ns.front()));
  const double last = x(seconds_after_start(r, row.token_mono_ns.back()));
  const std::string tip =
      fmt::format("request {}: TTFT {} ms, {} tokens, TPOT median {} ms, max {} ms", row.id, ms_cell(row.ttft_ms),
                  row.tokens, ms_cell(row.tpot_median_ms), ms_cell(row.tpot_max_ms));
  svg.rect(start, y, std::max(last - start, 1.0), height, "#e3e9f0", tip);
  svg.rect(start, y, std::max(first - start, 1.0), height, "#a9b8ca", tip);
  for (size_t i = 0; i < row.token_mono_ns.size(); i += stride) {
    const double tx = x(seconds_after_start(r, row.token_mono_ns[i]));
    svg.line(tx, y, tx, y + height, "#3d4b5a", 0.7);
  }
}

std::string timeline_html(const Report& r) {
  if (r.request_rows.empty()) return "";
  const TimelineSample sample = sample_timeline(r, kTimelineTokenBudget, kTimelineMaxLanes);
  const size_t lanes = sample.rows.size();
  const double lane = std::clamp(520.0 / static_cast<double>(lanes), 1.5, 16.0);
  const bool labels = lane >= 11;
  const PlotArea area{labels ? 110.0 : 60.0, 10, kPlotWidth - (labels ? 130.0 : 80.0), lane * lanes};
  const int height = static_cast<int>(area.bottom() + 46);

  double end_s = util::ms_to_s(r.duration_ms);
  for (size_t i : sample.rows)
    if (!r.request_rows[i].token_mono_ns.empty())
      end_s = std::max(end_s, seconds_after_start(r, r.request_rows[i].token_mono_ns.back()));
  const LinearScale x{0, std::max(end_s, 1e-3), area.left, area.right()};
  Svg svg(kPlotWidth, height, "Per-request token timeline with outlier gaps coloured by cause");
  svg.x_axis(area, x, nice_ticks(0, x.d1, 10), "seconds after the window start");

  std::unordered_map<std::string, size_t> lane_of;
  for (size_t k = 0; k < lanes; ++k) {
    const RequestRow& row = r.request_rows[sample.rows[k]];
    const double y = area.top + lane * static_cast<double>(k);
    lane_of.emplace(row.id, k);
    draw_request_lane(svg, row, x, y + lane * 0.15, lane * 0.7, sample.token_stride, r);
    if (labels) svg.text(area.left - 6, y + lane * 0.75, row.id.substr(0, 16), "end", "axis");
  }
  std::set<Cause> causes;
  for (const Outlier& o : r.outliers) {
    auto it = lane_of.find(o.request);
    if (it == lane_of.end()) continue;
    const double y = area.top + lane * static_cast<double>(it->second);
    draw_outlier(svg, o, x, y, std::max(lane * 0.9, 1.5), r);
    causes.insert(dominant_cause(o));
    for (const CauseTime& c : o.causes) causes.insert(c.cause);
  }
  std::string out = "<figure>" + svg.str() + "<figcaption>";
  out += "<div class=\"legend\"><span>" + std::string("<span class=\"sw\" style=\"background:#a9b8ca\"></span>") +
         "waiting for the first token</span><span><span class=\"sw\" style=\"background:#e3e9f0\"></span>"
         "streaming (a mark per token)</span></div>";
  if (!causes.empty()) out += legend(sorted_causes(causes));
  out += "</figcaption></figure>\n";
  if (sample.downsampled || sample.token_stride > 1) {
    std::string what = fmt::format("Large trace: showing {} of {} requests", lanes, r.request_rows.size());
    if (sample.outlier_requests)
      what += fmt::format(" (all {} with an outlier, and evenly spaced others)", sample.outlier_requests);
    if (sample.token_stride > 1) what += fmt::format("; one token mark in {}", sample.token_stride);
    out += note(what + ". Every outlier is drawn.");
  }
  out += note(
      "One row per request, by start time. Outlier windows are split left to right by the share of each "
      "cause; hover for the numbers.");
  return section("timeline", "Token timeline", out);
}

// ---------------------------------------------------------------- TPOT distribution

void draw_thresholds(Svg& svg, const PlotArea& area, const LinearScale& x, const Thresholds& t) {
  const std::pair<double, const char*> lines[] = {{t.gap_broken_ms, "broken sentence"}, {t.gap_spike_ms, "spike"}};
  for (const auto& [ms, name] : lines) {
    if (!(ms <= x.d1)) continue;
    svg.line(x(ms), area.top, x(ms), area.bottom(), "#b42318", 1, true);
    svg.text(x(ms) + 3, area.top + 11, fmt::format("{} {:g} ms", name, ms), "start", "note");
  }
}

void draw_box(Svg& svg, const BoxStats& b, const std::vector<double>& gaps, const LinearScale& x, double cy) {
  const double half = 13;
  svg.line(x(b.whisker_lo), cy, x(b.p25), cy, "#333");
  svg.line(x(b.p75), cy, x(std::min(b.whisker_hi, x.d1)), cy, "#333");
  svg.line(x(b.whisker_lo), cy - 7, x(b.whisker_lo), cy + 7, "#333");
  if (b.whisker_hi <= x.d1) svg.line(x(b.whisker_hi), cy - 7, x(b.whisker_hi), cy + 7, "#333");
  svg.rect(x(b.p25), cy - half, std::max(x(b.p75) - x(b.p25), 1.0), 2 * half, "#9ecae1",
           fmt::format("P25 {} ms, median {} ms, P75 {} ms; whiskers {}–{} ms", ms_cell(b.p25), ms_cell(b.p50),
                       ms_cell(b.p75), ms_cell(b.whisker_lo), ms_cell(b.whisker_hi)));
  svg.line(x(b.p50), cy - half, x(b.p50), cy + half, "#08306b", 2.5);
  // Gaps beyond the whiskers, one dot per pixel column (thousands would be one smear).
  std::set<int> columns;
  uint64_t beyond_axis = 0;
  for (double g : gaps) {
    if (g >= b.whisker_lo && g <= b.whisker_hi) continue;
    if (g > x.d1) {
      beyond_axis++;
      continue;
    }
    if (columns.insert(static_cast<int>(x(g))).second) svg.circle(x(g), cy, 2.5, "#333", ms_cell(g) + " ms");
  }
  if (beyond_axis) svg.text(x.r1, cy - half - 4, fmt::format("{} more beyond ▸", beyond_axis), "end", "note");
}

std::string tpot_html(const Report& r) {
  const std::vector<double> gaps = all_gaps_ms(r);
  if (gaps.empty()) return section("tpot", "TPOT distribution", note("No request had two tokens: no gaps to show."));
  const Histogram hist = make_histogram(gaps, kHistogramBins);
  const BoxStats box = box_stats(gaps);
  const PlotArea box_area{70, 8, kPlotWidth - 160.0, 48};
  const PlotArea hist_area{70, 78, kPlotWidth - 160.0, 220};
  Svg svg(kPlotWidth, static_cast<int>(hist_area.bottom() + 46), "TPOT distribution: box plot and histogram");
  const LinearScale x{0, hist.hi, hist_area.left, hist_area.right()};
  draw_box(svg, box, gaps, x, box_area.top + box_area.height / 2);

  uint64_t top = hist.above;
  for (uint64_t c : hist.counts) top = std::max(top, c);
  const LinearScale y{0, static_cast<double>(std::max<uint64_t>(top, 1)) * 1.08, hist_area.bottom(), hist_area.top};
  for (size_t i = 0; i < hist.counts.size(); ++i) {
    if (!hist.counts[i]) continue;
    const double lo = hist.bin_width * static_cast<double>(i);
    svg.rect(x(lo) + 0.5, y(static_cast<double>(hist.counts[i])), x(lo + hist.bin_width) - x(lo) - 1,
             hist_area.bottom() - y(static_cast<double>(hist.counts[i])), "#4a7fb0",
             fmt::format("{}–{} ms: {} gaps", ms_cell(lo), ms_cell(lo + hist.bin_width), hist.counts[i]));
  }
  if (hist.above) {
    const double bx = hist_area.right() + 14;
    svg.rect(bx, y(static_cast<double>(hist.above)), 30, hist_area.bottom() - y(static_cast<double>(hist.above)),
             "#b42318", fmt::format("{} gaps above {} ms", hist.above, ms_cell(hist.hi)));
    svg.text(bx + 15, hist_area.bottom() + 16, "> " + tick_label(std::round(hist.hi)), "middle", "axis");
  }
  draw_thresholds(svg, hist_area, x, r.thresholds);
  svg.x_axis(hist_area, x, nice_ticks(0, hist.hi, 10), "gap between tokens, ms");
  svg.y_axis(hist_area, y, nice_ticks(0, y.d1, 5), "gaps");
  const std::string caption = fmt::format(
      "{} gaps · median {} ms · sd {} ms · mean {} ms · P90 {} ms · P99 {} ms · max {} ms. Box: P25–P75 "
      "with the median; whiskers reach the last gap within 1.5 IQR; dots are the gaps beyond.",
      gaps.size(), ms_cell(box.p50), ms_cell(box.sd), ms_cell(box.mean), ms_cell(r.tpot_ms.p90), ms_cell(r.tpot_ms.p99),
      ms_cell(r.tpot_ms.max));
  return section("tpot", "TPOT distribution",
                 "<figure>" + svg.str() + "<figcaption>" + h(caption) + "</figcaption></figure>\n");
}

// ---------------------------------------------------------------- TTFT vs input length

std::map<std::string, const Outlier*> ttft_outliers_by_request(const Report& r) {
  std::map<std::string, const Outlier*> by_request;
  for (const Outlier& o : r.outliers)
    if (o.kind == WindowKind::kTtft) by_request[o.request] = &o;
  return by_request;
}

std::string ttft_html(const Report& r) {
  const std::vector<TtftPoint> points = ttft_points(r);
  const std::string measure = ttft_input_measure(r);
  if (points.empty()) return section("ttft", "TTFT against input length", note("No request with a first token."));
  double max_in = 0, max_ttft = 0;
  for (const TtftPoint& p : points) {
    max_in = std::max(max_in, p.input);
    max_ttft = std::max(max_ttft, p.ttft_ms);
  }
  const PlotArea area{70, 12, kPlotWidth - 100.0, 300};
  Svg svg(kPlotWidth, static_cast<int>(area.bottom() + 46), "TTFT against input length with the fitted curve");
  const LinearScale x{0, std::max(max_in * 1.05, 1.0), area.left, area.right()};
  const LinearScale y{0, std::max(max_ttft * 1.1, 1.0), area.bottom(), area.top};
  svg.y_axis(area, y, nice_ticks(0, y.d1, 6), "TTFT, ms");
  svg.x_axis(area, x, nice_ticks(0, x.d1, 10), "input length, " + measure);
  if (r.thresholds.ttft_stuck_ms <= y.d1) {
    svg.line(area.left, y(r.thresholds.ttft_stuck_ms), area.right(), y(r.thresholds.ttft_stuck_ms), "#b42318", 1, true);
    svg.text(area.left + 4, y(r.thresholds.ttft_stuck_ms) - 4,
             fmt::format("feels stuck: {:g} ms", r.thresholds.ttft_stuck_ms), "start", "note");
  }
  const auto outliers = ttft_outliers_by_request(r);
  const size_t stride = std::max<size_t>(1, (points.size() + kMaxScatterPoints - 1) / kMaxScatterPoints);
  std::set<Cause> causes;
  for (size_t i = 0; i < points.size(); ++i) {
    const TtftPoint& p = points[i];
    auto it = outliers.find(p.row->id);
    const std::string tip =
        fmt::format("request {}: {} {}, TTFT {} ms", p.row->id, p.input, measure, ms_cell(p.ttft_ms));
    if (it != outliers.end()) {
      const Cause cause = dominant_cause(*it->second);
      causes.insert(cause);
      svg.circle(x(p.input), y(p.ttft_ms), 5, color(cause), tip + ": outlier, " + causes_summary(it->second->causes));
    } else if (i % stride == 0) {
      svg.circle(x(p.input), y(p.ttft_ms), 2.8, "#4a5a6a", tip);
    }
  }
  std::string caption;
  if (r.ttft_fit.valid) {
    std::vector<std::pair<double, double>> curve;
    for (int k = 0; k <= 60; ++k) {
      const double in = x.d1 * k / 60.0;
      curve.emplace_back(x(in), y(std::clamp(fitted_ttft_ms(r.ttft_fit, in), 0.0, y.d1)));
    }
    svg.polyline(curve, "#d55e00", 2);
    caption = fmt::format("Fit: TTFT ≈ {:.3g}·√input + {:.3g} ms (R² {:.2f}, {} requests, input in {}). ", r.ttft_fit.a,
                          r.ttft_fit.b, r.ttft_fit.r2, r.ttft_fit.n, r.ttft_fit.input);
  } else {
    caption = no_fit_reason(r) + " ";
  }
  caption += "Large dots are TTFT outliers, coloured by their main cause.";
  if (stride > 1) caption += fmt::format(" One ordinary request in {} is drawn.", stride);
  std::string out = "<figure>" + svg.str() + "<figcaption>" + h(caption);
  if (!causes.empty()) out += legend(sorted_causes(causes));
  return section("ttft", "TTFT against input length", out + "</figcaption></figure>\n");
}

// ---------------------------------------------------------------- time by cause

void draw_share_bar(Svg& svg, const CauseTotals& totals, const std::string& label, double y, double left,
                    double width) {
  svg.text(left - 8, y + 16, label, "end");
  if (!(totals.total_ms > 0)) {
    svg.text(left, y + 16, "none", "start", "note");
    return;
  }
  double at = left;
  for (const CauseTime& c : totals.causes) {
    const double w = width * c.share;
    svg.rect(at, y, w, 24, color(c.cause),
             fmt::format("{}: {} ms ({:.0f}%)", cause_id(c.cause), ms_cell(c.ms), c.share * 100));
    if (w > 38)
      svg.text(at + w / 2, y + 16, fmt::format("{:.0f}%", c.share * 100), "middle",
               cause_color_is_light(c.cause) ? "" : "in");
    at += w;
  }
}

std::string causes_html(const Report& r) {
  const CauseBreakdown b = cause_breakdown(r);
  const double left = 250, width = kPlotWidth - left - 30;
  Svg svg(kPlotWidth, 130, "Time by cause: slow first tokens, slow gaps, and the typical token");
  draw_share_bar(svg, b.first_tokens, fmt::format("slow first tokens ({})", b.first_tokens.windows), 8, left, width);
  draw_share_bar(svg, b.gaps, fmt::format("slow gaps ({})", b.gaps.windows), 48, left, width);
  draw_share_bar(svg, b.typical, fmt::format("typical token ({} gaps)", b.typical.windows), 88, left, width);
  std::vector<std::vector<std::string>> rows;
  for (Cause c : b.causes) {
    auto cells = escaped(b.cells(c));
    cells[0] = swatch(c) + cells[0];
    rows.push_back(std::move(cells));
  }
  std::string out = "<figure>" + svg.str() + "</figure>\n";
  out += table(b.headers(), rows, {2, 3, 4});
  if (!r.attributed)
    out += note("The trace has no evidence probes (only sock): causes are unknown. Record with --probes all.");
  if (r.periodicity.found) {
    out +=
        "<p class=\"warn-box\">" +
        h(fmt::format("Outliers recur every {:.1f} s ({} on that grid){}.", r.periodicity.period_s,
                      r.periodicity.outliers, r.periodicity.coincides.empty() ? "" : ": " + r.periodicity.coincides)) +
        "</p>\n";
  }
  return section("causes", "Where the time went", out);
}

// ---------------------------------------------------------------- tables

std::string outliers_html(const Report& r) {
  if (r.outliers.empty()) return section("outliers", "Outliers", note("No outliers: no first token or gap stood out."));
  const std::vector<const Outlier*> sorted = outliers_by_duration(r);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < std::min(sorted.size(), kMaxTableRows); ++i) {
    const Outlier& o = *sorted[i];
    std::string causes, evidence;
    for (const CauseTime& c : o.causes) {
      causes += cause_chip(c);
      const std::string e = evidence_summary(c.evidence);
      if (!e.empty()) evidence += "<div><code>" + h(id(c.cause) + ": " + e) + "</code></div>";
    }
    if (!o.activity.empty()) evidence += "<div class=\"note\">the thread: " + h(activity_text(o.activity)) + "</div>";
    rows.push_back({h(std::string(window_kind_name(o.kind))), h(o.request), std::to_string(o.token_index),
                    fmt::format("{:.3f}", seconds_after_start(r, o.end_mono_ns)), ms_cell(o.duration_ms),
                    ms_cell(o.baseline_ms), causes.empty() ? "<span class=\"note\">unknown</span>" : causes, evidence});
  }
  std::string out =
      table({"kind", "request", "token", "at s", "ms", "baseline ms", "causes", "evidence"}, rows, {2, 3, 4, 5});
  if (sorted.size() > kMaxTableRows)
    out += note(fmt::format("The {} longest of {} outliers; the JSON report has all.", kMaxTableRows, sorted.size()));
  return section("outliers", fmt::format("Outliers ({})", r.outliers.size()), out);
}

std::string lengths_html(const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (auto& row : length_rows(r)) rows.push_back(escaped(std::move(row)));
  if (rows.empty()) return "";
  return section("lengths", "Input and output lengths", table(length_headers(), rows, {1, 2, 3, 4}));
}

std::string requests_html(const Report& r) {
  if (r.request_rows.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < std::min(r.request_rows.size(), kMaxTableRows); ++i)
    rows.push_back(escaped(request_cells(r, r.request_rows[i])));
  std::string out = table(request_headers(), rows, {1, 2, 3, 4, 5, 6, 7, 8});
  if (r.request_rows.size() > kMaxTableRows)
    out += note(
        fmt::format("The first {} of {} requests; the JSON report has all.", kMaxTableRows, r.request_rows.size()));
  return section("requests", "Requests", out);
}

std::string cell_table_html(const CellTable& t) {
  std::set<size_t> numeric;
  for (size_t i = 0; i < t.numeric.size(); ++i)
    if (t.numeric[i]) numeric.insert(i);
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : t.rows) rows.push_back(escaped(row));
  return table(t.headers, rows, numeric);
}

std::string definitions_html(const Report& r) {
  const CellTable t = definitions_table(r);
  if (t.rows.empty()) return "";
  return section("definitions", "Definitions (ms)", note(std::string(kDefinitionsCaption) + ".") + cell_table_html(t));
}

std::string client_join_html(const Report& r) {
  if (!r.client_join.present) return "";
  std::string out = note(client_join_caption(r) + ".");
  if (r.client_join.matched > 0) {
    out += cell_table_html(client_join_summary_table(r)) + "<p>" + h(client_join_note(r)) + ".</p>\n";
    out += cell_table_html(client_join_requests_table(r, kMaxTableRows));
    if (r.client_join.requests.size() > kMaxTableRows)
      out += note(fmt::format("The first {} of {} requests; the JSON report has all.", kMaxTableRows,
                              r.client_join.requests.size()));
  }
  return section("client", "Client and server side by side", out);
}

std::string environment_html(const Report& r) {
  std::string out = "<table class=\"kv\"><tbody>\n";
  for (const EnvRow& row : environment_rows(r))
    out += "<tr><th>" + h(row.label) + "</th><td>" + h(row.value) + "</td></tr>\n";
  return section("environment", "Environment", out + "</tbody></table>\n");
}

std::string probes_html(const Report& r) {
  if (r.probes.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const ProbeStatus& p : r.probes)
    rows.push_back(
        {h(p.name), h(std::string(p.status_name())), std::to_string(p.events), std::to_string(p.lost), h(p.reason)});
  std::string out = table({"probe", "status", "events", "lost", "reason"}, rows, {2, 3});
  if (const uint64_t lost = lost_events(r))
    out += "<p class=\"warn-box\">" +
           h(fmt::format("{} events were lost (ring buffer full): tokens or evidence may be missing. Raise "
                         "--ringbuf-size.",
                         lost)) +
           "</p>\n";
  if (const std::string cost = agent_cost_text(r.agent); !cost.empty()) out += "<p>" + h(cost) + ".</p>\n";
  return section("probes", "Probes", out);
}

std::string warnings_html(const Report& r) {
  if (r.warnings.empty()) return "";
  std::string out = "<ul>";
  for (const std::string& w : r.warnings) out += "<li>" + h(w) + "</li>";
  return section("warnings", fmt::format("Warnings ({})", r.warnings.size()), out + "</ul>\n");
}

// The outliers' samples as a flame graph (report/flame_graph.hpp); "" without any.
std::string flame_html(const Report& r) {
  const FlameGraph g = flame_graph(r.outlier_flame, kPlotWidth);
  if (g.svg.empty()) return "";
  std::string caption = fmt::format(
      "The {} on-CPU samples of the slow tokens' windows that had a user-space stack. Root at the top, "
      "each row one call deeper; a box is as wide as its share of the samples. Warm colours: native "
      "code; blue: Python (a sample with a Python stack shows its Python frames only).",
      r.outlier_flame.samples);
  if (g.dropped)
    caption += fmt::format(" {} boxes narrower than {:g}% of the width are left out.", g.dropped, kMinBoxShare * 100);
  if (r.outlier_flame.stacks.back().frames == std::vector<std::string>{kOtherStacks})
    caption += fmt::format(" The rarest stacks are summed in {}.", kOtherStacks);
  return "<figure>" + g.svg + "<figcaption>" + h(caption + " Hover for the numbers.") + "</figcaption></figure>\n";
}

// What the slow tokens ran beyond a typical token (report/frames_view.hpp).
std::string frames_html(const Report& r) {
  const CellTable outliers = outlier_frames_table(r, kMaxTableRows), typical = typical_frames_table(r);
  const std::string flame = flame_html(r);
  if (outliers.rows.empty() && typical.rows.empty() && flame.empty()) return "";
  std::string out = note("User-space functions of the on-CPU samples, as a share of the window's samples.");
  if (auto head = frames_headline(r); !head.empty()) out += "<p>Slow tokens ran " + h(head) + ".</p>\n";
  if (!outliers.rows.empty()) out += cell_table_html(outliers);
  out += flame;
  if (!typical.rows.empty()) out += cell_table_html(typical);
  return section("frames", "What the slow tokens ran", out);
}

}  // namespace

std::string render_html(const Report& report) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // Defence in depth: even markup that slipped past escaping could neither run
      // nor fetch anything.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n"
      "<meta name=\"generator\" content=\"latency-doctor " LD_VERSION "\">\n<title>" +
      h(title_of(report)) + "</title>\n<style>" + kStyle + "</style></head>\n<body><main>\n";
  out += header_html(report);
  out += summary_html(report);
  out += findings_html(report);
  out += timeline_html(report);
  out += tpot_html(report);
  out += ttft_html(report);
  out += causes_html(report);
  out += outliers_html(report);
  out += frames_html(report);
  out += definitions_html(report);
  out += client_join_html(report);
  out += lengths_html(report);
  out += requests_html(report);
  out += environment_html(report);
  out += probes_html(report);
  out += warnings_html(report);
  out += "<footer>latency-doctor " LD_VERSION " · schema " + std::string(kReportSchema) +
         " · the JSON report (--format json) has every number of this page.</footer>\n";
  return out + "</main></body></html>\n";
}

}  // namespace ld::report
