// The walk of a token's critical path (docs/attribution.md): start on the thread that sent the
// token, at the token, and go through the window. Running time is `compute` unless timed calls
// or samples place it elsewhere; runnable time is `cpu_contention` (naming the task that held
// the CPU) or `cgroup_throttle`; blocked time is charged by what the thread blocked in, and when
// another thread of the server ended the wait, by what held that thread up, walked the same way
// (API process -> engine process -> fsync is `disk_io`). Which timed evidence wins is the one
// precedence table (precedence.hpp); every threshold is in walk_thresholds.hpp.
//
// A plain function of (the threads' evidence, the hand-off model, the window): the Walker only
// keeps where its searches ended, so that consecutive windows of a thread start near the answer.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>

#include "analysis/evidence.hpp"
#include "analysis/handoff_model.hpp"
#include "analysis/intervals.hpp"
#include "analysis/precedence.hpp"
#include "analysis/thread_queries.hpp"
#include "analysis/walk_thresholds.hpp"
#include "analysis/window_account.hpp"

namespace ld::analysis {

class Walker {
 public:
  Walker(const EvidenceStore& store, const HandoffModel& handoffs, const std::set<uint32_t>& targets);
  // Adds the time of `tid` in [a, b] by cause to `acc` (the causes add up to b - a; the
  // unexplained is kUnknown). acc.with_evidence, keep_steps and keep_compute decide what else
  // it keeps.
  void account(WindowAccount& acc, uint32_t tid, uint64_t a, uint64_t b);

 private:
  // How the thread the walk is on is charged: its running time as `running_as`, `depth`
  // hand-offs away from the token's own thread.
  struct Frame {
    WindowAccount& acc;
    Cause running_as = Cause::kCompute;
    int depth = 0;
    bool can_follow() const { return depth < thresholds::kMaxWakerDepth; }
    Frame follow(Cause as) const { return {acc, as, depth + 1}; }
    bool keeps_steps() const { return acc.keep_steps && acc.with_evidence && depth == 0; }
  };
  // What timed calls and stalls covered of a running span, by the precedence table's rows.
  struct Cover {
    std::array<Intervals, kTimedKinds> only;  // each row's spans minus the rows' above it
    Intervals all;
    const Syscall* biggest_memory = nullptr;
    const Syscall* biggest_sync = nullptr;
    Intervals file_writes;  // of the sync-call spans, the writes to regular files
  };
  // What a block's own evidence says it waited for (before asking who ended it).
  struct BlockClass {
    Cause cause = Cause::kUnknown;
    nlohmann::json strings;  // the evidence, when the account keeps it
    const Syscall* call = nullptr;
    double gil_waits = 0;
  };

  // walk.cpp: a thread's span, split around its CUDA waits, then into its scheduler states.
  void thread(uint32_t tid, uint64_t a, uint64_t b, const Frame& f);
  void states(const ThreadEvidence* t, uint64_t a, uint64_t b, const Frame& f);
  void cuda_wait(const ThreadEvidence& t, const CudaCall& call, uint64_t a, uint64_t b, const Frame& f);
  void runnable(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, WindowAccount& acc);
  // walk_running.cpp
  void running(const ThreadEvidence* t, uint64_t a, uint64_t b, const Frame& f);
  uint64_t short_runnable(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, WindowAccount& acc);
  uint64_t slow_clock(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, WindowAccount& acc);
  void collect_cover(const ThreadEvidence& t, uint64_t a, uint64_t b, Cover& cover);
  uint64_t timed_on_cpu(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, const Frame& f, Cover& cover);
  uint64_t samples_on_cpu(const ThreadEvidence& t, uint64_t a, uint64_t b, uint64_t left, const Frame& f,
                          const Cover& cover);
  uint64_t walk_waits_on(uint32_t holder, const util::Spans& waits, uint64_t left, const Frame& f);
  uint32_t busy_engine(const ThreadEvidence& t, const util::Spans& waits);
  // walk_blocked.cpp
  void blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until, const Frame& f);
  BlockClass classify_block(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, bool evidence);
  bool gil_wait_handed_over(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until,
                            bool woken_by_server, const Frame& f);
  void charge_gil_wait(const ThreadEvidence& t, const OffCpu& off, uint64_t len, const BlockClass& block,
                       bool woken_by_server, WindowAccount& acc);
  bool wait_handed_over(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until,
                        const BlockClass& block, bool woken_by_server, const Frame& f);
  void charge_left_wait(const ThreadEvidence& t, const OffCpu& off, uint64_t len, BlockClass block, bool timed_out,
                        WindowAccount& acc);
  uint32_t producer_that_ended(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const;
  uint32_t next_server_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const;
  bool from_server(uint32_t tid, uint32_t tgid) const { return is_server_thread(store_, targets_, tid, tgid); }

  const EvidenceStore& store_;
  const HandoffModel& handoffs_;
  const std::set<uint32_t>& targets_;
  CursorTable cursors_;
};

// The names of a token thread's steps (WindowAccount::keep_steps), as the report lists them.
std::string running_step(const EvidenceStore& store, const ThreadEvidence* t, uint64_t a, uint64_t b);
std::string blocked_step(const EvidenceStore& store, const ThreadEvidence& t, const OffCpu& off, uint64_t a,
                         uint64_t b);

}  // namespace ld::analysis
