// Which cause wins when timed evidence covers a span of a thread: one table, read top to
// bottom by both sides of the walk. A running span gives each row the part of the span its
// evidence covers and the rows above left; a blocked span goes to the first row whose evidence
// holds for the block. What a cause then does (a GIL wait an engine ended is the engine's work,
// a lock wait a producer ended is the producer's) is the walk's; this table only says who wins.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/cause.hpp"

namespace ld::analysis {

// The timed evidence a span can hold (a probe measured it: no inference from stacks or samples).
enum class Timed : uint8_t {
  kReclaim,     // direct reclaim or compaction in the thread's context (reclaim probe)
  kGilWait,     // a futex wait on the GIL's word (futex or GIL probe)
  kSyncCall,    // fsync family, sync_file_range, msync, dirty-page throttling, file writes (disk probe)
  kMemoryCall,  // mmap, munmap, brk, mremap, madvise, and the summed small ones (memory probe)
  kLockWait,    // a futex wait on any other word (futex probe)
  kCount
};
inline constexpr size_t kTimedKinds = static_cast<size_t>(Timed::kCount);

struct PrecedenceRow {
  Timed evidence;
  model::Cause cause;
  std::string_view name;  // as docs/attribution.md's table names the evidence
  std::string_view why;   // why it wins over the rows below
};

inline constexpr std::array<PrecedenceRow, kTimedKinds> kPrecedence{{
    {Timed::kReclaim, model::Cause::kSwapReclaim, "direct reclaim, compaction",
     "happens inside another call (an mmap, a write, a fault): the deeper cause"},
    {Timed::kGilWait, model::Cause::kGil, "futex wait on the GIL",
     "timed to the address: certain, and a GIL wait is never a lock held for other work"},
    {Timed::kSyncCall, model::Cause::kDiskIo, "sync call, dirty throttling, write to a file",
     "one call of the thread, timed entry to exit"},
    {Timed::kMemoryCall, model::Cause::kKvAlloc, "memory call",
     "timed too, but the summed small calls are placed only roughly (from the first one on)"},
    {Timed::kLockWait, model::Cause::kLockContention, "futex wait (not the GIL)",
     "last: a wait on a word that no row above explains"},
}};

// The row of the first kind in `present` (by the table's order), or nullptr when none is.
inline const PrecedenceRow* first_present(const std::array<bool, kTimedKinds>& present) {
  for (const PrecedenceRow& row : kPrecedence)
    if (present[static_cast<size_t>(row.evidence)]) return &row;
  return nullptr;
}

}  // namespace ld::analysis
