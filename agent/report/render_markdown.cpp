// The Markdown report: the HTML report's content as GitHub-flavoured tables, to paste into a
// ticket or a post-mortem. Plots become tables (histogram bins, TTFT by input length).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <fmt/format.h>

#include "model/cause.hpp"
#include "report/frames_view.hpp"
#include "report/report.hpp"
#include "report/report_view.hpp"
#include "report/svg.hpp"
#include "util/time.hpp"

namespace ld::report {

using namespace model;
namespace {

constexpr size_t kMaxTableRows = 200;
constexpr size_t kMaxRequestRows = 50;
constexpr int kHistogramBins = 12;
constexpr size_t kInputBuckets = 5;
constexpr int kBarWidth = 30;

// Text from the trace as literal Markdown: punctuation that could start formatting, a link,
// HTML or a table cell boundary is backslash-escaped; line breaks become spaces.
std::string md(const std::string& text) {
  std::string out;
  for (char c : clean_utf8(text)) {
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
      continue;
    }
    if (std::string_view("\\`*_[]<>|#~!").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A fenced code block whose fence is longer than any backtick run inside.
std::string code_block(const std::string& text, const std::string& lang) {
  size_t run = 0, longest = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + lang + "\n" + clean_utf8(text) + (text.empty() || text.back() != '\n' ? "\n" : "") + fence + "\n";
}

// Cells are already Markdown (escaped where they hold trace text); `numeric` columns align right.
std::string table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows,
                  const std::set<size_t>& numeric = {}) {
  std::string out = "|";
  for (const auto& header : headers) out += " " + header + " |";
  out += "\n|";
  for (size_t i = 0; i < headers.size(); ++i) out += numeric.count(i) ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const auto& cell : row) out += " " + cell + " |";
    out += "\n";
  }
  return out + "\n";
}

std::vector<std::string> escaped(std::vector<std::string> cells) {
  for (std::string& cell : cells) cell = md(cell);
  return cells;
}

std::string title_line(const Report& r) {
  std::string who = r.target.comm.empty() ? "target" : r.target.comm;
  if (!r.target.pids.empty()) who += " (" + std::to_string(r.target.pids.front()) + ")";
  std::string out = "# latency-doctor report: " + md(who) + "\n\n";
  if (const std::string followed = followed_text(r.target); !followed.empty())
    out += "Also traced: " + md(followed) + ".\n\n";
  return out;
}

std::string summary_md(const Report& r) {
  std::string out = "## Summary\n\n";
  out += fmt::format("{} streaming requests, {} tokens, {} outliers; window {}, {:.1f} s.\n\n", r.requests, r.tokens,
                     r.outliers.size(), r.start_unix_ns ? utc_time(r.start_unix_ns) : std::string("start unknown"),
                     util::ms_to_s(r.duration_ms));
  out += table(distribution_headers(),
               {distribution_cells("TTFT", r.ttft_ms), distribution_cells("TPOT (every gap)", r.tpot_ms)},
               {1, 2, 3, 4, 5, 6, 7, 8});
  const Thresholds& t = r.thresholds;
  out += fmt::format("- TTFT > {:g} ms (feels stuck): {} of {} requests\n", t.ttft_stuck_ms,
                     r.over_thresholds.ttft_stuck, r.requests);
  out += fmt::format("- gap > {:g} ms (broken sentence): {} of {} gaps\n", t.gap_broken_ms,
                     r.over_thresholds.gaps_broken, r.gaps);
  out +=
      fmt::format("- gap > {:g} ms (spike): {} of {} gaps\n\n", t.gap_spike_ms, r.over_thresholds.gaps_spike, r.gaps);
  return out;
}

std::string finding_md(const Finding& f) {
  std::string out = "### [" + md(f.severity) + "] " + md(f.title) + "\n\n";
  out += "cause: " + md(std::string(cause_id(f.cause))) + " · rule: " + md(f.rule) +
         "\n\n";  // no code spans: escapes show there
  if (!f.evidence.empty()) out += md(f.evidence) + "\n\n";
  if (const std::string size = evidence_size_text(f); !size.empty()) out += "Evidence size: " + md(size) + ".\n\n";
  if (!f.remedy.empty()) out += "**Remedy:** " + md(f.remedy) + "\n\n";
  if (!f.sysctl.empty()) {
    std::string conf;
    for (const SysctlRec& s : f.sysctl) {
      if (!s.caveat.empty()) conf += "# " + s.caveat + "\n";
      conf += s.key + " = " + s.value + "    # now: " + (s.current.empty() ? "unknown" : s.current) + "\n";
    }
    out += code_block(conf, "ini") + "\n";
  }
  if (!f.verify.empty()) out += "**Verify:**\n\n" + code_block(f.verify, "sh") + "\n";
  return out;
}

std::string findings_md(const Report& r) {
  std::string out = "## Findings and remedies\n\n";
  if (r.findings.empty()) out += "No findings.\n\n";
  for (const Finding& f : r.findings) out += finding_md(f);
  return out;
}

std::string causes_md(const Report& r) {
  const CauseBreakdown b = cause_breakdown(r);
  std::string out = "## Where the time went\n\n";
  if (b.causes.empty()) out += "No outliers and no typical-token split.\n\n";
  std::vector<std::vector<std::string>> rows;
  for (Cause c : b.causes) rows.push_back(escaped(b.cells(c)));
  if (!rows.empty()) out += table(b.headers(), rows, {2, 3, 4});
  if (!r.attributed) out += "The trace has no evidence probes: causes are unknown (record with `--probes all`).\n\n";
  if (r.periodicity.found) {
    out +=
        md(fmt::format("Outliers recur every {:.1f} s ({} on that grid){}.", r.periodicity.period_s,
                       r.periodicity.outliers, r.periodicity.coincides.empty() ? "" : ": " + r.periodicity.coincides)) +
        "\n\n";
  }
  return out;
}

std::string outliers_md(const Report& r) {
  std::string out = fmt::format("## Outliers ({})\n\n", r.outliers.size());
  if (r.outliers.empty()) return out + "No first token or gap stood out.\n\n";
  const std::vector<const Outlier*> sorted = outliers_by_duration(r);
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < std::min(sorted.size(), kMaxTableRows); ++i) {
    const Outlier& o = *sorted[i];
    std::string evidence;
    for (const CauseTime& c : o.causes) {
      const std::string e = evidence_summary(c.evidence);
      if (!e.empty()) evidence += fmt::format("{}{}: {}", evidence.empty() ? "" : "; ", cause_id(c.cause), e);
    }
    if (!o.activity.empty()) evidence += (evidence.empty() ? "" : "; ") + ("the thread: " + activity_text(o.activity));
    rows.push_back({md(std::string(window_kind_name(o.kind))), md(o.request), std::to_string(o.token_index),
                    fmt::format("{:.3f}", seconds_after_start(r, o.end_mono_ns)), ms_cell(o.duration_ms),
                    ms_cell(o.baseline_ms), md(o.causes.empty() ? "unknown" : causes_summary(o.causes)), md(evidence)});
  }
  out += table({"kind", "request", "token", "at s", "ms", "baseline ms", "causes", "evidence"}, rows, {2, 3, 4, 5});
  if (sorted.size() > kMaxTableRows)
    out += fmt::format("The {} longest of {} outliers; the JSON report has all.\n\n", kMaxTableRows, sorted.size());
  return out;
}

std::string tpot_md(const Report& r) {
  const std::vector<double> gaps = all_gaps_ms(r);
  std::string out = "## TPOT distribution\n\n";
  if (gaps.empty()) return out + "No request had two tokens: no gaps.\n\n";
  const BoxStats b = box_stats(gaps);
  out += table({"gaps", "P25", "median", "P75", "P90", "P99", "max", "mean", "sd"},
               {{std::to_string(b.n), ms_cell(b.p25), ms_cell(b.p50), ms_cell(b.p75), ms_cell(r.tpot_ms.p90),
                 ms_cell(r.tpot_ms.p99), ms_cell(r.tpot_ms.max), ms_cell(b.mean), ms_cell(b.sd)}},
               {0, 1, 2, 3, 4, 5, 6, 7, 8});
  const Histogram hist = make_histogram(gaps, kHistogramBins);
  uint64_t top = hist.above;
  for (uint64_t c : hist.counts) top = std::max(top, c);
  auto bar = [&](uint64_t count) {
    const auto cells = static_cast<size_t>(
        std::ceil(static_cast<double>(count) * kBarWidth / static_cast<double>(std::max<uint64_t>(top, 1))));
    std::string out;
    for (size_t i = 0; i < cells; ++i) out += "█";
    return out;
  };
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < hist.counts.size(); ++i) {
    const double lo = hist.bin_width * static_cast<double>(i);
    rows.push_back(
        {ms_cell(lo) + "–" + ms_cell(lo + hist.bin_width), std::to_string(hist.counts[i]), bar(hist.counts[i])});
  }
  if (hist.above) rows.push_back({"> " + ms_cell(hist.hi), std::to_string(hist.above), bar(hist.above)});
  out += table({"gap ms", "gaps", ""}, rows, {1});
  return out;
}

std::string ttft_md(const Report& r) {
  std::string out = "## TTFT against input length\n\n";
  const std::string measure = ttft_input_measure(r);
  if (r.ttft_fit.valid) {
    out += fmt::format("Fit: TTFT ≈ {:.3g}·√input + {:.3g} ms (R² {:.2f}, {} requests, input in {}).\n\n", r.ttft_fit.a,
                       r.ttft_fit.b, r.ttft_fit.r2, r.ttft_fit.n, r.ttft_fit.input);
  } else {
    out += no_fit_reason(r) + "\n\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const InputBucket& b : ttft_by_input(r, kInputBuckets)) {
    rows.push_back({fmt::format("{:g}–{:g}", b.input_lo, b.input_hi), std::to_string(b.requests), ms_cell(b.ttft_p50),
                    ms_cell(b.ttft_p90), ms_cell(b.fitted_ms)});
  }
  if (rows.empty()) return out + "No request with a first token.\n\n";
  return out + table({"input " + measure, "requests", "TTFT p50 ms", "TTFT p90 ms", "fitted ms"}, rows, {1, 2, 3, 4});
}

std::string lengths_md(const Report& r) {
  std::vector<std::vector<std::string>> rows = length_rows(r);
  if (rows.empty()) return "";
  return "## Input and output lengths\n\n" + table(length_headers(), rows, {1, 2, 3, 4});
}

std::string requests_md(const Report& r) {
  if (r.request_rows.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < std::min(r.request_rows.size(), kMaxRequestRows); ++i)
    rows.push_back(escaped(request_cells(r, r.request_rows[i])));
  std::string out = "## Requests\n\n" + table(request_headers(), rows, {1, 2, 3, 4, 5, 6, 7, 8});
  if (r.request_rows.size() > kMaxRequestRows)
    out += fmt::format("The first {} of {} requests; the JSON report has all.\n\n", kMaxRequestRows,
                       r.request_rows.size());
  return out;
}

std::set<size_t> numeric_columns(const CellTable& t) {
  std::set<size_t> out;
  for (size_t i = 0; i < t.numeric.size(); ++i)
    if (t.numeric[i]) out.insert(i);
  return out;
}

std::string cell_table_md(const CellTable& t) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : t.rows) rows.push_back(escaped(row));
  return table(escaped(t.headers), rows, numeric_columns(t));
}

std::string definitions_md(const Report& r) {
  const CellTable t = definitions_table(r);
  if (t.rows.empty()) return "";
  return "## Definitions (ms)\n\n" + md(std::string(kDefinitionsCaption)) + ".\n\n" + cell_table_md(t);
}

std::string client_join_md(const Report& r) {
  if (!r.client_join.present) return "";
  std::string out = "## Client and server side by side\n\n" + md(client_join_caption(r)) + ".\n\n";
  if (r.client_join.matched == 0) return out;
  out += cell_table_md(client_join_summary_table(r)) + md(client_join_note(r)) + ".\n\n";
  out += cell_table_md(client_join_requests_table(r, kMaxRequestRows));
  if (r.client_join.requests.size() > kMaxRequestRows)
    out += fmt::format("The first {} of {} requests; the JSON report has all.\n\n", kMaxRequestRows,
                       r.client_join.requests.size());
  return out;
}

std::string environment_md(const Report& r) {
  std::vector<std::vector<std::string>> rows;
  for (const EnvRow& row : environment_rows(r)) rows.push_back({md(row.label), md(row.value)});
  return "## Environment\n\n" + table({"", ""}, rows);
}

std::string probes_md(const Report& r) {
  if (r.probes.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const ProbeStatus& p : r.probes)
    rows.push_back(
        {md(p.name), md(std::string(p.status_name())), std::to_string(p.events), std::to_string(p.lost), md(p.reason)});
  std::string out = "## Probes\n\n" + table({"probe", "status", "events", "lost", "reason"}, rows, {2, 3});
  if (const uint64_t lost = lost_events(r))
    out += fmt::format(
        "**{} events were lost** (ring buffer full): tokens or evidence may be missing; raise "
        "`--ringbuf-size`.\n\n",
        lost);
  if (const std::string cost = agent_cost_text(r.agent); !cost.empty()) out += md(cost) + ".\n\n";
  return out;
}

std::string warnings_md(const Report& r) {
  if (r.warnings.empty()) return "";
  std::string out = fmt::format("## Warnings ({})\n\n", r.warnings.size());
  for (const std::string& w : r.warnings) out += "- " + md(w) + "\n";
  return out + "\n";
}

// What the slow tokens ran beyond a typical token (report/frames_view.hpp).
std::string frames_md(const Report& r) {
  const CellTable outliers = outlier_frames_table(r, kMaxTableRows), typical = typical_frames_table(r);
  if (outliers.rows.empty() && typical.rows.empty()) return "";
  std::string out =
      "## What the slow tokens ran\n\nUser-space functions of the on-CPU samples, as a share of the "
      "window's samples.\n\n";
  if (auto head = frames_headline(r); !head.empty()) out += "Slow tokens ran " + md(head) + ".\n\n";
  if (!outliers.rows.empty()) out += cell_table_md(outliers);
  if (!typical.rows.empty()) out += cell_table_md(typical);
  return out;
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::string out = title_line(report);
  out += summary_md(report);
  out += findings_md(report);
  out += causes_md(report);
  out += outliers_md(report);
  out += frames_md(report);
  out += tpot_md(report);
  out += ttft_md(report);
  out += definitions_md(report);
  out += client_join_md(report);
  out += lengths_md(report);
  out += requests_md(report);
  out += environment_md(report);
  out += probes_md(report);
  out += warnings_md(report);
  out += "---\nlatency-doctor " LD_VERSION ", schema " + std::string(kReportSchema) +
         "; `--format json` has every number.\n";
  return out;
}

}  // namespace ld::report
