// The definitions of model/definitions.hpp measured on one token timeline (the server's sends or
// a client's token log). Pure analysis.
#pragma once

#include <cstdint>
#include <vector>

#include "model/definitions.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

// What arrived (or was sent) together: one time, and the tokens (SSE data events) it carried.
struct Chunk {
  uint64_t t_ns = 0;
  uint32_t tokens = 1;
};

// A request's token times as chunks: tokens with the same time are one chunk (a client's read),
// and a send that carried several events counts them (Request::token_events).
std::vector<Chunk> chunks_of(const model::Request& request);

model::DefinitionSet measure_definitions(const model::Timeline& timeline);

}  // namespace ld::analysis
