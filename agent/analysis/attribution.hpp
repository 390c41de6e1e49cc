// Attribution: for every slow first token and slow gap, where did the time go.
//
// The walk (docs/attribution.md): start on the thread that sent the token, at the token, and
// go backwards through the window. Running time is `compute` unless samples or timed calls
// place it in page faults, memory calls, reclaim or sync; runnable time is `cpu_contention`
// (naming the task that held the CPU) or `cgroup_throttle`; blocked time is charged by what the
// thread blocked in, and when another traced thread woke it, by what held that waker up
// (recursively: API process -> engine process -> fsync is `disk_io`). Pure analysis.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "analysis/timeline.hpp"
#include "model/report.hpp"

namespace ld::analysis {

using model::kCauseCount;

// Evidence gathered for one cause while charging time to it.
struct CauseEvidence {
  uint64_t best_ns = 0;                 // the largest single piece: its strings are kept
  // Null until a piece brings strings: a WindowAccount is made per token gap, and 14 empty
  // objects (one allocation each) were most of its cost.
  nlohmann::json strings;
  std::map<std::string, double> sums;   // counts and ms, summed over the pieces
};

struct WindowAccount {
  std::array<uint64_t, kCauseCount> ns{};
  std::array<CauseEvidence, kCauseCount> evidence;
  bool with_evidence = true;  // false: times only (the typical-token profile drops the evidence)
  uint64_t total_ns() const;
  // Adds another account's times and evidence (its strings win when its largest piece is larger).
  void add(const WindowAccount& other);
  void charge(Cause cause, uint64_t ns) { ns_of(cause) += ns; }
  uint64_t& ns_of(Cause cause) { return ns[static_cast<size_t>(cause)]; }
  CauseEvidence& evidence_of(Cause cause) { return evidence[static_cast<size_t>(cause)]; }
};

class Attributor {
 public:
  Attributor(const EvidenceStore& store, std::set<uint32_t> target_tgids);
  // Time of `tid` in [a, b] by cause; the causes add up to b - a (the unexplained is kUnknown).
  // with_evidence = false skips building the evidence (strings, sums): same times, cheaper.
  WindowAccount account(uint32_t tid, uint64_t a, uint64_t b, bool with_evidence = true) const;
  // The same, added into `acc` (its with_evidence decides): sums many windows without a
  // WindowAccount per window.
  void account_into(WindowAccount& acc, uint32_t tid, uint64_t a, uint64_t b) const;

 private:
  // Where the last search of each of a thread's lists ended (ThreadEvidence::index): the next
  // window of the same thread usually starts there. Only speeds searches up; results are the same.
  struct Cursors {
    size_t offcpu = 0, aggs = 0, syscalls = 0, reclaims = 0, faults = 0, samples = 0, gil_waits = 0;
    size_t cgroup_before = 0, cgroup_after = 0;  // into the store's cgroup samples
  };

  void walk(uint32_t tid, uint64_t a, uint64_t b, Cause running_as, int depth, WindowAccount& acc) const;
  void charge_running(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as, WindowAccount& acc) const;
  void charge_runnable(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, WindowAccount& acc) const;
  void charge_blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, int depth,
                      WindowAccount& acc) const;
  uint64_t throttled_ns_in(uint64_t a, uint64_t b, Cursors& cur) const;
  bool traced(uint32_t tid, uint32_t tgid) const;

  const EvidenceStore& store_;
  std::set<uint32_t> targets_;
  mutable std::vector<Cursors> cursors_;
};

// Fills report.outliers, typical, ttft_fit, periodicity, window_facts and sets attributed.
// `server` is the socket timeline when the report's requests come from a token log (their
// windows are mapped onto the server's token sends), else nullptr.
void attribute(model::Report& report, const model::Timeline& timeline, const model::Timeline* server,
               const EvidenceStore& store, const std::set<uint32_t>& target_tgids,
               uint64_t target_start_mono_ns);

// Exposed for tests.
model::TtftFit fit_ttft(const std::vector<double>& input, const std::vector<double>& ttft_ms,
                         std::vector<bool>* inlier = nullptr);
model::Periodicity find_period(std::vector<uint64_t> outlier_end_ns);

}  // namespace ld::analysis
