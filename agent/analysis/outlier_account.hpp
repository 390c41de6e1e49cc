// From a walked window to the report's outlier: its causes with their evidence, the token
// thread's steps, the cold-start split, the extra code it ran, the culprit it names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/evidence.hpp"
#include "analysis/handoff_model.hpp"
#include "analysis/window_account.hpp"
#include "model/report.hpp"

namespace ld::analysis {

// The causes of an account over a window of `window_ns`, largest first (dust dropped).
std::vector<model::CauseTime> causes_of(const WindowAccount& acc, uint64_t window_ns);
// The token thread's steps as a person reads them: neighbours of the same name merged, then the
// longest few kept in their order (a 300 ms fsync matters, a hundred 1 ms waits between tokens
// do not). A thread that did the same few things hundreds of times (GIL waits between
// bytecodes) is told as totals instead: "GIL wait 324 ms x3648, running 15 ms".
std::vector<model::ActivityStep> activity_of(const std::vector<WindowAccount::Step>& steps);
// One-off initialisation: the first request of a freshly started target took longer than its
// baseline and no later request was slow like it. The excess becomes `cold_start`; what it was
// made of stays in the evidence. since_start_ms < 0: unknown.
void apply_cold_start(model::Outlier& o, double since_start_ms);

// What ran on a CPU in [a, b] on `tids`, from their samples: the share in user code, and the
// hottest kernel functions (each kernel sample's innermost frame) and the syscalls they were
// in, by share of all samples, largest first (at most `top` each).
struct HotCode {
  uint32_t samples = 0;
  double user_share = 0;
  std::vector<std::pair<std::string, double>> kernel_frames, syscalls;
};
HotCode hot_code(const EvidenceStore& store, const std::vector<uint32_t>& tids, uint64_t a, uint64_t b, size_t top = 3);
// A slow token that computed more than its own work (`own_compute_ms`) ran extra code: how much
// more, and what its CPU samples saw. The token thread's samples, and its producer's when
// another thread makes its tokens.
void describe_extra_code(model::Outlier& o, const EvidenceStore& store, const HandoffModel& handoffs, uint32_t tid,
                         uint64_t a, uint64_t b, double own_compute_ms);
// "disk_io (/var/log/app.log)": the top cause and who or what it names.
std::string culprit_of(const model::Outlier& o);

}  // namespace ld::analysis
