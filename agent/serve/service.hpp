// serve: the node daemon's work beside the probes (which agent/cli/serve.cpp runs through
// probes::record): target discovery, the flight recorder and its dump socket, rolling
// analysis windows on a thread of their own, metrics for Prometheus and OTLP, and automatic
// captures. Everything here runs without BPF, so the unit tests drive it with records.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "export/metrics.hpp"
#include "export/otlp.hpp"
#include "host/discovery.hpp"
#include "model/report.hpp"
#include "rules/rule.hpp"
#include "serve/dump_socket.hpp"
#include "serve/flight_recorder.hpp"
#include "serve/window.hpp"
#include "trace/trace_header.hpp"

struct ld_hdr;

namespace ld::serve {

struct ServeOptions {
  std::vector<int> pids;                        // fixed targets (--pid)
  host::DiscoveryRules discovery;               // --match-comm, --match-exe, --listen-port, --cgroup
  std::string metrics_addr = "127.0.0.1:9464";  // "" = no scrape endpoint
  std::string otlp_endpoint;                    // "" = no OTLP
  FlightOptions flight;
  std::string socket_path = "/run/latency-doctor/serve.sock";
  uint64_t window_ms = 10'000;
  uint64_t lookback_ms = 60'000;
  uint64_t settle_ms = 1'000;  // tokens this recent wait for the next window
  size_t window_memory = 64u << 20;
  uint64_t flush_ms = 4'000;             // the flight recorder's flush (the read interval)
  std::vector<std::string> rules_paths;  // --rules
  // Automatic captures: a window's TTFT p99 above this (0 = off), or a crit finding.
  double capture_ttft_p99_s = 0;
  bool capture_on_crit = true;
  uint64_t capture_before_ms = 120'000;
  uint64_t capture_after_ms = 30'000;
  uint64_t capture_cooldown_ms = 600'000;
  size_t captures_max = 10;
  bool quiet = false;
};

// What the daemon needs of the probe session (probes::ProbeSession), as functions.
struct SessionHooks {
  std::function<void(int pid)> add_target;
  std::function<std::vector<model::ProbeStatus>()> status;
};

class Service {
 public:
  // Opens the flight directory, the dump socket and the metrics endpoint, loads the rules and
  // starts the analysis thread. Throws std::invalid_argument (usage) or std::runtime_error.
  explicit Service(ServeOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Looks for targets now (the --pid ones alive, and the discovered ones); a new one is added
  // to the session through `hooks` (when given) and counted. Returns the targets now.
  std::vector<int> refresh_targets(const SessionHooks* hooks);
  size_t target_count() const { return targets_.size(); }
  std::string describe_targets() const;

  // probes::RecordOptions::on_start, the live sink and on_wake.
  void on_start(const trace::TraceHeader& header);
  void on_record(const ld_hdr& rec, size_t size);
  void on_wake(uint64_t now_ns, const SessionHooks& hooks);
  // Cuts a window now whatever the schedule (tests, and the last one at stop).
  void cut_window(uint64_t now_ns, const SessionHooks& hooks);
  // Waits until the analysis thread has nothing left to do.
  void drain();

  // SIGHUP: the rule files read again; on an error the rules in force stay. Returns a line to log.
  std::string reload_rules();
  // The recording ended: the flight recorder's last segment gets the trailer.
  void finish(const trace::TraceTrailer& trailer);

  exporter::ServeMetrics& metrics() { return metrics_; }
  FlightRecorder& flight() { return *flight_; }
  std::string captures_dir() const;
  // The dump handler (also what the socket runs): the last since_ms of the flight recorder
  // into an unlinked temporary file.
  DumpAnswer dump(uint64_t since_ms);

  void log(const std::string& line) const;

 private:
  struct Job {
    enum Kind { kWindow, kCapture } kind = kWindow;
    WindowInput window;
    std::string capture_reason;
    uint64_t capture_from_ns = 0;
    uint64_t capture_to_ns = 0;
  };
  void worker();
  void run_window(const WindowInput& input);
  void run_capture(const Job& job);
  void export_otlp(const WindowResult& result, const std::vector<exporter::Span>& finding_spans);
  void update_agent_metrics();

  ServeOptions options_;
  exporter::ServeMetrics metrics_;
  std::unique_ptr<FlightRecorder> flight_;
  std::unique_ptr<DumpServer> dump_server_;
  std::unique_ptr<exporter::OtlpClient> otlp_;
  exporter::Attributes resource_;
  std::optional<host::Discovery> discovery_;
  std::map<int, host::DiscoveredProcess> targets_;
  uint64_t start_unix_ns_ = 0;

  // Recording thread only.
  RecordBuffer buffer_;
  trace::TraceHeader header_;
  bool started_ = false;
  uint64_t count_from_ns_ = 0;
  uint64_t next_cut_ns_ = 0;
  uint64_t last_flush_ns_ = 0;
  uint64_t last_discovery_ns_ = 0;
  std::vector<model::ProbeStatus> last_probes_;
  // The stream's clock: the newest wake-up or record time seen. A live session's is the host's
  // monotonic clock; a replayed trace's is the recording host's, which may run ahead of or behind
  // this one. The dump socket's thread reads it.
  std::atomic<uint64_t> stream_now_ns_{0};
  void advance_clock(uint64_t ns) {
    if (ns > stream_now_ns_.load(std::memory_order_relaxed)) stream_now_ns_.store(ns, std::memory_order_relaxed);
  }

  // Shared with the analysis thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::shared_ptr<const rules::RuleSet> rules_;
  std::optional<Job> pending_capture_;  // waiting for its after-trigger time
  uint64_t capture_due_ns_ = 0;
  uint64_t last_capture_ns_ = 0;
  bool captured_once_ = false;
  std::map<std::string, std::string> active_findings_;  // rule -> severity (analysis thread)
  std::vector<exporter::Span> pending_spans_;           // not yet accepted by the collector
  uint64_t otlp_failures_ = 0;
  std::thread thread_;
};

}  // namespace ld::serve
