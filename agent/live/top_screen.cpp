#include "live/top_screen.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "report/report_view.hpp"

namespace ld::live {
namespace {

// Cuts `line` to `width` columns, a UTF-8 sequence counting one.
std::string fit(const std::string& line, int width) {
  int columns = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const auto byte = static_cast<unsigned char>(line[i]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte
    if (columns++ == width) return line.substr(0, i);
  }
  return line;
}

std::string ms_text(double ms) {
  if (std::isnan(ms)) return "-";
  if (ms >= 10000) return fmt::format("{:.1f} s", ms / 1000);
  return ms >= 100 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} ms", ms);
}

std::string percentiles(const model::Distribution& d) {
  if (d.count == 0) return fmt::format("{:<34}", "  none");
  return fmt::format("{:>6}  p50 {:>8}  p99 {:>8}", d.count, ms_text(d.p50), ms_text(d.p99));
}

std::string bar(double share, int width) {
  const int cells = std::clamp(static_cast<int>(std::lround(share * width)), share > 0 ? 1 : 0, width);
  std::string out;
  for (int i = 0; i < cells; ++i) out += "█";
  return out;
}

std::string kind_text(model::WindowKind kind) { return kind == model::WindowKind::kTtft ? "first" : "gap"; }

std::string probes_text(const std::vector<model::ProbeStatus>& probes) {
  uint64_t lost = 0;
  std::string attached, missing;
  for (const auto& p : probes) {
    lost += p.lost;
    if (p.status == model::ProbeState::kAttached) attached += (attached.empty() ? "" : " ") + p.name;
    else missing += (missing.empty() ? "" : ", ") + fmt::format("{} {}", p.name, p.status_name());
  }
  std::string out = "probes: " + (attached.empty() ? std::string("none attached") : attached);
  if (!missing.empty()) out += " (" + missing + ")";
  out += lost ? fmt::format("  LOST {} events: raise --ringbuf-size", lost) : "  lost 0";
  return out;
}

}  // namespace

std::string sparkline(const std::vector<double>& values) {
  static const char* const kLevels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const double top = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  std::string out;
  for (double v : values) {
    if (v <= 0 || top <= 0) {
      out += ' ';
      continue;
    }
    const auto level = std::clamp(static_cast<int>(std::ceil(v / top * 8)) - 1, 0, 7);
    out += kLevels[level];
  }
  return out;
}

std::string slow_token_line(const SlowToken& t) {
  std::string line =
      fmt::format("{} slow {} {} ({} #{}, tid {}): {} {}", clock_text(t.end_unix_ns), kind_text(t.kind), ms_text(t.ms),
                  t.request, t.token_index, t.tid, model::cause_id(t.cause), ms_text(t.cause_ms));
  if (!t.culprit.empty()) line += " — " + t.culprit;
  if (t.split.size() > 1) line += " [" + report::causes_summary(t.split) + "]";
  return line;
}

std::string status_line(const TopView& view, const ScreenInfo& info) {
  return fmt::format("{} {}: last 60 s TTFT{}  TPOT{}  slow so far {} ({} waiting for their cause)",
                     clock_text(info.now_unix_ns), info.target, percentiles(view.ttft_60s), percentiles(view.tpot_60s),
                     view.slow_seen, view.pending);
}

std::vector<std::string> render_screen(const TopView& view, const ScreenInfo& info, int width, int height) {
  std::vector<std::string> lines;
  const auto elapsed = static_cast<uint64_t>(info.elapsed_s);
  lines.push_back(fmt::format("latency-doctor top  {}  up {:02}:{:02}:{:02}  {}   q quit  p {}  f {}  s save",
                              info.target, elapsed / 3600, elapsed / 60 % 60, elapsed % 60,
                              clock_text(info.now_unix_ns), info.paused ? "resume" : "pause",
                              view.frozen ? "unfreeze" : "freeze"));
  lines.push_back(fmt::format("        {:<34}  {}", "last 10 s", "last 60 s"));
  lines.push_back(fmt::format("TTFT  {}  {}", percentiles(view.ttft_10s), percentiles(view.ttft_60s)));
  lines.push_back(fmt::format("TPOT  {}  {}", percentiles(view.tpot_10s), percentiles(view.tpot_60s)));
  const double top = view.tpot_p99_by_second.empty()
                         ? 0
                         : *std::max_element(view.tpot_p99_by_second.begin(), view.tpot_p99_by_second.end());
  lines.push_back(fmt::format("TPOT p99 by second |{}| 60 s, top {}", sparkline(view.tpot_p99_by_second),
                              top > 0 ? ms_text(top) : "-"));
  lines.emplace_back();

  lines.push_back(view.slow_causes_60s.empty() ? "Slow tokens' time by cause, last 60 s: no slow token explained"
                                               : "Slow tokens' time by cause, last 60 s:");
  for (const auto& c : view.slow_causes_60s)
    lines.push_back(fmt::format("  {:<20} {:>4.0f}%  {:<20} {}", model::cause_id(c.cause), c.share * 100,
                                bar(c.share, 20), ms_text(c.ms)));
  lines.emplace_back();

  // The findings and the probes at the bottom; the list takes what is left.
  std::vector<std::string> bottom;
  bottom.emplace_back();
  bottom.push_back(view.findings.empty() ? "Findings: none yet" : "Findings:");
  const size_t shown_findings = std::min<size_t>(view.findings.size(), 5);
  for (size_t i = 0; i < shown_findings; ++i) {
    const auto& f = view.findings[i].finding;
    const std::string size = report::evidence_size_text(f);
    bottom.push_back(fmt::format("  {:<4}  {}: {} ({}last {})", f.severity, f.rule, f.title,
                                 size.empty() ? "" : size + ", ", clock_text(view.findings[i].last_unix_ns)));
    if (i == 0 && !f.remedy.empty()) bottom.push_back("        fix: " + f.remedy);
  }
  bottom.push_back(probes_text(info.probes) +
                   fmt::format("  records {}{}  attribution {} x, last {:.0f} ms", view.records,
                               view.records_dropped ? fmt::format(" ({} dropped)", view.records_dropped) : "",
                               view.analyses, view.last_analysis_ms));
  if (!info.message.empty()) bottom.push_back(info.message);

  lines.push_back(fmt::format("Slow tokens, newest first{}{}", view.frozen ? " (FROZEN)" : "",
                              view.pending ? fmt::format("; {} waiting for their cause", view.pending) : ""));
  lines.push_back(fmt::format("  {:<12}  {:<5}  {:<16} {:>6}  {:>9}  {:<20} {}", "TIME", "KIND", "REQUEST", "TOKEN",
                              "TOOK", "CAUSE", "CULPRIT"));
  const int room = height - static_cast<int>(lines.size() + bottom.size());
  const size_t rows = room > 0 ? std::min<size_t>(view.slow.size(), static_cast<size_t>(room)) : 0;
  for (size_t i = 0; i < rows; ++i) {
    const SlowToken& t = view.slow[i];
    lines.push_back(fmt::format("  {:<12}  {:<5}  {:<16} {:>6}  {:>9}  {:<20} {}", clock_text(t.end_unix_ns),
                                kind_text(t.kind), t.request, fmt::format("#{}", t.token_index), ms_text(t.ms),
                                fmt::format("{} {}", model::cause_id(t.cause), ms_text(t.cause_ms)), t.culprit));
  }
  if (view.slow.empty()) lines.emplace_back("  none yet");
  for (int pad = height - static_cast<int>(lines.size() + bottom.size()); pad > 0; --pad) lines.emplace_back();
  lines.insert(lines.end(), bottom.begin(), bottom.end());
  if (static_cast<int>(lines.size()) > height) lines.resize(std::max(height, 0));
  for (auto& line : lines) line = fit(line, width);
  return lines;
}

}  // namespace ld::live
