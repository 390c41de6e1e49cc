// latency-doctor diff A B: before and after, from two traces or two JSON reports.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "analysis/event_analyzer.hpp"
#include "cli/common.hpp"
#include "compare/diff.hpp"
#include "events.h"
#include "rules/engine.hpp"
#include "trace/trace_file.hpp"

namespace ld::cli {
namespace {

struct DiffOptions {
  std::string before;
  std::string after;
  std::string format = "text";
  std::string output;
  std::string fail_on;
  std::vector<std::string> rules;
};

// A trace is analysed as `report` would (the shipped rules and --rules), then read as its JSON.
nlohmann::json report_json_of_trace(const std::string& path, const rules::RuleSet& rule_set) {
  analysis::EventAnalyzer analyzer;
  auto read = trace::read_trace(path, [&](const ld_hdr& rec) { analyzer.on_record(rec, rec.size); });
  const trace::TraceMeta meta = trace::read_meta(read.header, read.trailer);
  auto report = analyzer.finish(meta, meta.header.token_source, read.warnings, "");
  rules::apply_rules(report, rule_set, rules::host_facts_of(report));
  for (const std::string& w : report.warnings) print_warnings({path + ": " + w});
  return nlohmann::json::parse(report::render_json(report));
}

bool is_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  char magic[8] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 8 && std::string(magic, 7) == "LDTRACE";
}

compare::Side side_of_file(const std::string& path, const rules::RuleSet& rule_set) {
  if (is_trace_file(path)) return compare::side_of_report(report_json_of_trace(path, rule_set), path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(
        fmt::format("{}: neither a trace nor a JSON report (JSON byte {}: not JSON)", path, e.byte));
  }
  try {
    return compare::side_of_report(report, path);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());  // a bad file is a runtime error (exit 2), not a usage one
  }
}

int run_diff(const DiffOptions& o) {
  if (!o.fail_on.empty() && o.fail_on != "worse" && o.fail_on != "not-better")
    throw std::invalid_argument(fmt::format("--fail-on {}: expected worse or not-better", o.fail_on));
  if (!compare::is_diff_format(o.format))
    throw std::invalid_argument(fmt::format("--format {}: expected text, markdown, html or json", o.format));
  auto out = Output::open(o.output);
  const rules::RuleSet rule_set = rules::load_rules(o.rules);
  compare::Diff diff = compare::diff_sides(side_of_file(o.before, rule_set), side_of_file(o.after, rule_set));
  out->write(compare::render_diff(diff, o.format));
  const compare::Outcome outcome = diff.verdict.outcome;
  if (o.fail_on == "worse" && outcome == compare::Outcome::kWorse) return kExitAuditFinding;
  if (o.fail_on == "not-better" && outcome != compare::Outcome::kBetter) return kExitAuditFinding;
  return kExitOk;
}

}  // namespace

void register_diff(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<DiffOptions>();
  auto* sub = app.add_subcommand("diff", "Compare two runs (traces or JSON reports): did the fix work?");
  sub->footer(
      "Each input is an .ldtrace (analysed as `report` would) or a JSON report (`--format json`).\n"
      "Prints TTFT/TPOT p50/p90/p99 side by side with the change and its 95% interval (the runs\n"
      "resampled), time by cause before and after, the findings gone, new and still there, and a\n"
      "one-line verdict. The interval needs the report's histograms (reports of this version on).\n\n"
      "Examples:\n"
      "  latency-doctor diff before.ldtrace after.ldtrace\n"
      "  latency-doctor diff before.json after.json --format html -o diff.html   # both histograms on one axis\n"
      "  latency-doctor diff base.json candidate.json --fail-on worse             # exit 3 when it got worse (CI)");
  sub->add_option("before", opts->before, "The run before the change (.ldtrace or JSON report)")->required();
  sub->add_option("after", opts->after, "The run after the change (.ldtrace or JSON report)")->required();
  sub->add_option("-f,--format", opts->format, "Format: text, markdown, html or json")->capture_default_str();
  sub->add_option("-o,--output", opts->output, "Write the diff to FILE (mode 0600)");
  sub->add_option("--fail-on", opts->fail_on,
                  "Exit 3 when the verdict is `worse`, or with not-better when it is anything but `better`");
  add_rules_option(sub, opts->rules);
  sub->callback([opts, &exit_code] { exit_code = run_command("diff", [&] { return run_diff(*opts); }); });
}

}  // namespace ld::cli
