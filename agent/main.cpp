// latency-doctor: where did the time of a slow token go?
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "latency-doctor: traces an LLM inference server with eBPF and explains its slow first\n"
      "tokens (TTFT) and slow gaps between tokens (TPOT).\n\n"
      "Start here:\n"
      "  sudo latency-doctor attach --pid $(pgrep -f vllm) --duration 60s\n"
      "  latency-doctor bench --url http://127.0.0.1:8000/v1/completions --requests 20\n",
      "latency-doctor"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");
  int exit_code = ld::cli::kExitOk;
  ld::cli::register_attach(app, exit_code);
  ld::cli::register_top(app, exit_code);
  ld::cli::register_record(app, exit_code);
  ld::cli::register_report(app, exit_code);
  ld::cli::register_bench(app, exit_code);
  ld::cli::register_audit(app, exit_code);
  ld::cli::register_rules(app, exit_code);
  ld::cli::register_serve(app, exit_code);
  ld::cli::register_dump(app, exit_code);
  ld::cli::register_diff(app, exit_code);
  ld::cli::register_version(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return ld::cli::kExitUsage;  // the contract: usage errors exit 1
  }
  return exit_code;
}
