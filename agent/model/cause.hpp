// The cause vocabulary (the `cause` field of reports and rules): one enum and one table, used
// from the attribution to the renderers and the rule loader. Strings appear only at the edges:
// JSON and text out, TOML in (parse_cause).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ld::model {

// The enumerators' order is only internal (array indices, tie-breaks of equal times); the
// order users see is the table's (kCauses below).
enum class Cause : uint8_t {
  kCompute,
  kKvAlloc,
  kCpuFrequency,
  kGil,
  kDiskIo,
  kTimeWait,
  kCpuContention,
  kCgroupThrottle,
  kLockContention,
  kSwapReclaim,
  kNetwork,
  kAppWait,
  kColdStart,
  kBatchInterference,
  kGpuBusy,
  kUnknown,
  kCount
};
inline constexpr size_t kCauseCount = static_cast<size_t>(Cause::kCount);

struct CauseInfo {
  Cause cause;
  std::string_view id;           // the contract's id: "disk_io"
  std::string_view label;        // short human name for legends: "disk IO"
  std::string_view color;        // "#rrggbb" for every plot and legend
  std::string_view description;  // one line, as the contract's vocabulary table says it
};

// Every cause in the contract's order (compute and unknown last): legends, rule listings.
// Colours: Okabe-Ito and Paul Tol, distinguishable with the common colour-vision deficiencies;
// saturated for the causes a remedy can remove, greys for the normal cost of a token (compute)
// and for what no probe explains (unknown), so anomalies stand out. Every use also names the
// cause in text, so colour is never the only carrier.
inline constexpr std::array<CauseInfo, kCauseCount> kCauses{{
    {Cause::kKvAlloc, "kv_alloc", "memory allocation (KV cache)", "#E69F00",
     "memory allocation on the token path: mmap/brk/madvise, large malloc, page-fault and page-zeroing time"},
    {Cause::kCpuFrequency, "cpu_frequency", "CPU frequency", "#F0E442",
     "the CPU ran below its nominal frequency during the window"},
    {Cause::kGil, "gil", "GIL wait", "#CC79A7", "a Python thread waited for the GIL"},
    {Cause::kDiskIo, "disk_io", "disk IO", "#D55E00",
     "fsync/fdatasync/sync_file_range, blocking file IO, block-device waits"},
    {Cause::kTimeWait, "time_wait", "TCP connection churn", "#56B4E9",
     "TCP connection churn: TIME_WAIT pile-up, listen-queue overflow, connection set-up"},
    {Cause::kCpuContention, "cpu_contention", "CPU contention", "#0072B2",
     "runnable but not running: run-queue wait, preemption by other tasks"},
    {Cause::kCgroupThrottle, "cgroup_throttle", "cgroup throttling", "#332288",
     "CFS quota throttling of the target's cgroup"},
    {Cause::kLockContention, "lock_contention", "lock contention", "#882255",
     "waits on a lock (futex/mutex, not the GIL) held by another thread doing other work"},
    {Cause::kSwapReclaim, "swap_reclaim", "reclaim / swap", "#999933", "direct reclaim, swap-in, compaction"},
    {Cause::kNetwork, "network", "network", "#009E73", "blocking socket sends, Nagle/delayed-ACK, retransmits"},
    {Cause::kAppWait, "app_wait", "idle by choice (sleep, batch wait)", "#88CCEE",
     "the token path was idle by the program's own choice (sleep, batch wait, timer)"},
    {Cause::kColdStart, "cold_start", "cold start", "#44AA99",
     "the first request(s) after start paid one-off initialisation"},
    {Cause::kBatchInterference, "batch_interference", "batch interference (others' prefill)", "#AA4499",
     "the engine computed other requests' prefill (or other batch work) in the window: continuous batching stalled "
     "this stream"},
    {Cause::kGpuBusy, "gpu_busy", "GPU busy (CUDA sync)", "#117733",
     "the token path waited in CUDA synchronisation while the GPU ran its work"},
    {Cause::kCompute, "compute", "compute (normal work)", "#8C8C8C",
     "the program was running its own code: the normal cost of a token"},
    {Cause::kUnknown, "unknown", "unexplained", "#D9D9D9", "time no probe explains"},
}};

// The cause's row of kCauses.
const CauseInfo& cause_info(Cause cause);
// "disk_io"; "unknown" for kCount.
std::string_view cause_id(Cause cause);
// The contract's order: kCauses' index (a stable legend order).
size_t cause_rank(Cause cause);
// The cause with this id, nullopt for an id outside the vocabulary.
std::optional<Cause> parse_cause(std::string_view id);
// True when dark text reads better than white on the cause's colour.
bool cause_color_is_light(Cause cause);

}  // namespace ld::model
