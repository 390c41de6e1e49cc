// The human report: what a person at a terminal needs to judge TTFT/TPOT at a glance, with the
// source article's perception thresholds as hints and a pointer to the JSON for the rest.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "report/frames_view.hpp"
#include "report/report.hpp"
#include "report/report_view.hpp"
#include "report/text_table.hpp"
#include "util/time.hpp"

namespace ld::report {

using namespace model;
namespace {

constexpr size_t kMaxRequestRows = 50;
const std::string kIndent = "  ";

std::string duration_text(uint64_t ms) {
  if (ms < util::kMsPerSec) return fmt::format("{} ms", ms);
  return fmt::format("{:.1f} s", util::ms_to_s(ms));
}

std::string plural(uint64_t n, const std::string& one, const std::string& many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

bool is_token_log(const Report& r) { return r.token_source.rfind("jsonl:", 0) == 0; }

std::string target_line(const Target& target) {
  std::string pids;
  for (size_t i = 0; i < target.pids.size(); ++i) {
    pids += (i == 0 ? "" : ",") + std::to_string(target.pids[i]);
  }
  std::string line = target.pids.size() == 1 ? "pid " + pids : "pids " + (pids.empty() ? "-" : pids);
  if (!target.comm.empty()) line += " (" + printable(target.comm) + ")";
  if (!target.exe.empty()) line += " " + printable(target.exe);
  return line;
}

std::string header_section(const Report& r) {
  std::string out = "latency-doctor report\n";
  out += kIndent + "target   " + target_line(r.target) + "\n";
  if (const std::string followed = followed_text(r.target); !followed.empty())
    out += kIndent + "also     " + printable(followed) + "\n";
  const std::string start = r.start_unix_ns == 0 ? "start unknown" : utc_time(r.start_unix_ns);
  out += kIndent + "window   " + start + ", " + duration_text(r.duration_ms) + "\n";
  const std::string source = is_token_log(r) ? "token log " + printable(r.token_source.substr(6))
                                             : "SSE data events or gRPC messages in the target's socket sends";
  out += kIndent + "tokens   " + source + "\n";
  return out;
}

std::string side_counts(const Report& r) {
  std::vector<std::string> parts;
  if (r.non_streaming_requests > 0) {
    parts.push_back(plural(r.non_streaming_requests, "non-streaming request", "non-streaming requests") +
                    " (no SSE data events, e.g. health checks)");
  }
  if (r.partial_requests > 0) {
    parts.push_back(plural(r.partial_requests, "response", "responses") + " already running at trace start");
  }
  if (r.in_flight_requests > 0) {
    parts.push_back(plural(r.in_flight_requests, "request", "requests") + " unanswered at trace end");
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : ", ") + parts[i];
  return out;
}

std::string distribution_table(const Report& r) {
  TextTable table({{"", Align::kLeft}, {"n"}, {"p50"}, {"p90"}, {"p95"}, {"p99"}, {"max"}, {"mean"}, {"sd"}});
  auto add = [&](const std::string& name, const model::Distribution& d) {
    table.add_row({name, std::to_string(d.count), ms_cell(d.p50), ms_cell(d.p90), ms_cell(d.p95), ms_cell(d.p99),
                   ms_cell(d.max), ms_cell(d.mean), ms_cell(d.stddev)});
  };
  add("TTFT ms", r.ttft_ms);
  add("TPOT ms", r.tpot_ms);  // p50 of the gaps is the median the article asks for
  return table.render(kIndent);
}

std::string thresholds_section(const Report& r) {
  const Thresholds& t = r.thresholds;
  const ThresholdCounts& c = r.over_thresholds;
  struct Line {
    std::string label;
    uint64_t count;
    std::string of;
  };
  const std::vector<Line> lines = {
      {fmt::format("TTFT > {:g} ms (feels stuck)", t.ttft_stuck_ms), c.ttft_stuck,
       plural(r.requests, "request", "requests")},
      {fmt::format("TPOT gap > {:g} ms (broken sentence)", t.gap_broken_ms), c.gaps_broken,
       plural(r.gaps, "gap", "gaps")},
      {fmt::format("TPOT gap > {:g} ms (spike)", t.gap_spike_ms), c.gaps_spike, plural(r.gaps, "gap", "gaps")},
  };
  size_t label_width = 0;
  size_t count_width = 0;
  for (const Line& l : lines) {
    label_width = std::max(label_width, l.label.size());
    count_width = std::max(count_width, std::to_string(l.count).size());
  }
  std::string out = "thresholds (from the source article)\n";
  for (const Line& l : lines) {
    out += kIndent + fmt::format("{:<{}}  {:>{}} of {}\n", l.label, label_width, l.count, count_width, l.of);
  }
  return out;
}

TextTable text_table(const CellTable& cells, bool printable_cells) {
  std::vector<Column> columns;
  for (size_t i = 0; i < cells.headers.size(); ++i)
    columns.push_back({cells.headers[i], i < cells.numeric.size() && cells.numeric[i] ? Align::kRight : Align::kLeft});
  TextTable table(std::move(columns));
  for (std::vector<std::string> row : cells.rows) {
    if (printable_cells)
      for (std::string& cell : row) cell = printable(cell);
    table.add_row(std::move(row));
  }
  return table;
}

// The common definitions side by side (model/definitions.hpp): what each tool would report.
std::string definitions_section(const Report& r) {
  const CellTable cells = definitions_table(r);
  if (cells.rows.empty()) return "";
  return std::string("definitions (ms; ") + kDefinitionsShortCaption + ")\n" + text_table(cells, false).render(kIndent);
}

constexpr size_t kMaxJoinedRows = 20;

// A client's token log beside the server's own times (model/client_join.hpp).
std::string client_join_section(const Report& r) {
  const ClientJoin& c = r.client_join;
  if (!c.present) return "";
  std::string out = "client and server side by side (" + printable(client_join_caption(r)) + ")\n";
  if (c.matched == 0) return out + kIndent + "no request of the log matches one the server served (see the warnings)\n";
  out += text_table(client_join_summary_table(r), false).render(kIndent);
  out += kIndent + client_join_note(r) + "\n";
  out +=
      kIndent + "per request (ms)\n" + text_table(client_join_requests_table(r, kMaxJoinedRows), true).render(kIndent);
  if (c.requests.size() > kMaxJoinedRows)
    out += kIndent + fmt::format("… {} more (use --format json)\n", c.requests.size() - kMaxJoinedRows);
  return out;
}

std::string no_requests_hint(const Report& r) {
  std::string out;
  if (is_token_log(r)) {
    out = kIndent + "no requests with tokens in the token log: check the warnings below; each line must be\n" +
          kIndent + "{\"request\":\"ID\",\"event\":\"start|token|end\",\"t_ns\":N}\n";
  } else {
    out = kIndent + "no streaming responses seen: is the server using TLS, HTTP/2, or a unix socket?\n" + kIndent +
          "try --tokens jsonl:FILE with token times logged by the application or the client\n";
  }
  return out;
}

std::string row_notes(const RequestRow& row, const Thresholds& t) {
  std::vector<std::string> notes;
  if (row.ttft_ms > t.ttft_stuck_ms) notes.push_back(fmt::format("ttft>{:g}", t.ttft_stuck_ms));
  if (row.tpot_max_ms > t.gap_spike_ms) {
    notes.push_back(fmt::format("spike>{:g}", t.gap_spike_ms));
  } else if (row.tpot_max_ms > t.gap_broken_ms) {
    notes.push_back(fmt::format("gap>{:g}", t.gap_broken_ms));
  }
  if (!row.complete) notes.push_back("incomplete");
  std::string out;
  for (size_t i = 0; i < notes.size(); ++i) out += (i == 0 ? "" : " ") + notes[i];
  return out;
}

std::string requests_section(const Report& r) {
  TextTable table({{"id", Align::kLeft},
                   {"start s"},
                   {"in bytes"},
                   {"in tok"},
                   {"ttft ms"},
                   {"tokens"},
                   {"tpot med ms"},
                   {"tpot sd ms"},
                   {"tpot max ms"},
                   {"notes", Align::kLeft}});
  const size_t shown = std::min(r.request_rows.size(), kMaxRequestRows);
  for (size_t i = 0; i < shown; ++i) {
    const RequestRow& row = r.request_rows[i];
    const double start_s = util::offset_s(row.start_unix_ns, r.start_unix_ns);
    table.add_row({row.id, fmt::format("{:.3f}", start_s), std::to_string(row.input_bytes),
                   row.input_tokens >= 0 ? std::to_string(row.input_tokens) : "-", ms_cell(row.ttft_ms),
                   std::to_string(row.tokens), ms_cell(row.tpot_median_ms), ms_cell(row.tpot_stddev_ms),
                   ms_cell(row.tpot_max_ms), row_notes(row, r.thresholds)});
  }
  std::string out = "requests (start = seconds after the window start)\n" + table.render(kIndent);
  if (r.request_rows.size() > shown) {
    out += kIndent + fmt::format("… {} more (use --format json)\n", r.request_rows.size() - shown);
  }
  return out;
}

std::string cause_list(const std::vector<CauseTime>& causes, bool with_evidence) {
  std::string out;
  for (const CauseTime& c : causes) {
    if (!out.empty()) out += " + ";
    out += fmt::format("{} {} ms", cause_id(c.cause), ms_cell(c.ms));
    if (!with_evidence) continue;
    if (auto phrase = evidence_phrase(c); !phrase.empty()) out += " (" + printable(phrase) + ")";
  }
  return out;
}

std::string fit_line(const Report& r) {
  std::string out;
  if (r.ttft_fit.valid)
    out += kIndent + fmt::format("TTFT baseline: {:.2f} * sqrt(input {}) + {:.1f} ms (R^2 {:.2f}, {} requests)\n",
                                 r.ttft_fit.a, r.ttft_fit.input, r.ttft_fit.b, r.ttft_fit.r2, r.ttft_fit.n);
  if (r.periodicity.found)
    out += kIndent + fmt::format("periodic: {} outliers recur every {:.1f} s; they coincide with {}\n",
                                 r.periodicity.outliers, r.periodicity.period_s, printable(r.periodicity.coincides));
  return out;
}

std::string outliers_section(const Report& r) {
  if (r.outliers.empty())
    return r.request_rows.empty() ? "" : "outliers: none (no slow first token or gap)\n" + fit_line(r);
  std::string out = fmt::format("outliers ({}, baseline = the typical gap or the fitted TTFT)\n", r.outliers.size());
  for (const Outlier& o : r.outliers) {
    out += kIndent + fmt::format("{} {} token {}: {} ms (baseline {} ms)", window_kind_name(o.kind),
                                 printable(o.request), o.token_index, ms_cell(o.duration_ms), ms_cell(o.baseline_ms));
    if (!o.causes.empty()) out += " = " + cause_list(o.causes, true);
    out += "\n";
    if (!o.activity.empty()) out += kIndent + kIndent + "the thread: " + printable(activity_text(o.activity)) + "\n";
  }
  return out + fit_line(r);
}

std::string typical_section(const Report& r) {
  if (!r.attributed || r.typical.windows == 0) return "";
  std::string out = fmt::format("typical token ({} gaps, {} ms each on average)\n", r.typical.windows,
                                ms_cell(r.typical.total_ms / static_cast<double>(r.typical.windows)));
  for (const CauseTime& c : r.typical.causes) {
    out += kIndent + fmt::format("{:<16} {:>5.1f}%  {} ms/token\n", cause_id(c.cause), c.share * 100.0,
                                 ms_cell(c.ms / static_cast<double>(r.typical.windows)));
  }
  return out;
}

std::string findings_section(const std::vector<Finding>& findings) {
  if (findings.empty()) return "";
  std::string out = fmt::format("findings ({})\n", findings.size());
  for (const Finding& f : findings) out += finding_text(f);
  return out;
}

std::string probes_section(const std::vector<ProbeStatus>& probes, const AgentCost& agent) {
  if (probes.empty()) return "";
  TextTable table({{"name", Align::kLeft}, {"status", Align::kLeft}, {"events"}, {"lost"}, {"reason", Align::kLeft}});
  for (const ProbeStatus& p : probes) {
    table.add_row({p.name, std::string(p.status_name()), std::to_string(p.events), std::to_string(p.lost), p.reason});
  }
  std::string out = "probes\n" + table.render(kIndent);
  for (const ProbeStatus& p : probes) {
    if (p.lost == 0) continue;
    out += kIndent + fmt::format(
                         "! {} lost {} events (ring buffer full): numbers may be missing tokens; "
                         "raise --ringbuf-size\n",
                         printable(p.name), p.lost);
  }
  if (const std::string cost = agent_cost_text(agent); !cost.empty()) out += kIndent + cost + "\n";
  return out;
}

std::string warnings_section(const std::vector<std::string>& warnings) {
  if (warnings.empty()) return "";
  std::string out = fmt::format("warnings ({})\n", warnings.size());
  for (const std::string& w : warnings) out += kIndent + printable(w) + "\n";
  return out;
}

std::string summary_section(const Report& r) {
  std::string out = fmt::format("summary: {}, {}", plural(r.requests, "streaming request", "streaming requests"),
                                plural(r.tokens, "token", "tokens"));
  if (r.connections > 0) out += ", " + plural(r.connections, "connection", "connections");
  out += "\n";
  if (auto side = side_counts(r); !side.empty()) out += kIndent + "also: " + side + "\n";
  if (r.requests == 0) return out + no_requests_hint(r);
  out += distribution_table(r);
  if (r.multi_event_sends > 0) {
    out += kIndent +
           fmt::format("note: {} sends carried several SSE events; each counted as one token\n", r.multi_event_sends);
  }
  return out;
}

// What the slow tokens ran beyond a typical token (report/frames_view.hpp).
std::string frames_section(const Report& r) {
  const CellTable outliers = outlier_frames_table(r, 20), typical = typical_frames_table(r);
  if (outliers.rows.empty() && typical.rows.empty()) return "";
  std::string out = "frames (user-space functions of the on-CPU samples; share of the window's samples)\n";
  if (auto head = frames_headline(r); !head.empty()) out += kIndent + "slow tokens ran " + printable(head) + "\n";
  if (!outliers.rows.empty()) out += text_table(outliers, true).render(kIndent);
  if (!typical.rows.empty()) out += text_table(typical, true).render(kIndent);
  return out;
}

void append_section(std::string& out, const std::string& section) {
  if (section.empty()) return;
  out += "\n" + section;
}

}  // namespace

std::string finding_text(const Finding& f) {
  std::string out = kIndent + fmt::format("[{}] {}\n", printable(f.severity), printable(f.title));
  const std::string more = kIndent + "    ";
  if (!f.evidence.empty()) out += more + printable(f.evidence) + "\n";
  if (const std::string size = evidence_size_text(f); !size.empty())
    out += more + "evidence size: " + printable(size) + "\n";
  if (!f.remedy.empty()) out += more + "fix: " + printable(f.remedy) + "\n";
  for (const SysctlRec& s : f.sysctl) {
    out += more + fmt::format("sysctl {} = {} (now {})", printable(s.key), printable(s.value),
                              s.current.empty() ? "unknown" : printable(s.current));
    if (!s.caveat.empty()) out += " - " + printable(s.caveat);
    out += "\n";
  }
  if (!f.verify.empty()) out += more + "verify: " + printable(f.verify) + "\n";
  return out;
}

std::string render_text(const Report& report) {
  std::string out = header_section(report);
  append_section(out, summary_section(report));
  if (report.requests > 0) {
    append_section(out, definitions_section(report));
    append_section(out, thresholds_section(report));
  }
  append_section(out, client_join_section(report));
  if (report.requests > 0) append_section(out, requests_section(report));
  append_section(out, outliers_section(report));
  append_section(out, typical_section(report));
  append_section(out, frames_section(report));
  append_section(out, findings_section(report.findings));
  append_section(out, probes_section(report.probes, report.agent));
  append_section(out, warnings_section(report.warnings));
  return out;
}

}  // namespace ld::report
