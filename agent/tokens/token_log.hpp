// The contract's token log (`--tokens jsonl:FILE`): one JSON object a line,
//   {"request":"ID","event":"start|token|end","t_ns":N}
// with optional "clock":"realtime|monotonic" (default realtime), and on start "input_tokens":N
// and "local_port":N (the client's TCP port of the request's connection: it joins a client's log
// to the server's requests exactly, docs/definitions.md).
// Bad lines are warned about with file:line and skipped; they never abort the analysis.
//
// Requests: tokens are sorted by time; a request with no start event is skipped (its TTFT is
// unknowable); a token stamped before its request's start is skipped; a request with a start
// but no token counts as non-streaming (or in flight when it has no end either).
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "model/timeline.hpp"

namespace ld::tokens {

inline constexpr size_t kMaxLineBytes = 1 << 20;  // longer lines are skipped with a warning
inline constexpr size_t kMaxLineWarnings = 100;   // then one "... N more" warning

struct TokenLogResult {
  model::Timeline timeline;           // times converted to CLOCK_MONOTONIC
  std::vector<std::string> warnings;  // "tokens.jsonl:7: missing \"t_ns\"; line skipped"
  uint64_t lines = 0;                 // lines read, blank ones included
  uint64_t bad_lines = 0;             // lines skipped (all of them, even past the warning cap)
  uint64_t skipped_requests = 0;      // requests dropped as a whole (no start event)
};

// realtime_minus_monotonic_ns converts "realtime" stamps: mono = realtime - offset.
// Never throws: every problem becomes a warning.
TokenLogResult parse_token_log(std::istream& in, const std::string& name, int64_t realtime_minus_monotonic_ns);
// Opens `path`; throws std::runtime_error("cannot read PATH: reason") when it cannot.
TokenLogResult read_token_log(const std::string& path, int64_t realtime_minus_monotonic_ns);

}  // namespace ld::tokens
