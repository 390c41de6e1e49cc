#include "analysis/window_account.hpp"

namespace ld::analysis {

uint64_t WindowAccount::total_ns() const {
  uint64_t sum = 0;
  for (uint64_t v : ns) sum += v;
  return sum;
}

void WindowAccount::add(const WindowAccount& other) {
  for (size_t c = 0; c < kCauseCount; ++c) {
    ns[c] += other.ns[c];
    const CauseEvidence& theirs = other.evidence[c];
    CauseEvidence& ours = evidence[c];
    if (theirs.best_ns >= ours.best_ns && theirs.strings.is_object() && !theirs.strings.empty()) {
      ours.best_ns = theirs.best_ns;
      ours.strings = theirs.strings;
    }
    for (const auto& [k, v] : theirs.sums) ours.sums[k] += v;
  }
  own_contention_ns += other.own_contention_ns;
  gil_engine_ns += other.gil_engine_ns;
  own_culprits.insert(other.own_culprits.begin(), other.own_culprits.end());
}

void WindowAccount::note(Cause cause, uint64_t ns, nlohmann::json strings,
                         std::initializer_list<std::pair<const char*, double>> sums) {
  if (!with_evidence) return;
  CauseEvidence& ev = evidence_of(cause);
  if (ns >= ev.best_ns && strings.is_object() && !strings.empty()) {
    ev.best_ns = ns;
    ev.strings = std::move(strings);
  }
  for (const auto& [key, value] : sums) ev.sums[key] += value;
}

}  // namespace ld::analysis
