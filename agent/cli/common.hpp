// Pieces shared by the subcommands: flag parsing helpers, output files, rendering.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "probes/probe.hpp"
#include "report/report.hpp"
#include "util/parse.hpp"

namespace CLI {
class App;
}

namespace ld::cli {

// Exit codes of the contract.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitRuntime = 2;
inline constexpr int kExitAuditFinding = 3;

using util::parse_duration_ms;
using util::parse_size;
using util::parse_token_source;
using util::split_list;

// An output destination opened up front (so a bad -o fails before a 30 s recording):
// "" or "-" is stdout; files are created 0600.
class Output {
 public:
  static std::unique_ptr<Output> open(const std::string& path);  // throws runtime_error
  void write(const std::string& text);                           // throws runtime_error
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

 private:
  Output(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// A report format: --format NAME.
struct ReportFormat {
  const char* name;
  std::string (*render)(const model::Report& report);
  // What --format's help says of it after the list, in parentheses; "" when the name says enough.
  const char* help;
  // The analysis must keep the per-thread states (costs memory): the Perfetto export draws them.
  bool thread_tracks = false;
};
// Every format this build supports, in the order the help and the errors list them.
const std::vector<ReportFormat>& report_formats();
// The format of that name; throws invalid_argument ("--format X: expected ...") for another.
const ReportFormat& report_format(const std::string& name);
// Renders in that format; throws invalid_argument for a name that is none.
std::string render(const model::Report& report, const std::string& format);
// "text, json, markdown, html or perfetto", for --format help and errors.
std::string report_formats_text();
// --format's help: "Report format: " and the list, with the formats' notes.
std::string report_format_help();
// False for a name that is no format.
bool format_needs_thread_tracks(const std::string& format);

// --client jsonl:FILE (or just FILE): a client's token log to join to the server's requests.
// Returns "jsonl:FILE", "" for an empty value; throws invalid_argument for "sse" or "jsonl:".
std::string parse_client_source(const std::string& text);
inline constexpr const char* kClientHelp =
    "A client's token log (jsonl:FILE or FILE, e.g. from `bench --tokens-out`) to show beside the "
    "server's times: per request client and server TTFT, the time before the server read the "
    "request and after it sent, token gaps and delivery lag (docs/definitions.md)";

// Prints "latency-doctor CMD: error: WHAT" on stderr.
void print_error(const std::string& command, const std::string& what);
void print_warnings(const std::vector<std::string>& warnings);

// Every subcommand's callback runs its body through this: what escapes it becomes the
// contract's one-line error and exit code, std::invalid_argument (a flag, a PID, a URL the user
// gave) kExitUsage, any other exception kExitRuntime. Nothing reaches CLI11 or std::terminate.
template <class Body>
int run_command(const char* command, Body&& body) {
  try {
    return body();
  } catch (const std::invalid_argument& e) {
    print_error(command, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    print_error(command, e.what());
    return kExitRuntime;
  }
}

// Subcommand registration: one file each. exit_code receives the command's result.
void register_attach(CLI::App& app, int& exit_code);
void register_record(CLI::App& app, int& exit_code);
void register_report(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);
void register_version(CLI::App& app, int& exit_code);
void register_audit(CLI::App& app, int& exit_code);
void register_rules(CLI::App& app, int& exit_code);
void register_serve(CLI::App& app, int& exit_code);
void register_dump(CLI::App& app, int& exit_code);
void register_diff(CLI::App& app, int& exit_code);
void register_top(CLI::App& app, int& exit_code);

// --rules DIR|FILE (repeatable): rules added to the shipped ones, same ids replacing them.
void add_rules_option(CLI::App* sub, std::vector<std::string>& paths);

}  // namespace ld::cli

namespace ld::probes {
struct RecordOptions;
}

namespace ld::cli {

// Flags shared by attach and record.
struct RecordFlags {
  std::vector<int> pids;
  bool children = false;
  bool no_follow = false;  // --no-follow: only the given pids (and --children's forks)
  std::string duration;
  std::string probes = "all";
  std::string ringbuf = "16M";
  uint32_t sample_hz = probes::kDefaultSampleHz;
  std::string read_interval;           // "": to_record_options' default
  std::string sock_hook = "auto";      // --sock-hook: probes::SockHook
  std::string sample_source = "auto";  // --sample-source: probes::PerfSource
  std::string user_stacks = "on";      // --user-stacks on|off: ProbeOptions::hooks.user_stacks
  std::string cuda_launches = "on";    // --cuda-launches on|off: ProbeOptions::hooks.cuda_launches
  bool quiet = false;
  bool verbose = false;
};
void add_record_flags(CLI::App* sub, RecordFlags& flags, const std::string& default_duration);
// --probes: "all", names, "-name" to leave one out of the rest (of the default set when no name is
// given). Throws std::invalid_argument on an unknown name or an empty result.
std::vector<std::string> parse_probe_list(const std::string& text);
// Throws std::invalid_argument with a message naming the flag. `read_interval_ms`: the
// interval when --read-interval is not given (attach --live: 1 s), else RecordOptions'.
probes::RecordOptions to_record_options(const RecordFlags& flags);
probes::RecordOptions to_record_options(const RecordFlags& flags, uint64_t read_interval_ms);

}  // namespace ld::cli
