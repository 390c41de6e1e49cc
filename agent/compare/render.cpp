// The diff's four formats. Text and markdown read top-down as an SRE reads a change: the
// verdict, the numbers, where the time went, what the rules say now.
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "compare/diff.hpp"
#include "model/cause.hpp"
#include "report/svg.hpp"
#include "report/text_table.hpp"

namespace ld::compare {

using report::Align;
using report::TextTable;

namespace {

std::string ms_text(double ms) {
  if (!std::isfinite(ms)) return "-";
  return ms >= 100 ? fmt::format("{:.0f}", ms) : ms >= 10 ? fmt::format("{:.1f}", ms) : fmt::format("{:.2f}", ms);
}

std::string change_text(const MetricRow& row) {
  if (!std::isfinite(row.change)) return "-";
  std::string text = fmt::format("{:+.1f}%", row.change * 100);
  if (row.interval) text += fmt::format(" ({:+.1f}%..{:+.1f}%)", row.interval->low * 100, row.interval->high * 100);
  else text += " (no interval)";
  return text;
}

std::string share_text(double share) { return fmt::format("{:.1f}%", share * 100); }

std::string slow_text(const Side& s) {
  const uint64_t slow = s.slow_ttft + s.slow_tpot;
  if (s.tokens == 0) return std::to_string(slow);
  return fmt::format("{} ({:.1f} per 1k tokens)", slow,
                     1000.0 * static_cast<double>(slow) / static_cast<double>(s.tokens));
}

std::string side_title(const Side& s) {
  std::string pids;
  for (int pid : s.pids) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  return fmt::format("{} ({} pid {}, {:.1f} s)", s.label, s.comm.empty() ? "?" : s.comm, pids.empty() ? "?" : pids,
                     static_cast<double>(s.duration_ms) / 1000.0);
}

std::string finding_text(const FindingRow& f) {
  switch (f.change) {
    case FindingChange::kGone: return fmt::format("{} [{}]", f.before.title, f.before.rule);
    case FindingChange::kNew: return fmt::format("{} [{}]", f.after.title, f.after.rule);
    case FindingChange::kStill: break;
  }
  return fmt::format("{} [{}]", f.after.title, f.after.rule);
}

std::string severity_text(const FindingRow& f) {
  switch (f.change) {
    case FindingChange::kGone: return f.before.severity;
    case FindingChange::kNew: return f.after.severity;
    case FindingChange::kStill: break;
  }
  return f.before.severity == f.after.severity ? f.after.severity : f.before.severity + " -> " + f.after.severity;
}

// ---------------------------------------------------------------- text

std::string render_text(const Diff& d) {
  std::string out =
      fmt::format("latency-doctor diff\n  before: {}\n  after:  {}\n\nVerdict: {}\n\n",
                  report::printable(side_title(d.before)), report::printable(side_title(d.after)), d.verdict.line);
  TextTable numbers({{"", Align::kLeft}, {"before"}, {"after"}, {"change (95% interval)"}});
  numbers.add_row({"requests", std::to_string(d.before.requests), std::to_string(d.after.requests)});
  numbers.add_row({"tokens", std::to_string(d.before.tokens), std::to_string(d.after.tokens)});
  for (const MetricRow& row : d.metrics)
    numbers.add_row({row.name + " ms", ms_text(row.before), ms_text(row.after), change_text(row)});
  numbers.add_row({"slow tokens", slow_text(d.before), slow_text(d.after)});
  out += numbers.render("  ");
  out += "\nTime by cause (share of all token time; the slow tokens' ms):\n";
  TextTable causes({{"cause", Align::kLeft}, {"before"}, {"slow ms"}, {"after"}, {"slow ms"}});
  for (const CauseRow& c : d.causes)
    causes.add_row({c.cause, share_text(c.before_share), ms_text(c.before_slow_ms), share_text(c.after_share),
                    ms_text(c.after_slow_ms)});
  out += d.causes.empty() ? "  (no attribution in either run)\n" : causes.render("  ");
  out += "\nFindings:\n";
  if (d.findings.empty()) out += "  none in either run\n";
  TextTable findings({{"", Align::kLeft}, {"severity", Align::kLeft}, {"finding", Align::kLeft}});
  for (const FindingRow& f : d.findings)
    findings.add_row(
        {std::string(finding_change_name(f.change)), severity_text(f), report::printable(finding_text(f))});
  if (!d.findings.empty()) out += findings.render("  ");
  return out;
}

// ---------------------------------------------------------------- markdown

std::string md_cell(const std::string& text) {
  std::string out;
  for (char c : report::clean_utf8(text)) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string render_markdown(const Diff& d) {
  std::string out = "# latency-doctor diff\n\n";
  out += fmt::format("- before: `{}`\n- after: `{}`\n\n**Verdict:** {}\n\n", md_cell(side_title(d.before)),
                     md_cell(side_title(d.after)), md_cell(d.verdict.line));
  out += "| | before | after | change (95% interval) |\n|---|---:|---:|---|\n";
  out += fmt::format("| requests | {} | {} | |\n| tokens | {} | {} | |\n", d.before.requests, d.after.requests,
                     d.before.tokens, d.after.tokens);
  for (const MetricRow& row : d.metrics)
    out +=
        fmt::format("| {} ms | {} | {} | {} |\n", row.name, ms_text(row.before), ms_text(row.after), change_text(row));
  out += fmt::format("| slow tokens | {} | {} | |\n\n", slow_text(d.before), slow_text(d.after));
  out += "## Time by cause\n\nShare of all token time; in brackets, the slow tokens' ms.\n\n";
  out += "| cause | before | after |\n|---|---:|---:|\n";
  for (const CauseRow& c : d.causes)
    out += fmt::format("| {} | {} ({} ms) | {} ({} ms) |\n", c.cause, share_text(c.before_share),
                       ms_text(c.before_slow_ms), share_text(c.after_share), ms_text(c.after_slow_ms));
  out += "\n## Findings\n\n";
  if (d.findings.empty()) out += "None in either run.\n";
  else out += "| | severity | finding |\n|---|---|---|\n";
  for (const FindingRow& f : d.findings)
    out += fmt::format("| {} | {} | {} |\n", finding_change_name(f.change), severity_text(f), md_cell(finding_text(f)));
  return out;
}

// ---------------------------------------------------------------- json

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(std::round(v * 1e4) / 1e4) : nlohmann::json(nullptr);
}

nlohmann::ordered_json side_json(const Side& s) {
  nlohmann::ordered_json j;
  j["file"] = report::clean_utf8(s.label);
  j["comm"] = report::clean_utf8(s.comm);
  j["pids"] = s.pids;
  j["duration_ms"] = s.duration_ms;
  j["requests"] = s.requests;
  j["tokens"] = s.tokens;
  j["slow_ttft"] = s.slow_ttft;
  j["slow_tpot"] = s.slow_tpot;
  j["token_time_ms"] = number_or_null(s.token_time_ms);
  return j;
}

nlohmann::ordered_json finding_json(const FindingRef& f) {
  return {{"rule", f.rule}, {"cause", f.cause}, {"severity", f.severity}, {"title", report::clean_utf8(f.title)}};
}

std::string render_json(const Diff& d) {
  nlohmann::ordered_json j;
  j["schema"] = kDiffSchema;
  j["before"] = side_json(d.before);
  j["after"] = side_json(d.after);
  j["verdict"] = {
      {"outcome", outcome_name(d.verdict.outcome)}, {"metric", d.verdict.metric},         {"cause", d.verdict.cause},
      {"cause_fell", d.verdict.cause_fell},         {"fix_worked", d.verdict.fix_worked}, {"line", d.verdict.line}};
  j["metrics"] = nlohmann::ordered_json::array();
  for (const MetricRow& row : d.metrics) {
    nlohmann::ordered_json m;
    m["name"] = row.name;
    m["before_ms"] = number_or_null(row.before);
    m["after_ms"] = number_or_null(row.after);
    m["change"] = number_or_null(row.change);
    if (row.interval) m["interval_95"] = {number_or_null(row.interval->low), number_or_null(row.interval->high)};
    else m["interval_95"] = nullptr;
    j["metrics"].push_back(m);
  }
  j["causes"] = nlohmann::ordered_json::array();
  for (const CauseRow& c : d.causes)
    j["causes"].push_back({{"cause", c.cause},
                           {"before_share", number_or_null(c.before_share)},
                           {"after_share", number_or_null(c.after_share)},
                           {"before_ms", number_or_null(c.before_ms)},
                           {"after_ms", number_or_null(c.after_ms)},
                           {"before_slow_ms", number_or_null(c.before_slow_ms)},
                           {"after_slow_ms", number_or_null(c.after_slow_ms)}});
  j["findings"] = nlohmann::ordered_json::array();
  for (const FindingRow& f : d.findings) {
    nlohmann::ordered_json x;
    x["change"] = finding_change_name(f.change);
    if (f.change != FindingChange::kNew) x["before"] = finding_json(f.before);
    if (f.change != FindingChange::kGone) x["after"] = finding_json(f.after);
    j["findings"].push_back(x);
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------- html

std::string h(const std::string& text) { return report::escape_xml(text); }

constexpr const char* kBeforeColor = "#0072b2";
constexpr const char* kAfterColor = "#d55e00";

// Both runs' histograms on one log axis, as the share of each run's values per bin (the runs
// differ in size): step outlines, before in blue, after in orange.
std::string histograms_svg(const std::string& title, const model::LogHistogram& a, const model::LogHistogram& b) {
  using model::LogHistogram;
  if (a.empty() && b.empty()) return "<p class=\"note\">No values in either run.</p>\n";
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  for (const auto* hist : {&a, &b})
    for (const auto& [bin, n] : hist->bins()) lo = std::min(lo, bin), hi = std::max(hi, bin);
  lo = std::max(lo, 0);
  hi = std::max(hi, lo + 1);
  // Coarser bins for the plot: about 60 across the range.
  const int group = std::max(1, (hi - lo + 1) / 60);
  auto grouped = [&](const LogHistogram& hist) {
    std::vector<double> shares(static_cast<size_t>((hi - lo) / group + 1), 0.0);
    for (const auto& [bin, n] : hist.bins())
      shares[static_cast<size_t>((std::max(bin, lo) - lo) / group)] +=
          static_cast<double>(n) / static_cast<double>(hist.count());
    return shares;
  };
  const std::vector<double> sa = grouped(a), sb = grouped(b);
  double top = 0;
  for (double v : sa) top = std::max(top, v);
  for (double v : sb) top = std::max(top, v);
  const report::PlotArea area{60, 16, 600, 170};
  report::Svg svg(700, 240, title);
  const double x0 = std::log10(LogHistogram::low_ms(lo)),
               x1 = std::log10(LogHistogram::low_ms(lo + static_cast<int>(sa.size()) * group));
  const report::LinearScale x{x0, x1, area.left, area.right()};
  const report::LinearScale y{0, top * 1.05, area.bottom(), area.top};
  svg.y_axis(area, y, report::nice_ticks(0, top * 100 * 1.05, 4), "");
  svg.line(area.left, area.bottom(), area.right(), area.bottom(), "#444");
  for (double decade = std::ceil(x0); decade <= x1; decade += 1) {
    svg.line(x(decade), area.bottom(), x(decade), area.bottom() + 4, "#444");
    svg.text(x(decade), area.bottom() + 16, report::tick_label(std::pow(10.0, decade)), "middle", "axis");
  }
  svg.text(area.left + area.width / 2, area.bottom() + 32, "ms (log scale)", "middle", "axis");
  auto steps = [&](const std::vector<double>& shares, const char* color) {
    std::vector<std::pair<double, double>> points;
    for (size_t i = 0; i < shares.size(); ++i) {
      const int bin = lo + static_cast<int>(i) * group;
      const double left = x(std::log10(LogHistogram::low_ms(bin))),
                   right = x(std::log10(LogHistogram::low_ms(bin + group)));
      points.emplace_back(left, y(shares[i]));
      points.emplace_back(right, y(shares[i]));
    }
    svg.polyline(points, color, 1.8);
  };
  steps(sa, kBeforeColor);
  steps(sb, kAfterColor);
  return "<figure>" + svg.str() + "</figure>\n";
}

std::string render_html(const Diff& d) {
  std::string out =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>latency-doctor diff</title>\n"
      "<style>body{font:14px/1.45 system-ui,sans-serif;color:#1f2328;margin:0}main{max-width:980px;margin:0 auto;"
      "padding:16px 24px}table{border-collapse:collapse;margin:6px 0 14px}th,td{padding:3px 10px;border-bottom:1px "
      "solid #ddd;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}.verdict{font-size:17px;"
      "font-weight:600;padding:8px 12px;border-radius:6px;background:#f3f4f6}.better{background:#e7f5ec}.worse{"
      "background:#fdecea}.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;"
      "vertical-align:-1px}.note{color:#555}svg{max-width:100%;height:auto}svg text{font-size:11px;fill:#333}"
      "</style></head><body><main>\n<h1>latency-doctor diff</h1>\n";
  out += fmt::format(
      "<p><span class=\"sw\" style=\"background:{}\"></span>before: {}<br><span class=\"sw\" "
      "style=\"background:{}\"></span>after: {}</p>\n",
      kBeforeColor, h(side_title(d.before)), kAfterColor, h(side_title(d.after)));
  const char* verdict_class = d.verdict.outcome == Outcome::kBetter  ? " better"
                              : d.verdict.outcome == Outcome::kWorse ? " worse"
                                                                     : "";
  out += fmt::format("<p class=\"verdict{}\">{}</p>\n", verdict_class, h(d.verdict.line));
  out += "<table><tr><th></th><th>before</th><th>after</th><th>change (95% interval)</th></tr>\n";
  out += fmt::format("<tr><td>requests</td><td class=n>{}</td><td class=n>{}</td><td></td></tr>\n", d.before.requests,
                     d.after.requests);
  for (const MetricRow& row : d.metrics)
    out += fmt::format("<tr><td>{} ms</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>\n", h(row.name),
                       ms_text(row.before), ms_text(row.after), h(change_text(row)));
  out += fmt::format("<tr><td>slow tokens</td><td class=n>{}</td><td class=n>{}</td><td></td></tr></table>\n",
                     h(slow_text(d.before)), h(slow_text(d.after)));
  out += "<h2>TPOT: both runs on one axis</h2>\n" +
         histograms_svg("TPOT histograms, before and after", d.before.tpot_hist, d.after.tpot_hist);
  out += "<h2>TTFT: both runs on one axis</h2>\n" +
         histograms_svg("TTFT histograms, before and after", d.before.ttft_hist, d.after.ttft_hist);
  out += "<p class=\"note\">Share of each run's values per bin; blue before, orange after.</p>\n";
  out += "<h2>Time by cause</h2>\n<p class=\"note\">Share of all token time; the slow tokens' ms beside.</p>\n";
  out += "<table><tr><th>cause</th><th>before</th><th>slow ms</th><th>after</th><th>slow ms</th></tr>\n";
  for (const CauseRow& c : d.causes) {
    const auto cause = model::parse_cause(c.cause);
    const std::string color = cause ? std::string(model::cause_info(*cause).color) : "#999";
    out += fmt::format(
        "<tr><td><span class=\"sw\" style=\"background:{}\"></span>{}</td><td class=n>{}</td><td class=n>{}</td><td "
        "class=n>{}</td><td class=n>{}</td></tr>\n",
        h(color), h(c.cause), share_text(c.before_share), ms_text(c.before_slow_ms), share_text(c.after_share),
        ms_text(c.after_slow_ms));
  }
  out += "</table>\n<h2>Findings</h2>\n";
  if (d.findings.empty()) out += "<p>None in either run.</p>\n";
  else out += "<table><tr><th></th><th>severity</th><th>finding</th></tr>\n";
  for (const FindingRow& f : d.findings)
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", finding_change_name(f.change),
                       h(severity_text(f)), h(finding_text(f)));
  if (!d.findings.empty()) out += "</table>\n";
  out += "</main></body></html>\n";
  return out;
}

}  // namespace

bool is_diff_format(const std::string& format) {
  return format == "text" || format == "markdown" || format == "md" || format == "html" || format == "json";
}

std::string render_diff(const Diff& diff, const std::string& format) {
  if (format == "text") return render_text(diff);
  if (format == "markdown" || format == "md") return render_markdown(diff);
  if (format == "html") return render_html(diff);
  if (format == "json") return render_json(diff);
  throw std::invalid_argument(fmt::format("--format {}: expected text, markdown, html or json", format));
}

}  // namespace ld::compare
