#include "cli/common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ld::cli {

std::unique_ptr<Output> Output::open(const std::string& path) {
  if (path.empty() || path == "-") return std::unique_ptr<Output>(new Output(STDOUT_FILENO, "stdout"));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  fchmod(fd, 0600);  // reports name the target's threads and files: keep them private
  return std::unique_ptr<Output>(new Output(fd, path));
}

void Output::write(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
}

Output::~Output() {
  if (fd_ != STDOUT_FILENO && fd_ >= 0) ::close(fd_);
}

const std::vector<ReportFormat>& report_formats() {
  static const std::vector<ReportFormat> formats{
      {"text", report::render_text, ""},
      {"json", report::render_json, ""},
      {"markdown", report::render_markdown, ""},
      {"html", report::render_html, ""},
      {"perfetto", report::render_perfetto, "Chrome trace-event JSON for ui.perfetto.dev", true},
  };
  return formats;
}

namespace {

const ReportFormat* find_format(const std::string& name) {
  const auto& formats = report_formats();
  auto it = std::find_if(formats.begin(), formats.end(), [&](const ReportFormat& f) { return name == f.name; });
  return it == formats.end() ? nullptr : &*it;
}

}  // namespace

const ReportFormat& report_format(const std::string& name) {
  if (const ReportFormat* format = find_format(name)) return *format;
  throw std::invalid_argument(fmt::format("--format {}: expected {}", name, report_formats_text()));
}

std::string render(const model::Report& report, const std::string& format) {
  return report_format(format).render(report);
}

std::string report_formats_text() {
  const auto& formats = report_formats();
  std::string text;
  for (size_t i = 0; i < formats.size(); ++i)
    text += std::string(i == 0 ? "" : i + 1 == formats.size() ? " or " : ", ") + formats[i].name;
  return text;
}

std::string report_format_help() {
  std::string help = "Report format: " + report_formats_text();
  for (const ReportFormat& format : report_formats())
    if (*format.help) help += fmt::format(" ({})", format.help);
  return help;
}

bool format_needs_thread_tracks(const std::string& format) {
  const ReportFormat* found = find_format(format);
  return found && found->thread_tracks;
}

std::string parse_client_source(const std::string& text) {
  if (text.empty()) return "";
  if (text == "sse" || text == "jsonl:")
    throw std::invalid_argument(fmt::format("--client {}: expected jsonl:FILE (a client's token log)", text));
  return text.rfind("jsonl:", 0) == 0 ? text : "jsonl:" + text;
}

void print_error(const std::string& command, const std::string& what) {
  fmt::print(stderr, "latency-doctor {}: error: {}\n", command, what);
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
}

}  // namespace ld::cli

#include <CLI/CLI.hpp>

#include "audit/host_audit.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"
#include "probes/recorder.hpp"

namespace ld::cli {

void add_rules_option(CLI::App* sub, std::vector<std::string>& paths) {
  sub->add_option("--rules", paths,
                  "Also load the rules in DIR (or one FILE.toml); repeat for several. A rule with the id "
                  "of a shipped rule replaces it (docs/rules.md)");
}

void add_record_flags(CLI::App* sub, RecordFlags& flags, const std::string& default_duration) {
  flags.duration = default_duration;
  sub->add_option("-p,--pid", flags.pids, "Process to trace (repeat for several)")->required();
  sub->add_flag("--children", flags.children,
                "Also trace the processes the target forks while tracing (its existing children are "
                "taken in anyway, unless --no-follow)");
  sub->add_flag("--no-follow", flags.no_follow,
                "Trace only the given pids: do not take in their children nor the processes they talk to "
                "over unix sockets, pipes or shared memory (an engine core behind an API server)");
  sub->add_option("-d,--duration", flags.duration,
                  "How long to trace: 500ms, 30s, 5m (Ctrl-C or the target's exit stops earlier)")
      ->capture_default_str();
  std::string probe_help =
      "Probes to attach: all, a comma list of the names below, -NAME to leave one out (all,-tls: "
      "no uprobes in OpenSSL):";
  for (const auto& info : probes::probe_registry())
    probe_help += fmt::format("\n  {:<8} {}{}", info.name, info.summary, info.in_all ? "" : " (opt-in: not in all)");
  sub->add_option("--probes", flags.probes, probe_help)->capture_default_str();
  sub->add_option("--ringbuf-size", flags.ringbuf,
                  "Kernel ring buffer size (power of two: 4M, 16M, 64M); raise it when the "
                  "report shows lost events")
      ->capture_default_str();
  sub->add_option("--sample-hz", flags.sample_hz,
                  "On-CPU samples per second per busy CPU (perf probe). Up to the kernel's HZ "
                  "(100-1000) they are taken at the scheduler tick, which costs only the probe; "
                  "above it, or where the tick cannot be used (the probes table says why), each "
                  "sample is a timer interrupt of its own (~13 us on a VM)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  sub->add_option("--sample-source", flags.sample_source,
                  "Where the perf probe takes its samples: auto (the scheduler tick where this "
                  "kernel allows it at the asked rate, else cpu-clock perf events), tick (only "
                  "the tick: the probe is unavailable where it cannot be used), or perf-event "
                  "(a cpu-clock timer interrupt per sample, the usual way)")
      ->capture_default_str();
  sub->add_option("--user-stacks", flags.user_stacks,
                  "The perf probe's user-space stacks: on (each sample also says which native "
                  "functions and, in CPython 3.10-3.13, which Python functions it ran, so the "
                  "report names what slow tokens computed) or off (kernel stacks only)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--cuda-launches", flags.cuda_launches,
                  "The cuda probe's launch hooks: on (each kernel or graph launch is counted, "
                  "a few us each, so the report can tell a busy GPU from an idle one waiting "
                  "for the host) or off (for launch-heavy eager servers: only syncs, copies and "
                  "allocations are timed, and the GPU's idle time is not inferred)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--sock-hook", flags.sock_hook,
                  "How the sock probe sees sends and receives: auto (the socket layer's "
                  "tracepoints sock_send_length/sock_recv_length where the kernel has them, 6.3+, "
                  "else the syscall exits), socket-layer (only those), or syscall-exits (the "
                  "exits of read/write/readv/writev/sendto/recvfrom/sendmsg/recvmsg on any "
                  "kernel: a way back should the socket layer's tracepoints misbehave)")
      ->capture_default_str();
  sub->add_option("--read-interval", flags.read_interval,
                  "How often the agent wakes to read its events, sample /proc and cgroup "
                  "counters and flush --record/-o traces (100ms-10s; default 4s, 1s with "
                  "--live; sooner when events pile up, so nothing is lost). Each wake-up takes "
                  "a CPU from the server for a moment and lengthens about one token gap: a "
                  "longer interval disturbs the TPOT p99 less, a shorter one gives a livelier "
                  "progress line, finer counter samples and less lost to a kill -9");
  sub->add_flag("-q,--quiet", flags.quiet, "No progress line on stderr");
  sub->add_flag("-v,--verbose", flags.verbose, "Show libbpf's log (why a probe failed to load)");
}

// "all", names, and "-name" to leave one out of the rest ("all,-tls": the default set without the
// TLS uprobes). Empty: the default set.
std::vector<std::string> parse_probe_list(const std::string& text) {
  const auto known = probes::ProbeSession::known_probes();
  std::vector<std::string> chosen, left_out;
  for (const auto& item : split_list(text)) {
    const bool out = item.rfind('-', 0) == 0;
    const std::string name = out ? item.substr(1) : item;
    if (name != "all" && std::find(known.begin(), known.end(), name) == known.end())
      throw std::invalid_argument(fmt::format("--probes: unknown probe '{}' (known: all, {}; -NAME leaves one out)",
                                              name, fmt::join(known, ", ")));
    if (out) left_out.push_back(name);
    else if (name != "all") chosen.push_back(name);
  }
  if (left_out.empty()) return chosen;
  if (chosen.empty())
    for (const auto& info : probes::probe_registry())
      if (info.in_all) chosen.push_back(info.name);
  std::erase_if(chosen, [&](const std::string& n) { return std::ranges::find(left_out, n) != left_out.end(); });
  if (chosen.empty()) throw std::invalid_argument("--probes " + text + ": leaves no probe");
  return chosen;
}

probes::RecordOptions to_record_options(const RecordFlags& flags) {
  return to_record_options(flags, probes::RecordOptions{}.read_interval_ms);
}

probes::RecordOptions to_record_options(const RecordFlags& flags, uint64_t read_interval_ms) {
  probes::RecordOptions options;
  options.pids = flags.pids;
  options.children = flags.children;
  options.follow = !flags.no_follow;
  auto duration = parse_duration_ms(flags.duration);
  if (!duration)
    throw std::invalid_argument(
        fmt::format("--duration {}: expected a positive number with a unit, e.g. 500ms, 30s, 5m", flags.duration));
  options.duration_ms = *duration;
  auto ringbuf = parse_size(flags.ringbuf);
  if (!ringbuf || *ringbuf < 4096 || *ringbuf > (1ULL << 30) || (*ringbuf & (*ringbuf - 1)))
    throw std::invalid_argument(
        fmt::format("--ringbuf-size {}: expected a power of two between 4K and 1G, e.g. 16M", flags.ringbuf));
  options.ringbuf_bytes = static_cast<uint32_t>(*ringbuf);
  options.sample_hz = flags.sample_hz;
  auto sock_hook = probes::parse_sock_hook(flags.sock_hook);
  if (!sock_hook)
    throw std::invalid_argument(
        fmt::format("--sock-hook {}: expected auto, socket-layer or syscall-exits", flags.sock_hook));
  options.hooks.sock = *sock_hook;
  auto sample_source = probes::parse_perf_source(flags.sample_source);
  if (!sample_source)
    throw std::invalid_argument(
        fmt::format("--sample-source {}: expected auto, tick or perf-event", flags.sample_source));
  options.hooks.perf = *sample_source;
  options.hooks.user_stacks = flags.user_stacks != "off";
  options.hooks.cuda_launches = flags.cuda_launches != "off";
  options.read_interval_ms = read_interval_ms;
  if (!flags.read_interval.empty()) {
    auto interval = parse_duration_ms(flags.read_interval);
    if (!interval || *interval < 100 || *interval > 10'000)
      throw std::invalid_argument(
          fmt::format("--read-interval {}: expected a duration from 100ms to 10s, e.g. 1s", flags.read_interval));
    options.read_interval_ms = *interval;
  }
  options.probes = parse_probe_list(flags.probes);
  options.quiet = flags.quiet;
  options.verbose = flags.verbose;
  // Findings quote the host's values as they were when recorded: `report` on another machine
  // must not read its own.
  options.host_facts = [](int pid) {
    audit::AuditTarget target;
    target.pid = pid;
    return audit::host_facts_to_json(audit::read_host_facts("/", target));
  };
  return options;
}

}  // namespace ld::cli
