// The contract's token log (`--tokens jsonl:FILE`): one JSON object a line,
//   {"request":"ID","event":"start|token|end","t_ns":N}
// with optional "clock":"realtime|monotonic" (default realtime) and "input_tokens":N on start.
// Bad lines are warned about with file:line and skipped; they never abort the analysis.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "analysis/timeline.hpp"

namespace ld::tokens {

struct TokenLogResult {
  analysis::Timeline timeline;         // times converted to CLOCK_MONOTONIC
  std::vector<std::string> warnings;   // "tokens.jsonl:7: missing \"t_ns\"; line skipped"
  uint64_t lines = 0;
  uint64_t bad_lines = 0;
};

// realtime_minus_monotonic_ns converts "realtime" stamps: mono = realtime - offset.
TokenLogResult parse_token_log(std::istream& in, const std::string& name,
                               int64_t realtime_minus_monotonic_ns);
// Opens `path`; throws std::runtime_error("cannot read PATH: reason") when it cannot.
TokenLogResult read_token_log(const std::string& path, int64_t realtime_minus_monotonic_ns);

}  // namespace ld::tokens
