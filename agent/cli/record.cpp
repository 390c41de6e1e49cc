// latency-doctor record: trace only, for a later `report`.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "probes/recorder.hpp"

namespace ld::cli {
namespace {

struct RecordCmdOptions {
  RecordFlags record;
  std::string output;
};

int run_record(const RecordCmdOptions& o) {
  probes::RecordOptions options;
  options = to_record_options(o.record);
  options.trace_path = o.output;
  probes::install_stop_signals();
  uint64_t records = 0;
  auto status = [&] { return fmt::format("{} events", records); };
  auto recorded = probes::record(
      options, [&](const ld_hdr&, size_t) { records++; }, status);
  print_warnings(recorded.warnings);
  uint64_t lost = 0;
  for (const auto& p : recorded.trailer.probes) lost += p.lost;
  fmt::print(stderr, "wrote {}: {} events, {} lost, stopped by {}\n  next: latency-doctor report {}\n", o.output,
             records, lost, trace::stop_reason_name(recorded.stop_reason), o.output);
  return kExitOk;
}

}  // namespace

void register_record(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RecordCmdOptions>();
  auto* sub = app.add_subcommand("record", "Record a trace only; analyse it later with `report`");
  sub->footer(
      "The trace (.ldtrace, mode 0600) holds times, lengths and classifications, never payload\n"
      "bytes. It is written as it goes: if the agent is killed, all but the last second remain.\n\n"
      "Example:\n"
      "  latency-doctor record --pid 4242 --duration 5m -o incident.ldtrace\n"
      "  latency-doctor report incident.ldtrace");
  add_record_flags(sub, opts->record, "30s");
  sub->add_option("-o,--output", opts->output, "The trace file to write (FILE.ldtrace)")->required();
  sub->callback([opts, &exit_code] { exit_code = run_command("record", [&] { return run_record(*opts); }); });
}

}  // namespace ld::cli
