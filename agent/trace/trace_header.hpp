// The facts a trace carries beside its records, typed: the header (written first: clock, target,
// host, what was asked) and the trailer (written last: why it stopped, the probes' counters,
// what the agent cost). Written and read here only; trace_file.hpp stores them as JSON objects.
//
// Reading never fails: a trace from an older version, or a hand-edited or damaged one, may lack
// a field or hold it with another JSON type. An absent field keeps its default; a mistyped one
// too, and is named in `mistyped` so that the report can say which ones it ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/report.hpp"
#include "util/enum_names.hpp"

namespace ld::trace {

struct TraceHeader {
  std::string agent_version;  // the latency-doctor that recorded
  // LD_RECORD_LAYOUT_VERSION (bpf/events.h) of the records; 1 in traces older than the field.
  uint32_t record_layout_version = 1;
  uint64_t created_unix_ns = 0;
  int64_t realtime_minus_monotonic_ns = 0;  // converts the records' CLOCK_MONOTONIC stamps
  std::optional<uint64_t> start_mono_ns;    // the window's start; absent: the first record's
  model::Target target;                     // pids (the targets at start), comm and exe of the first
  uint64_t target_start_mono_ns = 0;        // when the first target started (cold start); 0 = unknown
  bool children = false;                    // --children: forks were followed
  // The host as recorded (host/host_facts.hpp: cpus, kernel, machine...; "facts": the audit's
  // host facts, docs/audit.md): findings quote these, never the machine `report` runs on.
  nlohmann::json host = nlohmann::json::object();
  std::string machine = "x86_64";             // host.machine: the syscall table of the records
  std::string token_source = "sse";           // "sse" or "jsonl:FILE", as asked when recording
  uint64_t duration_requested_ms = 0;         // 0 = until a signal or the targets' exit
  std::vector<std::string> probes_requested;  // as given to --probes ("default" when none)
  // The probes' table. Traces of early versions carried it here; later ones in the trailer.
  std::vector<model::ProbeStatus> probes;
};

// Why a recording ended: the trailer's "stop_reason".
enum class StopReason : uint8_t {
  kNone,        // none written: a trace without a trailer, or the agent has not stopped yet
  kDuration,    // --duration ran out
  kSignal,      // SIGINT or SIGTERM
  kTargetExit,  // every target exited
  kSegment,     // serve: a flight-recorder segment was closed
  kWindow,      // serve: the in-memory trace of one analysis window
  kDump,        // dump: the flight recorder's last minutes, saved
  kOther,       // a name this version does not know: TraceTrailer::other_stop_reason
};
inline constexpr util::EnumNames<StopReason, 7> kStopReasonNames{{{StopReason::kNone, ""},
                                                                  {StopReason::kDuration, "duration"},
                                                                  {StopReason::kSignal, "signal"},
                                                                  {StopReason::kTargetExit, "target-exit"},
                                                                  {StopReason::kSegment, "segment"},
                                                                  {StopReason::kWindow, "window"},
                                                                  {StopReason::kDump, "dump"}}};
static_assert(util::names_every_value_in_order(kStopReasonNames));
inline std::string_view stop_reason_name(StopReason reason) { return util::name_of(kStopReasonNames, reason); }
inline std::optional<StopReason> parse_stop_reason(std::string_view name) {
  return util::value_of(kStopReasonNames, name);
}

struct TraceTrailer {
  bool present = false;                 // false: the agent was killed before it wrote one
  std::optional<uint64_t> end_mono_ns;  // the window's end; absent: the last record's
  StopReason stop_reason = StopReason::kNone;
  std::string other_stop_reason{};  // kOther: the name as read, written back as it was
  double attach_ms = 0;
  std::vector<model::ProbeStatus> probes;  // counters at the end: events and losses per probe
  model::AgentCost agent;                  // unknown (known = false) when any part is missing

  // The name the trailer holds.
  std::string_view stop_reason_name() const {
    return stop_reason == StopReason::kOther ? other_stop_reason : trace::stop_reason_name(stop_reason);
  }
};

nlohmann::json to_json(const TraceHeader& header);
nlohmann::json to_json(const TraceTrailer& trailer);

struct TraceMeta {
  TraceHeader header;
  TraceTrailer trailer;
  std::vector<std::string> mistyped;  // "header clock.start_mono_ns", ... in reading order
  // One warning naming every mistyped field, or "" when none was.
  std::string mistyped_warning() const;
};

// The header and trailer objects of a trace (null for a trace without a trailer). Never throws.
TraceMeta read_meta(const nlohmann::json& header, const nlohmann::json& trailer);

}  // namespace ld::trace
