// Questions the walk and the hand-off model ask of one thread's evidence in a span: its timed
// calls, its GIL waits, its cgroup's throttling. Searches start from where the same list's last
// search ended (Cursors): windows come in time order per thread, so the answer is usually
// close; the answers are the same from any cursor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "analysis/walk_thresholds.hpp"
#include "util/search.hpp"

namespace ld::analysis {

// Where the last search of each of a thread's lists ended (ThreadEvidence::index).
struct Cursors {
  size_t offcpu = 0, aggs = 0, syscalls = 0, reclaims = 0, faults = 0, samples = 0, gil_waits = 0, cuda = 0;
  size_t cgroup_before = 0, cgroup_after = 0;  // into the store's cgroup samples
};

// One Cursors per thread of the store.
class CursorTable {
 public:
  explicit CursorTable(const EvidenceStore& store) : cursors_(store.threads().size()) {}
  Cursors& operator[](const ThreadEvidence& t) { return cursors_[t.index]; }

 private:
  std::vector<Cursors> cursors_;
};

// The items of a list sorted by start that overlap [a, b], each handed to f. `longest` (the
// list's longest item) narrows the look-back to where an overlapping item can start.
template <class V, class Start, class End, class F>
void for_overlapping(const V& items, size_t& hint, uint64_t longest, uint64_t a, uint64_t b, Start start, End end,
                     F f) {
  const uint64_t look_back = std::min(thresholds::kLookBackNs, longest);
  size_t i = util::partition_from(items, hint, [&](const auto& item) { return start(item) + look_back < a; });
  for (; i < items.size() && start(items[i]) < b; ++i)
    if (end(items[i]) > a) f(items[i]);
}

// The timed call kinds (enum ld_syscall_kind) by what they are.
bool is_memory_kind(uint32_t kind);
bool is_disk_kind(uint32_t kind);  // the sync family, dirty throttling and file writes
bool is_file_write_kind(uint32_t kind);
bool is_futex_kind(uint32_t kind);
// Calls whose length argument is memory being mapped (munmap/madvise give memory back).
bool grows_mapping(uint32_t kind);
// "fsync", "small memory calls"...
const char* syscall_kind_name(uint32_t kind);
// A disk call's evidence strings: its syscall and file, and a write's bytes.
void describe_disk_call(const Syscall& call, nlohmann::json& strings);

// A thread of the server: of a target process, or one the trace holds evidence of.
bool is_server_thread(const EvidenceStore& store, const std::set<uint32_t>& targets, uint32_t tid, uint32_t tgid);

// The GIL probe's wait time in [a, b] and how many waits it holds.
std::pair<uint64_t, double> gil_wait_ns(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b);
// The timed call that overlaps [a, b] most, or nullptr.
const Syscall* longest_call(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b);
// Whether a direct reclaim (or compaction) of t overlaps [a, b].
bool reclaimed_in(const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b);
// Whether a block of `len` ns in `off` was a GIL wait, given the call covering most of it and
// the GIL probe's wait time in it.
bool is_gil_wait(const EvidenceStore& store, const ThreadEvidence& t, const OffCpu& off, const Syscall* call,
                 uint64_t gil_ns, uint64_t len);
// Whether the block `off` was a GIL wait (the same test as the walk's).
bool is_gil_block(const EvidenceStore& store, const ThreadEvidence& t, Cursors& cur, const OffCpu& off);
// Whether t waited for the GIL in [a, b] (the GIL probe's waits, or futex calls on a GIL).
bool waited_for_gil(const EvidenceStore& store, const ThreadEvidence& t, Cursors& cur, uint64_t a, uint64_t b);
// CFS throttling of the target's cgroup in [a, b], prorated from the counters sampled around it.
uint64_t throttled_ns_in(const std::vector<CgroupSample>& samples, Cursors& cur, uint64_t a, uint64_t b);

}  // namespace ld::analysis
