// libFuzzer target: any bytes as a token log. parse_token_log must never throw or crash, and
// what it returns must be internally consistent.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "tokens/token_log.hpp"

namespace {

// The clock offset varies with the input so the realtime conversion's overflow edges get
// exercised too: 0, a realistic offset, and the int64 extremes.
int64_t offset_for(size_t size) {
  switch (size % 4) {
    case 0: return 0;
    case 1: return 1'700'000'000'000'000'000;
    case 2: return INT64_MIN;
    default: return INT64_MAX;
  }
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_consistent(const ld::tokens::TokenLogResult& r) {
  check(r.bad_lines <= r.lines);
  check(r.warnings.size() <= ld::tokens::kMaxLineWarnings + 1);
  const auto& requests = r.timeline.requests;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& req = requests[i];
    check(!req.id.empty());
    check(!req.token_ns.empty());
    check(req.token_ns.size() == req.token_tid.size());
    check(req.token_ns.front() >= req.start_ns);
    for (size_t t = 1; t < req.token_ns.size(); ++t) check(req.token_ns[t - 1] <= req.token_ns[t]);
    if (i > 0) check(requests[i - 1].start_ns <= req.start_ns);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const auto result = ld::tokens::parse_token_log(in, "fuzz.jsonl", offset_for(size));
  check_consistent(result);
  return 0;
}
