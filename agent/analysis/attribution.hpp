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
#include <utility>
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
  // Of the cpu_contention time, what waited behind the target's own threads (the server as its
  // own neighbour: more busy threads than CPUs), and which of its threads held the CPUs.
  uint64_t own_contention_ns = 0;
  std::set<uint32_t> own_culprits;
  // GIL waits that an engine thread (one that calls CUDA) ended, walked on that thread: kept
  // without evidence too, for the typical token's facts.
  uint64_t gil_engine_ns = 0;
  // With keep_steps: what the window's own thread did, piece by piece, in order (not the
  // threads the walk followed).
  struct Step {
    uint64_t a = 0, b = 0;
    std::string what;
  };
  bool keep_steps = false;
  std::vector<Step> steps;
  // With keep_compute: the running spans charged as `compute`, each with the thread that ran it
  // and the compute ns in it (a span is part compute, part faults or syscalls), for batch
  // interference (outliers.cpp): which of the window's compute a thread shared between streams
  // did while other requests' prompts were being processed.
  struct ComputePiece {
    uint64_t a = 0, b = 0;
    uint32_t tid = 0;
    uint64_t ns = 0;
  };
  bool keep_compute = false;
  std::vector<ComputePiece> compute_pieces;
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

  // Hand-offs. Real servers move every token between threads: an HTTP thread waits on a
  // condition variable for the engine loop (llama.cpp), an event loop for an engine thread. A
  // thread that regularly wakes a token thread during its typical gaps is that thread's
  // producer: a wait it ends is the producer's time, split by what the producer did, not lock
  // contention. Learn from every typical window (`gaps` token gaps in [a, b] of `tid`) before
  // accounting any window, then call finish_learning() once.
  void learn_handoffs(uint32_t tid, uint64_t a, uint64_t b, uint64_t gaps);
  void finish_learning();
  // For tests and the report's facts: whether `waker` hands `consumer` its tokens.
  bool is_producer(uint32_t consumer, uint32_t waker) const;
  // The one producer of most of `consumer`'s wake-ups, or 0.
  uint32_t main_producer(uint32_t consumer) const;
  std::vector<uint32_t> producers_of(uint32_t consumer) const;

  // What ran on a CPU in [a, b] on `tids`, from their samples: the share in user code, and the
  // hottest kernel functions (each kernel sample's innermost frame) and the syscalls they were
  // in, by share of all samples, largest first (at most `top` each).
  struct HotCode {
    uint32_t samples = 0;
    double user_share = 0;
    std::vector<std::pair<std::string, double>> kernel_frames, syscalls;
  };
  HotCode hot_code(const std::vector<uint32_t>& tids, uint64_t a, uint64_t b, size_t top = 3) const;

 private:
  // Where the last search of each of a thread's lists ended (ThreadEvidence::index): the next
  // window of the same thread usually starts there. Only speeds searches up; results are the same.
  struct Cursors {
    size_t offcpu = 0, aggs = 0, syscalls = 0, reclaims = 0, faults = 0, samples = 0, gil_waits = 0, cuda = 0;
    size_t cgroup_before = 0, cgroup_after = 0;  // into the store's cgroup samples
  };

  // Whether t waited for the GIL in [a, b] (the GIL probe's waits, or futex calls on a GIL).
  bool waited_for_gil(const ThreadEvidence& t, uint64_t a, uint64_t b) const;
  // The GIL probe's wait time in [a, b] and how many waits it holds.
  std::pair<uint64_t, double> gil_wait_ns(const ThreadEvidence& t, uint64_t a, uint64_t b) const;
  // The timed call that overlaps [a, b] most, or nullptr.
  const Syscall* longest_call(const ThreadEvidence& t, uint64_t a, uint64_t b) const;
  // Whether a block of `len` ns in `off` was a GIL wait, given the call covering most of it and
  // the GIL probe's wait time in it.
  bool is_gil_wait(const ThreadEvidence& t, const OffCpu& off, const Syscall* call, uint64_t gil_ns, uint64_t len) const;
  // The waker of the first of t's next waits after `off` (before `until`) that `wanted` accepts.
  template <class Pred>
  uint32_t next_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until, Pred wanted) const;
  void walk(uint32_t tid, uint64_t a, uint64_t b, Cause running_as, int depth, WindowAccount& acc) const;
  // The walk of a window without CUDA waits: running, runnable and blocked pieces in turn.
  void walk_threads(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as, int depth,
                    WindowAccount& acc) const;
  // The thread of t's process that calls CUDA and was busy (running or in a CUDA wait) for at
  // least half of `waits`, t's GIL waits: the GIL's holder; 0 when none.
  uint32_t busy_engine(const ThreadEvidence& t, const std::vector<std::pair<uint64_t, uint64_t>>& waits) const;
  // [a, b] of t inside `call`, a CUDA call that waited (for the GPU, or for an allocation).
  void charge_cuda(const ThreadEvidence& t, const CudaCall& call, uint64_t a, uint64_t b, int depth,
                   WindowAccount& acc) const;
  void charge_running(const ThreadEvidence* t, uint64_t a, uint64_t b, Cause running_as, int depth,
                      WindowAccount& acc) const;
  void charge_runnable(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, WindowAccount& acc) const;
  // until: the end of the walked window (a hand-off that ended the wait happens before it).
  void charge_blocked(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b, uint64_t until, int depth,
                      WindowAccount& acc) const;
  // Names of the steps (WindowAccount::keep_steps).
  std::string running_step(const ThreadEvidence* t, uint64_t a, uint64_t b) const;
  std::string blocked_step(const ThreadEvidence& t, const OffCpu& off, uint64_t a, uint64_t b) const;
  std::string covering_call(const ThreadEvidence& t, uint64_t a, uint64_t b) const;
  bool is_gil_block(const ThreadEvidence& t, const OffCpu& off) const;
  uint64_t throttled_ns_in(uint64_t a, uint64_t b, Cursors& cur) const;
  bool traced(uint32_t tid, uint32_t tgid) const;

  // After `off`, a wait that ran out (a timer or a timeout ended it): the producer whose wake-up
  // ended the thread's waiting, when the thread's next woken waits say so; else main_producer.
  uint32_t producer_that_ended(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const;
  // The first thread of the server to end one of `t`'s waits after `off`, before `until`; or 0.
  uint32_t next_server_waker(const ThreadEvidence& t, const OffCpu& off, uint64_t until) const;

  struct Handoffs {
    uint64_t gaps = 0;                   // typical token gaps seen
    std::map<uint32_t, uint64_t> wakes;  // waker tid -> blocks of this thread it ended in them
    std::set<uint32_t> producers;        // wakers of at least kProducerShare of the gaps
    uint32_t main = 0;                   // the producer of most wake-ups, when it has most
  };

  const EvidenceStore& store_;
  std::set<uint32_t> targets_;
  mutable std::vector<Cursors> cursors_;
  std::map<uint32_t, Handoffs> handoffs_;  // by the token thread
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
