// The report as data (schema latency-doctor/report/v1): what analysis fills, the rules read
// and extend with findings, and the renderers (report/) print. No behaviour beyond accessors.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cause.hpp"
#include "model/client_join.hpp"
#include "model/definitions.hpp"
#include "model/histogram.hpp"
#include "model/stats.hpp"
#include "model/thread_tracks.hpp"
#include "util/enum_names.hpp"

namespace ld::model {

inline constexpr const char* kReportSchema = "latency-doctor/report/v1";

// A probe's state in the probes table.
enum class ProbeState : uint8_t {
  kAttached,
  kUnavailable,  // this kernel or host cannot run it: the reason says why
  kDisabled,     // not selected by --probes
  kOther,        // a name this version does not know (a trace of another one): ProbeStatus::other_status
};
// The names of the trace files, the JSON and the text; kOther has none of its own.
inline constexpr util::EnumNames<ProbeState, 3> kProbeStateNames{{{ProbeState::kAttached, "attached"},
                                                                  {ProbeState::kUnavailable, "unavailable"},
                                                                  {ProbeState::kDisabled, "disabled"}}};
static_assert(util::names_every_value_in_order(kProbeStateNames));
inline std::string_view probe_state_name(ProbeState state) { return util::name_of(kProbeStateNames, state); }
inline std::optional<ProbeState> parse_probe_state(std::string_view name) {
  return util::value_of(kProbeStateNames, name);
}

struct ProbeStatus {
  std::string name;
  ProbeState status = ProbeState::kOther;
  std::string reason;
  uint64_t events = 0;
  uint64_t lost = 0;
  std::string other_status{};  // kOther: the name as read, written back as it was

  // The name the trace and the reports write.
  std::string_view status_name() const {
    return status == ProbeState::kOther ? other_status : probe_state_name(status);
  }
};

// What the agent itself cost while it recorded: the trailer's "agent" object. Unknown (known =
// false) in traces of older versions and of a killed agent.
struct AgentCost {
  bool known = false;
  double attach_ms = 0;      // loading and attaching every probe, wall time
  double attach_cpu_ms = 0;  // the agent's CPU meanwhile (the verifier runs in its system time)
  double recording_ms = 0;   // wall time from attached to stopped
  double cpu_ms = 0;         // the agent's CPU in that time: user + system, all its threads
  uint64_t wakeups = 0;      // times it blocked and was woken (voluntary context switches)
  double stop_cpu_ms = 0;    // stopping: the last drain, kernel stacks symbolised, the trailer
  double peak_rss_mib = 0;   // largest resident set of the run, attaching included

  double cpu_percent_of_one_cpu() const { return recording_ms > 0 ? 100 * cpu_ms / recording_ms : 0.0; }
};

// A process traced with the targets because it serves with them (host/peers.hpp).
struct FollowedProcess {
  int pid = 0;
  std::string comm;
  std::string why;  // "a child of 4242", "connected to 4242 over a unix socket (/tmp/x)"
};

struct Target {
  std::vector<int> pids;  // every process traced from the start: the asked-for and the followed
  std::string comm;
  std::string exe;
  std::vector<FollowedProcess> followed;  // of pids, those found from the asked-for ones, and why
};

struct RequestRow {
  std::string id;
  uint64_t start_unix_ns = 0;
  uint64_t input_bytes = 0;
  int64_t input_tokens = -1;
  double ttft_ms = 0;
  uint64_t tokens = 0;
  double tpot_median_ms = 0;  // NaN with < 2 tokens
  double tpot_stddev_ms = 0;  // NaN with < 2 tokens
  double tpot_max_ms = 0;     // NaN with < 2 tokens
  bool complete = false;      // the end of the response was seen
  // For plots and timelines (not in the JSON report): monotonic times of the request start
  // and of every token send, and the thread that sent each token (0 = unknown).
  uint64_t start_mono_ns = 0;
  std::vector<uint64_t> token_mono_ns;
  std::vector<uint32_t> token_tid;
};

// Perception thresholds of a practitioners' write-up on TTFT/TPOT tuning (a first token after 800 ms
// feels stuck; a gap over 150 ms reads as a broken sentence): defaults, configurable.
struct Thresholds {
  double ttft_stuck_ms = 800;  // a first token later than this "feels stuck"
  double gap_broken_ms = 150;  // a gap longer than this reads as a broken sentence
  double gap_spike_ms = 300;   // a gap longer than this is a spike users complain about
};

// How many requests/gaps exceed each threshold.
struct ThresholdCounts {
  uint64_t ttft_stuck = 0;
  uint64_t gaps_broken = 0;
  uint64_t gaps_spike = 0;
};

// ---- attribution: where the time of a slow token went

// Time of one window charged to one cause. Evidence keys are
// snake_case; numbers are ms for times, bytes for sizes, plain counts otherwise.
struct CauseTime {
  Cause cause = Cause::kUnknown;
  double ms = 0;
  double share = 0;  // ms / window duration
  nlohmann::json evidence = nlohmann::json::object();
};

// One step of what the token's thread did in a slow window, in order: "fsync /var/log/app.log",
// "getrandom" (a syscall its on-CPU samples were in), "running", "run queue".
struct ActivityStep {
  std::string what;
  double ms = 0;
  uint32_t times = 1;  // > 1: the total of that many separate steps of the same kind
};

// A function the samples of a window ran (inclusive: anywhere on the stack), with its share of
// the window's on-CPU samples and the typical token's share of the same function.
struct FrameShare {
  bool python = false;       // a Python frame (else native)
  std::string function;      // "render_usage_summary", "ld_wl::slow_detokenize"
  std::string where;         // Python: "server.py:27" (the line most samples were at); native: the file
  double share = 0;          // of the window's samples with frames
  double typical_share = 0;  // of the typical tokens' samples
  uint64_t samples = 0;
};

// Flame graph labels that name no function.
inline constexpr const char* kUnknownFrame = "[unknown]";      // a frame without a symbol
inline constexpr const char* kOtherStacks = "[other stacks]";  // the stacks past the cap, summed

// One distinct stack of the outliers' on-CPU samples (a folded stack), root first: a sample's
// Python frames where it has them, else its native ones. Labels as frame_label() writes them,
// with the frame's own line: "render_usage_summary (server.py:31)", "ld_wl::serve
// (ld-wl-frames_server)", "[unknown] (libc.so.6)" (a frame without a name is still a level).
struct FlameStack {
  std::vector<std::string> frames;
  bool python = false;  // Python frames (else native)
  uint64_t samples = 0;
};

// The outliers' samples as folded stacks: what the HTML report's flame graph draws.
struct FlameProfile {
  uint64_t samples = 0;  // every stack's samples together
  // Most samples first; at most analysis::FrameOptions::flame_stacks of them, then one
  // {kOtherStacks} with the rest's samples.
  std::vector<FlameStack> stacks;
  bool empty() const { return stacks.empty(); }
};

// Which wait of a stream an outlier window is: for its first token, or between two tokens.
enum class WindowKind : uint8_t { kTtft, kTpot };
// The names the JSON and text reports, the rules' facts and the metrics' labels use.
inline constexpr util::EnumNames<WindowKind, 2> kWindowKindNames{
    {{WindowKind::kTtft, "ttft"}, {WindowKind::kTpot, "tpot"}}};
static_assert(util::names_every_value_in_order(kWindowKindNames));
inline std::string_view window_kind_name(WindowKind kind) { return util::name_of(kWindowKindNames, kind); }
inline std::optional<WindowKind> parse_window_kind(std::string_view name) {
  return util::value_of(kWindowKindNames, name);
}
std::ostream& operator<<(std::ostream& out, WindowKind kind);  // its name, for test messages

struct Outlier {
  WindowKind kind = WindowKind::kTtft;
  std::string request;         // RequestRow::id
  uint64_t token_index = 0;    // index of the token that ended the window (0 = first token)
  uint64_t start_mono_ns = 0;  // window: request start (ttft) or previous token (tpot)
  uint64_t end_mono_ns = 0;    // the token's send
  uint64_t start_unix_ns = 0;
  double duration_ms = 0;
  double baseline_ms = 0;         // what this window was expected to take
  uint32_t tid = 0;               // thread that emitted the token (0 = unknown)
  std::vector<CauseTime> causes;  // by ms, descending; shares sum to <= 1, rest is "unknown"
  // Window facts beside the split: input_bytes, input_tokens, first_request (bool),
  // since_target_start_ms, cpu_khz_min, cpu_khz_max, time_wait, connects, throttled_ms, ...
  nlohmann::json facts = nlohmann::json::object();
  std::vector<ActivityStep> activity;  // the token thread's own steps, in order (merged, the longest kept)
  // What the thread ran in user space in the window, beyond what a typical token runs (most
  // excess share first; Python frames first in a Python process): analysis/frames.hpp.
  std::vector<FrameShare> frames;
  uint64_t frame_samples = 0;  // on-CPU samples of the window with user-space frames
};

// The same accounting summed over every non-outlier TPOT gap: what a typical token costs.
struct Profile {
  uint64_t windows = 0;
  double total_ms = 0;
  std::vector<CauseTime> causes;  // ms summed over the windows, share of total_ms
  // Of cpu_contention: the ms spent runnable behind the target's own threads, and how many of
  // its threads held the CPUs then (the server as its own neighbour).
  double own_contention_ms = 0;
  uint64_t own_busy_threads = 0;
  std::vector<FrameShare> frames;  // the hottest functions of the typical tokens' samples
  uint64_t frame_samples = 0;
  // GIL waits whose holder was an engine thread (one that calls CUDA), charged to what it did.
  double gil_engine_ms = 0;
};

// TTFT = a*sqrt(input) + b, least squares over the requests with a known input length.
struct TtftFit {
  bool valid = false;           // >= 3 requests with distinct input lengths
  std::string input = "bytes";  // "bytes" (socket) or "tokens" (token log)
  double a = 0, b = 0, r2 = 0;
  uint64_t n = 0;
};

// Outliers that recur at a fixed period (a scrape, a cron job).
struct Periodicity {
  bool found = false;
  double period_s = 0;
  uint64_t outliers = 0;  // outliers on the period's grid
  std::string coincides;  // what happened at those times, e.g. "pid 812 (prometheus) ran"
};

struct OutlierConfig {
  double tpot_mad_k = 5;       // a gap is an outlier above median + k*MAD ...
  double tpot_floor_ms = 150;  // ... and above this floor (a gap users read as a broken sentence)
  double ttft_margin = 1.5;    // a first token is a spike above margin * fitted baseline ...
  double ttft_floor_ms = 100;  // ... and at least this many ms above it
};

// ---- rules
struct SysctlRec {
  std::string key;
  std::string value;
  std::string current;  // the host's value now ("" = unknown)
  std::string caveat;
};

// One count of what a finding rests on (a rule's `support`, docs/rules.md): "slow_tokens" 2,
// of the 3 a finding above info needs.
struct EvidenceCount {
  std::string unit;  // slow_tokens | samples | requests | windows | events
  double count = 0;
  double minimum = 0;
};

struct Finding {
  std::string rule;
  Cause cause = Cause::kUnknown;
  std::string severity;  // info | warn | crit
  std::string title;
  std::string evidence;  // a sentence quoting the numbers
  std::string remedy;
  std::vector<SysctlRec> sysctl;
  std::string verify;                        // a shell command that confirms the diagnosis
  std::vector<EvidenceCount> evidence_size;  // empty: the rule states none (a host rule)
  std::string capped_from;  // "warn" or "crit": what the rule said, kept at info for too little evidence
};

// How the token sends left the server's TCP sockets (socket timelines): a send that returns with
// its bytes queued behind Nagle's algorithm reaches the client only at the peer's next ACK, up
// to 40 ms later with delayed ACKs, and its syscall's time is not its departure.
struct TcpSends {
  uint64_t token_sends = 0;     // token sends whose socket state was read (TCP)
  uint64_t nagle = 0;           // of them, on a socket with Nagle on (no TCP_NODELAY, no cork)
  uint64_t held = 0;            // of those, returned with bytes still queued: waiting on an ACK
                                // (a complete stream's last send not counted: it holds the end)
  uint64_t corked = 0;          // token sends on a corked socket
  uint64_t requests = 0;        // requests with a token send read
  uint64_t nagle_requests = 0;  // of them, with a token sent with Nagle on
};

struct Report {
  Target target;
  uint64_t start_unix_ns = 0;
  uint64_t duration_ms = 0;
  int64_t realtime_minus_monotonic_ns = 0;  // converts the model's *_mono_ns to unix time
  std::string token_source = "sse";         // "sse" or "jsonl:FILE"
  uint64_t requests = 0;
  uint64_t tokens = 0;
  uint64_t gaps = 0;  // TPOT gaps in tpot_ms (tokens - requests)
  Distribution ttft_ms;
  Distribution tpot_ms;  // over every gap of every request
  // The same values in log bins (model/histogram.hpp): the JSON's summary.histograms, for diff.
  LogHistogram ttft_hist;
  LogHistogram tpot_hist;
  uint64_t non_streaming_requests = 0;
  uint64_t partial_requests = 0;
  uint64_t in_flight_requests = 0;
  uint64_t connections = 0;
  uint64_t multi_event_sends = 0;
  TcpSends tcp_sends;
  std::map<std::string, uint64_t> send_syscalls;
  Thresholds thresholds;
  ThresholdCounts over_thresholds;
  std::vector<RequestRow> request_rows;
  std::vector<ProbeStatus> probes;
  AgentCost agent;
  // attribution
  bool attributed = false;  // false: no evidence probes in the trace, causes unknown
  OutlierConfig outlier_config;
  std::vector<Outlier> outliers;
  Profile typical;
  FlameProfile outlier_flame;  // every outlier window's samples with a user-space stack
  TtftFit ttft_fit;
  Periodicity periodicity;
  // Whole-window facts from the evidence (time_wait_max, listen_overflows, retransmits,
  // connects, cgroup_throttled_ms, cpu_khz_min, migrations_per_s, ...): analysis/facts.hpp.
  nlohmann::json window_facts = nlohmann::json::object();
  // The report's definitions side by side (TTFT, TPOT per token, ITL per chunk, mean TPOT per
  // request, ...) for the server's sends and for a client's token log (model/definitions.hpp).
  Definitions definitions;
  // A client's token log joined per request to the server's requests (model/client_join.hpp).
  ClientJoin client_join;
  std::vector<Finding> findings;                   // filled by the rules engine
  nlohmann::json host = nlohmann::json::object();  // environment: the trace header's host facts
  // Per-thread state tracks for the Perfetto export; null unless asked for.
  std::shared_ptr<const ThreadTracks> tracks;
  std::vector<std::string> warnings;  // also printed to stderr by the CLI
};

// A monotonic time as unix ns (0 when it would be negative).
uint64_t mono_to_unix_ns(uint64_t mono_ns, int64_t realtime_minus_monotonic_ns);

}  // namespace ld::model
