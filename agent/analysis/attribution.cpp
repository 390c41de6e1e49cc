#include "analysis/attribution.hpp"

#include "analysis/walk.hpp"

namespace ld::analysis {

Attributor::Attributor(const EvidenceStore& store, std::set<uint32_t> target_tgids)
    : store_(store), targets_(std::move(target_tgids)) {}

void Attributor::learn(const std::vector<TypicalRun>& runs) { handoffs_ = HandoffModel::learn(store_, targets_, runs); }

WindowAccount Attributor::account(uint32_t tid, uint64_t a, uint64_t b, bool with_evidence) const {
  WindowAccount acc;
  acc.with_evidence = with_evidence;
  Walker(store_, handoffs_, targets_).account(acc, tid, a, b);
  return acc;
}

HotCode Attributor::hot_code(const std::vector<uint32_t>& tids, uint64_t a, uint64_t b, size_t top) const {
  return analysis::hot_code(store_, tids, a, b, top);
}

}  // namespace ld::analysis
