// Which token windows are slow: every gap against the pooled median + k * MAD (and a floor),
// every first token against a robust a*sqrt(input)+b fit of TTFT (or the median).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "model/report.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

// A window to attribute: [a, b] on the thread that sent the token at b.
struct Window {
  model::WindowKind kind = model::WindowKind::kTpot;
  size_t request = 0;  // index into the timeline
  uint64_t token_index = 0;
  uint64_t a = 0, b = 0;
  uint64_t walk_from = 0;  // the server saw the request at this time (jsonl: may be after a)
  uint32_t tid = 0;
  double baseline_ms = 0;
};

// The outlier windows; every other token gap goes to on_typical as it is found (a trace has
// millions: they are walked, not kept). `server[i]` is the server request that the timeline's
// request i corresponds to (a token log's requests), or null. Fills `fit`.
std::vector<Window> find_outliers(const model::Timeline& timeline, const std::vector<const model::Request*>& server,
                                  const model::OutlierConfig& config, model::TtftFit& fit,
                                  const std::function<void(const Window&)>& on_typical);

// The server-side request each token-log request corresponds to: the one whose first token send
// is nearest before the log's first token. All null without a server timeline.
std::vector<const model::Request*> match_server(const model::Timeline& log, const model::Timeline* server);

}  // namespace ld::analysis
