// record = attach the probes to the target, stream events to the sinks (trace file, live
// analysis) until the duration elapses, a signal arrives, or the targets exit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/probe.hpp"
#include "trace/trace_header.hpp"

struct ld_hdr;

namespace ld::probes {

class ProbeSession;

struct RecordOptions {
  std::vector<int> pids;
  bool children = false;  // follow forks while tracing (and take in the descendants at start)
  // Take in the processes that serve with the targets, found at start (host/peers.hpp): their
  // descendants, and those they talk to over unix sockets, pipes or shared memory.
  bool follow = false;
  uint64_t duration_ms = 0;  // 0 = until a signal or the targets exit
  std::string trace_path;    // "" = do not write a trace
  uint32_t ringbuf_bytes = 16u << 20;
  uint32_t sample_hz = kDefaultSampleHz;  // the perf probe's cpu-clock rate per CPU
  // How often the agent wakes in a steady state to read the ring buffer, sample /proc and
  // cgroup counters, flush the trace and show progress (sooner when the ring fills past a
  // wake-up mark, a probe has a deadline, or a signal comes). Each wake-up takes a CPU from a
  // server thread for a stretch and so lengthens about one token gap: fewer of them move the
  // TPOT p99 less (docs/performance.md, "Fewer wake-ups").
  uint64_t read_interval_ms = 4000;
  std::vector<std::string> probes;  // empty = defaults
  std::string token_source = "sse";
  bool quiet = false;
  bool verbose = false;
  std::vector<ProbeInfo> extra_probes;  // see ProbeOptions::extra_probes (benchmarks only)
  HookChoices hooks;                    // see ProbeOptions::hooks (--sock-hook, --sample-source)
  // The host's facts (sysctls, governor, the target's cgroup limits: audit/host_audit.hpp) for
  // the trace header, read for the first pid once it is validated; none when empty.
  std::function<nlohmann::json(int pid)> host_facts;

  // A recording that outlives its targets (serve): it runs until SIGINT/SIGTERM (or
  // duration_ms when set) whatever the targets do, since new ones come through `on_wake`,
  // and the capabilities to attach are kept for them (the GIL's uprobe on a new Python).
  bool keep_running = false;
  // Called once, before the first probe attaches, with the header the trace would get: a
  // caller that writes its own files (serve's flight recorder) opens them here, so that they
  // hold every record the sink sees, as the trace of `record` does.
  std::function<void(const trace::TraceHeader& header)> on_start;
  // Called on the recording thread at each wake-up, after the ring is drained (every read
  // interval, sooner when events pile up or a signal comes): the caller adds targets, cuts
  // analysis windows, rotates its files. `now` is CLOCK_MONOTONIC ns. Keep it short: the ring
  // is not read meanwhile.
  std::function<void(ProbeSession& session, uint64_t now)> on_wake;
};

struct RecordResult {
  // Still attached but drained and counted. Detaching tracepoints waits for RCU grace periods
  // (~1 s for the sock probe), so the caller writes its report first and then lets this go.
  std::shared_ptr<ProbeSession> session;
  trace::TraceHeader header;
  trace::TraceTrailer trailer;
  trace::StopReason stop_reason = trace::StopReason::kNone;  // duration, signal or target exit
  std::vector<std::string> warnings;
};

using LiveSink = std::function<void(const ld_hdr& record, size_t size)>;
// Called every read interval with a one-line status for the progress display.
using StatusLine = std::function<std::string()>;

// Validates the targets, then records. Throws std::invalid_argument for bad targets (usage,
// exit 1), ProbeError / TraceError / std::runtime_error for runtime failures (exit 2).
RecordResult record(const RecordOptions& options, const LiveSink& live, const StatusLine& status = {});

// SIGINT/SIGTERM stop a recording gracefully (the report is still produced).
void install_stop_signals();
bool stop_requested();
// Stops the recording as SIGINT would (a key in `top`).
void request_stop();

// The agent's own CPU (user + system, all its threads, in ms) and peak RSS (MiB) so far.
struct OwnUsage {
  double cpu_ms = 0;
  uint64_t voluntary_switches = 0;  // blocking waits that ended: wake-ups
  double max_rss_mib = 0;
};
OwnUsage own_usage();

}  // namespace ld::probes
