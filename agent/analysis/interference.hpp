// Batch interference (docs/attribution.md): batching servers compute a new request's prefill in
// the same engine step as the running streams' next tokens, so every stream waits for it. A slow
// token gap that overlaps other requests' prefill (request received -> first token), of which a
// thread shared between streams (the engine behind the hand-offs, or a token thread that sends
// several streams' tokens) computed, beyond what the typical token computes, is charged to
// `batch_interference` instead of `compute`. Pure analysis over the walk's compute pieces.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "analysis/handoff_model.hpp"
#include "analysis/window_account.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

class BatchInterference {
 public:
  // `requests`: the report's timeline (whose prefills may interfere); `threads`: the timeline
  // that knows which thread sent each token (the socket timeline; the same one without a token
  // log). `handoffs`: who hands which thread its tokens.
  BatchInterference(const model::Timeline& requests, const model::Timeline& threads, const HandoffModel& handoffs);

  // Moves to batch_interference the compute of `acc` (accounted with keep_compute over the
  // window [a, b] of request `request`) that a shared thread did while other requests of the
  // same process with long prompts (1.5 x the median or more) were in prefill, beyond `own_ns` (what the window would
  // compute anyway: a typical gap's compute, or a first token's baseline), which stays `compute`. For a first token
  // (`ttft`) a request that arrived later counts only with a larger prompt: a smaller one waited behind it instead.
  // Notes the interfering requests, the largest prompt first.
  void apply(WindowAccount& acc, size_t request, uint64_t a, uint64_t b, uint64_t own_ns, bool ttft) const;

  // Whether `tid` computes for more than one stream: a producer (or a producer's producer) of
  // two token threads or more, or of a token thread that serves concurrent requests; or such a
  // token thread itself.
  bool shared(uint32_t tid) const { return shared_.count(tid) > 0; }

 private:
  struct Prefill {
    uint64_t a = 0, b = 0;  // request received -> first token
    size_t request = 0;
  };
  const model::Timeline& requests_;
  std::set<uint32_t> shared_;
  std::vector<Prefill> prefills_;  // by start
  uint64_t longest_ = 0;           // the longest prefill: how far back one can start
  double long_input_ = 0;          // a prompt above this is long (kLongPromptFactor x the median)
};

}  // namespace ld::analysis
