// The latency definitions every report states: one enum and one table (id, label, what it
// measures, and the name the common tools give the same number), like cause.hpp. Load tools,
// engines and dashboards name TPOT and ITL differently (per token, per chunk, per request; first
// token in or out), so a report offers the common definitions side by side, for the server's
// sends and for a client's token log (docs/definitions.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/stats.hpp"

namespace ld::model {

enum class Definition : uint8_t {
  kTtft,                // request start -> first token
  kTpotPerToken,        // every token but a request's first: time since the previous token
  kItlPerChunk,         // every chunk but a request's first: time since the previous chunk
  kMeanTpotPerRequest,  // per request: (last token - first token) / (tokens - 1)
  kTpotInclFirst,       // per request: (last token - start) / tokens
  kE2e,                 // per request: start -> last token
  kCount
};
inline constexpr size_t kDefinitionCount = static_cast<size_t>(Definition::kCount);

struct DefinitionInfo {
  Definition definition;
  std::string_view id;          // the JSON name under "definitions": "mean_tpot_per_request_ms"
  std::string_view label;       // short human name: "mean TPOT per request"
  std::string_view population;  // what one value is: "request", "token", "chunk"
  std::string_view meaning;     // one line: how it is computed
  std::string_view same_as;     // the same number in the common tools, "; "-separated
  std::string_view known_as;    // the shortest of those, for a table column
};

// A token is one SSE data event; a chunk is what arrived together: one send of the server
// (which may carry several events), or the events a client read at one instant.
inline constexpr std::array<DefinitionInfo, kDefinitionCount> kDefinitions{{
    {Definition::kTtft, "ttft_ms", "TTFT", "request",
     "request start to the first token (server: first byte of the request read -> first token sent; "
     "client: request sent -> first token received)",
     "vLLM bench TTFT; GuideLLM time_to_first_token_ms; AIPerf time_to_first_token; "
     "OTel gen_ai.server.time_to_first_token; vllm:time_to_first_token_seconds (from engine arrival)",
     "TTFT in vLLM bench, GuideLLM, AIPerf"},
    {Definition::kTpotPerToken, "tpot_per_token_ms", "TPOT per token", "token",
     "every token after a request's first: time since the previous token; a chunk's gap is split "
     "evenly over its tokens (tokens that came with an earlier one count 0)",
     "vllm:inter_token_latency_seconds (formerly vllm:time_per_output_token_seconds, per engine step)",
     "vllm:inter_token_latency_seconds"},
    {Definition::kItlPerChunk, "itl_per_chunk_ms", "ITL per chunk", "chunk",
     "every chunk after a request's first: time since the previous chunk (a send or an arrival "
     "that carried several tokens is one chunk)",
     "vLLM bench ITL; AIPerf inter_chunk_latency", "vLLM bench ITL, AIPerf ICL"},
    {Definition::kMeanTpotPerRequest, "mean_tpot_per_request_ms", "mean TPOT per request", "request",
     "per request with 2+ tokens: (last token - first token) / (tokens - 1)",
     "vLLM bench TPOT (mean_tpot_ms); GuideLLM inter_token_latency_ms; AIPerf inter_token_latency; "
     "OTel gen_ai.server.time_per_output_token; vllm:request_time_per_output_token_seconds",
     "vLLM bench TPOT, GuideLLM/AIPerf ITL"},
    {Definition::kTpotInclFirst, "tpot_incl_first_per_request_ms", "TPOT incl. first token", "request",
     "per request: (last token - request start) / tokens, the first token's wait included",
     "GuideLLM time_per_output_token_ms", "GuideLLM TPOT"},
    {Definition::kE2e, "e2e_ms", "E2E latency", "request", "per request: request start to the last token",
     "vLLM bench E2EL; GuideLLM request_latency; AIPerf request_latency; "
     "OTel gen_ai.server.request.duration; vllm:e2e_request_latency_seconds",
     "vLLM bench E2EL, request latency"},
}};

const DefinitionInfo& definition_info(Definition definition);

// Every definition measured on one side (the server's sends, or a client's token log).
struct DefinitionSet {
  bool known = false;     // false: this side was not measured
  uint64_t requests = 0;  // requests with at least one token
  uint64_t tokens = 0;    // SSE data events
  uint64_t chunks = 0;    // sends (server) or arrival instants (client)
  std::array<Distribution, kDefinitionCount> values{};

  const Distribution& operator[](Definition d) const { return values[static_cast<size_t>(d)]; }
  Distribution& operator[](Definition d) { return values[static_cast<size_t>(d)]; }
};

struct Definitions {
  DefinitionSet server;  // from the target's socket sends
  DefinitionSet client;  // from a token log (`--client` or `--tokens jsonl:`)
};

}  // namespace ld::model
