// latency-doctor serve: the node daemon. Probes stay attached (probes::record with
// keep_running), targets are discovered again at every read interval, rolling windows are
// analysed by the code `report` runs, metrics are served for Prometheus and pushed as OTLP, and
// the flight recorder keeps the last minutes of trace for `dump` and automatic captures.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "events.h"
#include "host/discovery.hpp"
#include "host/host_facts.hpp"
#include "probes/probe_session.hpp"
#include "probes/recorder.hpp"
#include "serve/service.hpp"
#include "util/time.hpp"

namespace ld::cli {
namespace {

volatile sig_atomic_t g_reload = 0;
void on_hup(int) { g_reload = 1; }

struct ServeCmdOptions {
  std::vector<int> pids;
  std::string match_comm, match_exe, cgroup;
  int listen_port = 0;
  std::string metrics_addr = "127.0.0.1:9464";
  std::string otlp_endpoint;
  std::string flight_dir = "/var/lib/latency-doctor";
  std::string flight_keep = "15m";
  std::string flight_max = "256M";
  std::string flight_segment = "1m";
  std::string socket = "/run/latency-doctor/serve.sock";
  std::string window = "10s";
  std::string lookback = "60s";
  std::string window_memory = "64M";
  std::string capture_ttft_p99;
  bool no_capture_on_crit = false;
  std::string capture_before = "2m";
  std::string capture_after = "30s";
  std::string capture_cooldown = "10m";
  size_t captures_max = 10;
  std::vector<std::string> rules;
  RecordFlags record;
};

uint64_t duration_flag(const std::string& flag, const std::string& text) {
  auto ms = parse_duration_ms(text);
  if (!ms)
    throw std::invalid_argument(fmt::format("{} {}: expected a duration such as 500ms, 30s, 5m, 1h", flag, text));
  return *ms;
}

uint64_t size_flag(const std::string& flag, const std::string& text) {
  auto bytes = parse_size(text);
  if (!bytes || *bytes == 0)
    throw std::invalid_argument(fmt::format("{} {}: expected a size such as 64M, 1G", flag, text));
  return *bytes;
}

// "HOST:PORT" with HOST an address (IPv6 in brackets); "off" disables the endpoint.
std::string check_metrics_addr(const std::string& addr) {
  if (addr == "off" || addr == "none") return "";
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= addr.size())
    throw std::invalid_argument(
        fmt::format("--metrics-addr {}: expected HOST:PORT, e.g. 127.0.0.1:9464 (or off)", addr));
  char* end = nullptr;
  long port = std::strtol(addr.c_str() + colon + 1, &end, 10);
  if (*end || port <= 0 || port > 65535) throw std::invalid_argument(fmt::format("--metrics-addr {}: bad port", addr));
  return addr;
}

serve::ServeOptions to_serve_options(const ServeCmdOptions& o) {
  serve::ServeOptions s;
  s.pids = o.pids;
  for (int pid : o.pids)
    if (pid <= 0 || pid == getpid()) throw std::invalid_argument(fmt::format("--pid {}: not a process to trace", pid));
  if (!o.match_comm.empty()) s.discovery.comm = host::compile_match("--match-comm", o.match_comm);
  if (!o.match_exe.empty()) s.discovery.exe = host::compile_match("--match-exe", o.match_exe);
  if (o.listen_port < 0 || o.listen_port > 65535)
    throw std::invalid_argument(fmt::format("--listen-port {}: expected 1-65535", o.listen_port));
  s.discovery.listen_port = o.listen_port;
  s.discovery.cgroup = o.cgroup;
  if (s.pids.empty() && s.discovery.empty())
    throw std::invalid_argument(
        "what to trace: give --pid PID, or a rule to find servers by (--match-comm RE, --match-exe RE, "
        "--listen-port N, --cgroup PATH)");
  s.metrics_addr = check_metrics_addr(o.metrics_addr);
  s.otlp_endpoint = o.otlp_endpoint;
  if (!s.otlp_endpoint.empty()) exporter::OtlpClient::parse_url(s.otlp_endpoint);  // throws with the reason
  s.flight.dir = o.flight_dir;
  s.flight.keep_ms = duration_flag("--flight-keep", o.flight_keep);
  s.flight.max_bytes = size_flag("--flight-max", o.flight_max);
  s.flight.segment_ms = duration_flag("--flight-segment", o.flight_segment);
  s.socket_path = o.socket;
  s.window_ms = duration_flag("--window", o.window);
  s.lookback_ms = duration_flag("--lookback", o.lookback);
  s.window_memory = size_flag("--window-memory", o.window_memory);
  if (!o.capture_ttft_p99.empty())
    s.capture_ttft_p99_s = util::ms_to_s(duration_flag("--capture-ttft-p99", o.capture_ttft_p99));
  s.capture_on_crit = !o.no_capture_on_crit;
  s.capture_before_ms = duration_flag("--capture-before", o.capture_before);
  s.capture_after_ms = duration_flag("--capture-after", o.capture_after);
  s.capture_cooldown_ms = duration_flag("--capture-cooldown", o.capture_cooldown);
  s.captures_max = std::max<size_t>(o.captures_max, 1);
  s.rules_paths = o.rules;
  s.quiet = o.record.quiet;
  return s;
}

// Signals go to the main thread only: the threads made while they are blocked (the metrics
// server's, the dump socket's, the analysis') inherit the mask, so SIGTERM ends the recording
// loop's wait at once instead of landing on a thread that ignores it.
class BlockSignals {
 public:
  BlockSignals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

int run_serve(const ServeCmdOptions& o) {
  probes::RecordOptions record;
  serve::ServeOptions options;
  RecordFlags flags = o.record;
  flags.duration = "1s";  // unused: serve runs until SIGTERM
  record = to_record_options(flags);
  record.duration_ms = 0;
  options = to_serve_options(o);
  options.flush_ms = record.read_interval_ms;
  std::unique_ptr<serve::Service> service;
  {
    BlockSignals blocked;
    service = std::make_unique<serve::Service>(options);
  }
  probes::install_stop_signals();
  struct sigaction sa {};
  sa.sa_handler = on_hup;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, nullptr);
  service->log(fmt::format("metrics on {}, flight recorder in {} (last {} / {}), dump socket {}{}",
                           options.metrics_addr.empty() ? "(off)" : "http://" + options.metrics_addr + "/metrics",
                           options.flight.dir, o.flight_keep, o.flight_max, options.socket_path,
                           options.otlp_endpoint.empty() ? "" : ", OTLP to " + options.otlp_endpoint));
  if (options.metrics_addr.rfind("0.0.0.0:", 0) == 0 || options.metrics_addr.rfind("[::]:", 0) == 0)
    service->log("warning: metrics are served on every interface, as asked (--metrics-addr)");

  // Only fixed pids and none alive: nothing will ever be traced (exit 2, as attach does).
  if (options.discovery.empty() && service->refresh_targets(nullptr).empty()) {
    print_error("serve", fmt::format("no process with pid {} (give a live --pid, or a rule such as --match-comm "
                                     "to wait for servers)",
                                     fmt::join(options.pids, ", ")));
    return kExitRuntime;
  }
  while (!probes::stop_requested()) {
    // No target yet: look again every second (cheap: comm first) until one shows up.
    std::vector<int> targets = service->refresh_targets(nullptr);
    if (targets.empty()) {
      static bool said = false;
      if (!said) service->log("no target yet; looking every second");
      said = true;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    record.pids = targets;
    record.keep_running = true;
    record.quiet = true;
    record.on_start = [&](const trace::TraceHeader& header) { service->on_start(header); };
    serve::SessionHooks hooks;
    probes::ProbeSession* session_ptr = nullptr;
    hooks.add_target = [&](int pid) {
      if (session_ptr) session_ptr->add_target(static_cast<uint32_t>(pid));
    };
    hooks.status = [&] { return session_ptr ? session_ptr->status() : std::vector<model::ProbeStatus>{}; };
    bool announced = false;
    record.on_wake = [&](probes::ProbeSession& session, uint64_t now) {
      session_ptr = &session;
      if (!announced) {
        announced = true;
        // bench/lib.sh and the tests wait for this line.
        service->log(fmt::format("attached to pid {} ({} target(s): {})", targets.front(), service->target_count(),
                                 service->describe_targets()));
      }
      if (g_reload) {
        g_reload = 0;
        service->log(service->reload_rules());
      }
      service->on_wake(now, hooks);
    };
    probes::RecordResult result;
    try {
      result = probes::record(record, [&](const ld_hdr& rec, size_t size) { service->on_record(rec, size); });
    } catch (const std::runtime_error& e) {
      // The target went between finding it and attaching: look again.
      if (std::string(e.what()).rfind("no process with pid", 0) == 0) continue;
      throw;
    }
    print_warnings(result.warnings);
    // The last window: what happened since the previous cut is counted and pushed (OTLP)
    // before the stop, with the probes' final counters.
    serve::SessionHooks last;
    last.status = [&] { return result.trailer.probes; };
    service->cut_window(host::monotonic_now_ns(), last);
    service->finish(result.trailer);
    service->log(fmt::format("stopping ({}); detaching the probes", trace::stop_reason_name(result.stop_reason)));
    result.session.reset();  // detach before the exit code: nothing stays attached
    break;
  }
  service.reset();
  return kExitOk;
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ServeCmdOptions>();
  auto* sub = app.add_subcommand("serve", "Run as a node daemon: metrics, OTLP, a flight recorder");
  sub->footer(
      "Runs until SIGTERM with the probes attached. Targets are given (--pid) or found, and found\n"
      "again when they restart (--match-comm/--match-exe/--listen-port/--cgroup, all given must\n"
      "match). Every --window the last minute of events is analysed as `report` does; TTFT and\n"
      "token-gap histograms, outlier time by cause and the active findings are served for\n"
      "Prometheus on --metrics-addr (loopback unless asked) and pushed to --otlp-endpoint.\n"
      "The flight recorder keeps the last --flight-keep of trace in --flight-dir: `latency-doctor\n"
      "dump --since 10m -o incident.ldtrace` cuts it; a crit finding (or --capture-ttft-p99)\n"
      "saves a capture in FLIGHT-DIR/captures. SIGHUP reloads the rules. docs/deploy.md.\n\n"
      "Examples:\n"
      "  latency-doctor serve --match-comm '^(vllm|python3)' --listen-port 8000\n"
      "  latency-doctor serve --pid 4242 --otlp-endpoint http://127.0.0.1:4318\n"
      "  latency-doctor serve --cgroup /system.slice/llm.service --metrics-addr 0.0.0.0:9464");
  sub->add_option("-p,--pid", opts->pids, "A process to trace (repeat for several)");
  sub->add_option("--match-comm", opts->match_comm, "Trace processes whose name (/proc/PID/comm) matches this regex");
  sub->add_option("--match-exe", opts->match_exe, "Trace processes whose executable path matches this regex");
  sub->add_option("--listen-port", opts->listen_port, "Trace processes listening on this TCP port");
  sub->add_option("--cgroup", opts->cgroup, "Trace processes in this cgroup or below (/system.slice/x.service)");
  sub->add_option("--metrics-addr", opts->metrics_addr,
                  "Where to serve /metrics for Prometheus: HOST:PORT (loopback by default; 0.0.0.0:9464 only "
                  "when asked), or off")
      ->capture_default_str();
  sub->add_option("--otlp-endpoint", opts->otlp_endpoint,
                  "Push metrics and outlier spans as OTLP/HTTP JSON to this collector, e.g. http://127.0.0.1:4318");
  sub->add_option("--flight-dir", opts->flight_dir, "Where the flight recorder keeps its trace segments (0700)")
      ->capture_default_str();
  sub->add_option("--flight-keep", opts->flight_keep, "How much trace time the flight recorder keeps")
      ->capture_default_str();
  sub->add_option("--flight-max", opts->flight_max, "The flight recorder's disk cap")->capture_default_str();
  sub->add_option("--flight-segment", opts->flight_segment, "A new segment file this often")->capture_default_str();
  sub->add_option("--socket", opts->socket, "The local socket `dump` talks to (0600)")->capture_default_str();
  sub->add_option("--window", opts->window,
                  "How often the analysis runs (each run counts what happened since the last)")
      ->capture_default_str();
  sub->add_option("--lookback", opts->lookback,
                  "How far back each analysis reads: streams longer than this lose their later token gaps")
      ->capture_default_str();
  sub->add_option("--window-memory", opts->window_memory, "Memory cap of the look-back's events")
      ->capture_default_str();
  sub->add_option("--capture-ttft-p99", opts->capture_ttft_p99,
                  "Save a capture when a window's TTFT p99 exceeds this (e.g. 2s; default off)");
  sub->add_flag("--no-capture-on-crit", opts->no_capture_on_crit, "No capture when a crit finding appears");
  sub->add_option("--capture-before", opts->capture_before, "A capture's trace before the trigger")
      ->capture_default_str();
  sub->add_option("--capture-after", opts->capture_after, "A capture's trace after the trigger")->capture_default_str();
  sub->add_option("--capture-cooldown", opts->capture_cooldown, "No new capture this soon after one")
      ->capture_default_str();
  sub->add_option("--captures-max", opts->captures_max, "Captures kept (the oldest go)")->capture_default_str();
  add_rules_option(sub, opts->rules);
  std::string probe_help = "Probes to attach: all, or a comma list (see attach --help)";
  sub->add_option("--probes", opts->record.probes, probe_help)->capture_default_str();
  sub->add_option("--ringbuf-size", opts->record.ringbuf, "Kernel ring buffer size (power of two)")
      ->capture_default_str();
  sub->add_option("--read-interval", opts->record.read_interval,
                  "How often the agent wakes to read events, look for targets and flush the flight recorder "
                  "(default 4s; see attach --help)");
  sub->add_option("--sock-hook", opts->record.sock_hook, "auto, socket-layer or syscall-exits (see attach --help)")
      ->capture_default_str();
  sub->add_flag("-q,--quiet", opts->record.quiet, "No log lines on stderr but errors");
  sub->add_flag("-v,--verbose", opts->record.verbose, "Show libbpf's log");
  sub->callback([opts, &exit_code] { exit_code = run_command("serve", [&] { return run_serve(*opts); }); });
}

}  // namespace ld::cli
