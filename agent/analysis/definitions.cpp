#include "analysis/definitions.hpp"

#include <algorithm>

#include "util/time.hpp"

namespace ld::analysis {

using model::Definition;

std::vector<Chunk> chunks_of(const model::Request& r) {
  std::vector<Chunk> chunks;
  chunks.reserve(r.token_ns.size());
  for (size_t i = 0; i < r.token_ns.size(); ++i) {
    const uint32_t n = i < r.token_events.size() ? std::max<uint32_t>(1, r.token_events[i]) : 1;
    if (!chunks.empty() && chunks.back().t_ns == r.token_ns[i]) chunks.back().tokens += n;
    else chunks.push_back({r.token_ns[i], n});
  }
  return chunks;
}

model::DefinitionSet measure_definitions(const model::Timeline& timeline) {
  using util::delta_ms;
  model::DefinitionSet set;
  set.known = true;
  std::vector<double> ttft, per_token, per_chunk, mean_tpot, incl_first, e2e;
  for (const model::Request& r : timeline.requests) {
    const std::vector<Chunk> chunks = chunks_of(r);
    if (chunks.empty()) continue;
    uint64_t tokens = 0;
    for (const Chunk& c : chunks) tokens += c.tokens;
    set.requests++;
    set.tokens += tokens;
    set.chunks += chunks.size();
    const Chunk& first = chunks.front();
    const Chunk& last = chunks.back();
    ttft.push_back(delta_ms(first.t_ns, r.start_ns));
    e2e.push_back(delta_ms(last.t_ns, r.start_ns));
    incl_first.push_back(delta_ms(last.t_ns, r.start_ns) / static_cast<double>(tokens));
    if (tokens >= 2) mean_tpot.push_back(delta_ms(last.t_ns, first.t_ns) / static_cast<double>(tokens - 1));
    // Tokens that came with the first one waited nothing after it; TTFT covers the first.
    per_token.insert(per_token.end(), first.tokens - 1, 0.0);
    for (size_t k = 1; k < chunks.size(); ++k) {
      const double gap = delta_ms(chunks[k].t_ns, chunks[k - 1].t_ns);
      per_chunk.push_back(gap);
      per_token.insert(per_token.end(), chunks[k].tokens, gap / chunks[k].tokens);
    }
  }
  set[Definition::kTtft] = model::describe(std::move(ttft));
  set[Definition::kTpotPerToken] = model::describe(std::move(per_token));
  set[Definition::kItlPerChunk] = model::describe(std::move(per_chunk));
  set[Definition::kMeanTpotPerRequest] = model::describe(std::move(mean_tpot));
  set[Definition::kTpotInclFirst] = model::describe(std::move(incl_first));
  set[Definition::kE2e] = model::describe(std::move(e2e));
  return set;
}

}  // namespace ld::analysis
