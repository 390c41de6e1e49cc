// Attribution: for every slow first token and slow gap, where did the time go.
//
// attribute() finds the slow windows (outlier_windows.hpp), learns who hands each token thread
// its tokens from the typical ones (handoff_model.hpp), walks every window's critical path
// (walk.hpp, charged by the one precedence table of precedence.hpp, with the thresholds of
// walk_thresholds.hpp) and turns each walked window into the report's outlier
// (outlier_account.hpp) with its facts (window_facts.hpp). docs/attribution.md tells the model.
// Pure analysis.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "analysis/evidence.hpp"
#include "analysis/handoff_model.hpp"
#include "analysis/outlier_account.hpp"
#include "analysis/window_account.hpp"
#include "model/report.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

// One trace's evidence, its servers' processes and, once learned, its hand-off model: the walk
// of single windows, for tests and tools that ask about one window at a time.
class Attributor {
 public:
  Attributor(const EvidenceStore& store, std::set<uint32_t> target_tgids);
  // Learns the hand-off model from these typical runs (replacing any learned before).
  void learn(const std::vector<TypicalRun>& runs);
  // Time of `tid` in [a, b] by cause; the causes add up to b - a (the unexplained is kUnknown).
  // with_evidence = false skips building the evidence (strings, sums): same times, cheaper.
  WindowAccount account(uint32_t tid, uint64_t a, uint64_t b, bool with_evidence = true) const;
  const HandoffModel& handoffs() const { return handoffs_; }
  HotCode hot_code(const std::vector<uint32_t>& tids, uint64_t a, uint64_t b, size_t top = 3) const;

 private:
  const EvidenceStore& store_;
  std::set<uint32_t> targets_;
  HandoffModel handoffs_;
};

// Fills report.outliers, typical, ttft_fit, periodicity, window_facts and sets attributed.
// `server` is the socket timeline when the report's requests come from a token log (their
// windows are mapped onto the server's token sends), else nullptr.
void attribute(model::Report& report, const model::Timeline& timeline, const model::Timeline* server,
               const EvidenceStore& store, const std::set<uint32_t>& target_tgids, uint64_t target_start_mono_ns);

// Exposed for tests.
model::TtftFit fit_ttft(const std::vector<double>& input, const std::vector<double>& ttft_ms,
                        std::vector<bool>* inlier = nullptr);
model::Periodicity find_period(std::vector<uint64_t> outlier_end_ns);

}  // namespace ld::analysis
