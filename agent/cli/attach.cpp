// latency-doctor attach: record + analyse, then print the report.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "analysis/event_analyzer.hpp"
#include "cli/common.hpp"
#include "live/top_model.hpp"
#include "live/top_screen.hpp"
#include "probes/probe_session.hpp"
#include "probes/recorder.hpp"
#include "rules/engine.hpp"
#include "trace/trace_file.hpp"

namespace ld::cli {
namespace {

struct AttachOptions {
  RecordFlags record;
  std::string tokens = "sse";
  std::string client;
  std::string record_path;
  std::string format = "text";
  std::string output;
  std::vector<std::string> rules;
  bool live = false;
};

int run_attach(const AttachOptions& o) {
  probes::RecordOptions options;
  std::optional<std::string> token_source;
  std::string client_source;
  // Live alerts are for a person watching: read every second unless told otherwise.
  options = o.live ? to_record_options(o.record, 1000) : to_record_options(o.record);
  token_source = parse_token_source(o.tokens);
  if (!token_source) throw std::invalid_argument(fmt::format("--tokens {}: expected sse or jsonl:FILE", o.tokens));
  client_source = parse_client_source(o.client);
  report_format(o.format);  // rejects an unknown format before we trace
  options.trace_path = o.record_path;
  options.token_source = *token_source;
  auto out = Output::open(o.output);
  // A bad --rules fails before tracing.
  const auto rule_set = std::make_shared<const rules::RuleSet>(rules::load_rules(o.rules));
  analysis::EventAnalyzer analyzer;
  if (format_needs_thread_tracks(o.format)) analyzer.keep_thread_tracks();
  probes::install_stop_signals();
  auto status = [&] {
    return fmt::format("{} events, {} requests", analyzer.records(), analyzer.request_lines_seen());
  };
  // --live: each slow token with its cause a second or so after it, from top's engine (a first
  // token over 800 ms or a gap over 150 ms starts the attribution over the last minute).
  std::optional<live::TopModel> live;
  if (o.live) {
    live.emplace(live::TopOptions{}, rule_set);
    options.on_start = [&](const trace::TraceHeader& header) { live->on_start(header); };
    options.on_wake = [&](probes::ProbeSession& session, uint64_t now) {
      for (const auto& token : live->tick(now, session.status()))
        fmt::print(stderr, "{}live: {}\n", isatty(STDERR_FILENO) ? "\r\033[K" : "",  // over the progress line
                   live::slow_token_line(token));
    };
  }
  auto recorded = probes::record(
      options,
      [&](const ld_hdr& rec, size_t size) {
        analyzer.on_record(rec, size);
        if (live) live->on_record(rec, size);
      },
      status);
  auto report = analyzer.finish(trace::TraceMeta{recorded.header, recorded.trailer, {}}, options.token_source,
                                std::move(recorded.warnings), client_source);
  rules::apply_rules(report, *rule_set, rules::host_facts_of(report));
  out->write(render(report, o.format));
  print_warnings(report.warnings);
  if (!o.record_path.empty() && !o.record.quiet)
    fmt::print(stderr, "trace written to {} (latency-doctor report {})\n", o.record_path, o.record_path);
  return kExitOk;
}

}  // namespace

void register_attach(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<AttachOptions>();
  auto* sub = app.add_subcommand("attach", "Trace a running server and explain its TTFT and TPOT");
  sub->footer(
      "Attaches to the server's socket sends, rebuilds every streamed request (time to first\n"
      "token, gaps between tokens), and prints the report when --duration elapses, on Ctrl-C,\n"
      "or when the target exits. The processes that serve with the target are traced with it:\n"
      "its children, and those it talks to over unix sockets, pipes or shared memory (vLLM's and\n"
      "SGLang's engine processes behind the API server); each is named with the reason on start.\n"
      "--no-follow traces the given pids alone.\n\n"
      "Examples:\n"
      "  latency-doctor attach --pid 4242 --duration 60s\n"
      "  latency-doctor attach --pid 4242 --children --record incident.ldtrace --format json -o report.json\n"
      "  latency-doctor attach --pid 4242 --tokens jsonl:/var/log/tokens.jsonl\n"
      "  latency-doctor attach --pid 4242 --client client.jsonl   # bench --tokens-out client.jsonl meanwhile\n\n"
      "--client FILE is read when the trace ends: a load client that writes its log when it\n"
      "finishes (bench) must be done before the agent stops.");
  add_record_flags(sub, opts->record, "30s");
  sub->add_option("--tokens", opts->tokens,
                  "Where token times come from: sse (the target's own SSE sends) or jsonl:FILE "
                  "(a token log written by the app or a load client)")
      ->capture_default_str();
  sub->add_option("--client", opts->client, kClientHelp);
  sub->add_option("--record", opts->record_path, "Also write the trace to FILE.ldtrace (mode 0600)");
  sub->add_option("-f,--format", opts->format, report_format_help())->capture_default_str();
  sub->add_option("-o,--output", opts->output, "Write the report to FILE (mode 0600) instead of stdout");
  add_rules_option(sub, opts->rules);
  sub->add_flag("--live", opts->live,
                "Also print each slow first token (> 800 ms) and slow gap (> 150 ms) on stderr with its cause, "
                "a second or two after it (as `top --lines` does)");
  sub->callback([opts, &exit_code] { exit_code = run_command("attach", [&] { return run_attach(*opts); }); });
}

}  // namespace ld::cli
