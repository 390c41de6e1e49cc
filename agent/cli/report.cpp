// latency-doctor report: the report of a recorded trace.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "analysis/event_analyzer.hpp"
#include "cli/common.hpp"
#include "events.h"
#include "rules/engine.hpp"
#include "trace/trace_file.hpp"

namespace ld::cli {
namespace {

struct ReportOptions {
  std::string trace_path;
  std::string tokens;
  std::string client;
  std::string format = "text";
  std::string output;
  std::vector<std::string> rules;
};

int run_report(const ReportOptions& o) {
  std::string token_source = "sse";
  std::string client_source;
  if (!o.tokens.empty()) {
    auto parsed = parse_token_source(o.tokens);
    if (!parsed) throw std::invalid_argument(fmt::format("--tokens {}: expected sse or jsonl:FILE", o.tokens));
    token_source = *parsed;
  }
  client_source = parse_client_source(o.client);
  report_format(o.format);  // rejects an unknown format before the trace is read
  auto out = Output::open(o.output);
  const rules::RuleSet rule_set = rules::load_rules(o.rules);
  analysis::EventAnalyzer analyzer;
  if (format_needs_thread_tracks(o.format)) analyzer.keep_thread_tracks();
  auto read = trace::read_trace(o.trace_path, [&](const ld_hdr& rec) { analyzer.on_record(rec, rec.size); });
  const trace::TraceMeta meta = trace::read_meta(read.header, read.trailer);
  if (o.tokens.empty()) token_source = meta.header.token_source;  // as recorded
  auto report = analyzer.finish(meta, token_source, read.warnings, client_source);
  rules::apply_rules(report, rule_set, rules::host_facts_of(report));
  out->write(render(report, o.format));
  print_warnings(report.warnings);
  return kExitOk;
}

}  // namespace

void register_report(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand("report", "Analyse a recorded trace (from `record` or `attach --record`)");
  sub->footer(
      "A truncated or damaged trace is read up to its last good chunk, with a warning.\n\n"
      "Examples:\n"
      "  latency-doctor report incident.ldtrace\n"
      "  latency-doctor report incident.ldtrace --format json -o report.json\n"
      "  latency-doctor report incident.ldtrace --format html -o report.html   # plots, one offline file\n"
      "  latency-doctor report incident.ldtrace --format perfetto -o trace.json  # open in ui.perfetto.dev\n"
      "  latency-doctor report incident.ldtrace --tokens jsonl:client-tokens.jsonl\n"
      "  latency-doctor report incident.ldtrace --client client-tokens.jsonl  # client and server side by side");
  sub->add_option("trace", opts->trace_path, "The .ldtrace file")->required();
  sub->add_option("--tokens", opts->tokens, "Token times from jsonl:FILE instead of the recorded socket sends");
  sub->add_option("--client", opts->client, kClientHelp);
  sub->add_option("-f,--format", opts->format, report_format_help())->capture_default_str();
  sub->add_option("-o,--output", opts->output, "Write the report to FILE (mode 0600)");
  add_rules_option(sub, opts->rules);
  sub->callback([opts, &exit_code] { exit_code = run_command("report", [&] { return run_report(*opts); }); });
}

}  // namespace ld::cli
