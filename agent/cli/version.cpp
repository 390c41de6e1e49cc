#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "trace/trace_file.hpp"

namespace ld::cli {

void register_version(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("version", "Print the version, the trace format and libbpf version");
  sub->callback([&exit_code] {
    fmt::print("latency-doctor {}\ntrace format {}\nlibbpf {}\n", LD_VERSION, trace::kFormatVersion,
               libbpf_version_string());
    exit_code = kExitOk;
  });
}

}  // namespace ld::cli
