// latency-doctor dump: the last minutes of a running serve's flight recorder, as one trace.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "serve/dump_socket.hpp"

namespace ld::cli {
namespace {

struct DumpCmdOptions {
  std::string since = "10m";
  std::string output;
  std::string socket = "/run/latency-doctor/serve.sock";
};

int run_dump(const DumpCmdOptions& o) {
  auto since = parse_duration_ms(o.since);
  if (!since) {
    print_error("dump", fmt::format("--since {}: expected a duration such as 30s, 10m, 1h", o.since));
    return kExitUsage;
  }
  if (o.output.empty() || o.output == "-") {
    print_error("dump", "-o FILE.ldtrace is needed (a trace is binary)");
    return kExitUsage;
  }
  // Written beside the target and renamed at the end: a failed dump leaves no half file.
  const std::string tmp = o.output + ".part";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    print_error("dump", fmt::format("{}: {}", o.output, std::strerror(errno)));
    return kExitRuntime;
  }
  fchmod(fd, 0600);
  try {
    auto got = serve::request_dump(o.socket, *since, fd);
    if (fsync(fd) != 0 && errno != EINVAL)
      throw std::runtime_error(fmt::format("{}: {}", o.output, std::strerror(errno)));
    close(fd);
    if (rename(tmp.c_str(), o.output.c_str()) != 0)
      throw std::runtime_error(fmt::format("{}: {}", o.output, std::strerror(errno)));
    print_warnings(got.warnings);
    fmt::print(stderr, "wrote {}: {} events from {} segment(s), {} bytes\n  next: latency-doctor report {}\n", o.output,
               got.records, got.segments, got.bytes, o.output);
    return kExitOk;
  } catch (const std::exception& e) {
    close(fd);
    unlink(tmp.c_str());
    print_error("dump", e.what());
    return kExitRuntime;
  }
}

}  // namespace

void register_dump(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<DumpCmdOptions>();
  auto* sub = app.add_subcommand("dump", "Save the last minutes of a running serve's flight recorder");
  sub->footer(
      "Asks `latency-doctor serve` (over its local socket, root only) for the trace of the last\n"
      "--since and writes it as one .ldtrace (mode 0600) for `report`.\n\n"
      "Example:\n"
      "  latency-doctor dump --since 10m -o incident.ldtrace && latency-doctor report incident.ldtrace");
  sub->add_option("--since", opts->since, "How far back: 30s, 10m, 1h")->capture_default_str();
  sub->add_option("-o,--output", opts->output, "The trace file to write (FILE.ldtrace)")->required();
  sub->add_option("--socket", opts->socket, "The serve's socket (serve --socket)")->capture_default_str();
  sub->callback([opts, &exit_code] { exit_code = run_command("dump", [&] { return run_dump(*opts); }); });
}

}  // namespace ld::cli
