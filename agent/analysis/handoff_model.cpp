#include "analysis/handoff_model.hpp"

#include <algorithm>

#include "analysis/thread_queries.hpp"
#include "analysis/walk_thresholds.hpp"

namespace ld::analysis {

namespace {

// Counts who ended `tid`'s waits in [a, b]: its itemised blocks (not preemptions, not GIL
// hand-overs between peers) and the wakers the sched probe summed for its short ones.
class WakeCounter {
 public:
  WakeCounter(const EvidenceStore& store, const std::set<uint32_t>& targets)
      : store_(store), targets_(targets), cursors_(store) {}

  void count(uint32_t tid, uint64_t a, uint64_t b, std::map<uint32_t, uint64_t>& wakes) {
    const ThreadEvidence* t = tid ? store_.thread(tid) : nullptr;
    if (!t || b <= a) return;
    count_blocks(*t, a, b, wakes);
    count_short_waits(*t, a, b, wakes);
  }

 private:
  bool from_server(uint32_t tid, uint32_t tgid) const { return is_server_thread(store_, targets_, tid, tgid); }

  void count_blocks(const ThreadEvidence& t, uint64_t a, uint64_t b, std::map<uint32_t, uint64_t>& wakes) {
    const auto& offs = t.offcpu;
    auto it = std::partition_point(offs.begin(), offs.end(), [&](const OffCpu& o) { return o.on_ns <= a; });
    for (; it != offs.end() && it->off_ns < b; ++it)
      if (!it->preempted && it->waker_tid != 0 && it->waker_tid != t.tid &&
          from_server(it->waker_tid, it->waker_tgid) && !is_gil_block(store_, t, cursors_[t], *it))
        wakes[it->waker_tid]++;
  }

  // Waits under the sched probe's itemising threshold come summed, with the wakers that ended
  // them: a thread that waits a fraction of a millisecond for each token (llama-server's HTTP
  // threads at sub-millisecond TPOT) is learned from these alone. A period in which the thread
  // also waited for the GIL is left out: its wakers may be GIL peers handing over.
  void count_short_waits(const ThreadEvidence& t, uint64_t a, uint64_t b, std::map<uint32_t, uint64_t>& wakes) {
    Cursors& cur = cursors_[t];
    for_overlapping(
        t.aggs, cur.aggs, t.longest.aggs, a, b, [](const SchedAgg& g) { return g.start_ns; },
        [](const SchedAgg& g) { return g.end_ns; },
        [&](const SchedAgg& g) {
          if (waited_for_gil(store_, t, cur, g.start_ns, g.end_ns)) return;
          for (const SchedAgg::Waker& w : g.wakers)
            if (w.tid != 0 && w.tid != t.tid && from_server(w.tid, w.tgid)) wakes[w.tid] += w.count;
        });
  }

  const EvidenceStore& store_;
  const std::set<uint32_t>& targets_;
  CursorTable cursors_;
};

}  // namespace

HandoffModel HandoffModel::learn(const EvidenceStore& store, const std::set<uint32_t>& targets,
                                 const std::vector<TypicalRun>& runs) {
  HandoffModel model;
  WakeCounter counter(store, targets);
  auto learn_run = [&](uint32_t tid, const TypicalRun& r) {
    if (!tid || !store.thread(tid) || r.b <= r.a) return;
    Wakes& w = model.by_thread_[tid];
    w.gaps += r.gaps;
    counter.count(tid, r.a, r.b, w.count);
  };
  std::map<uint32_t, std::set<size_t>> runs_of;  // thread -> the runs it was learned over
  for (size_t i = 0; i < runs.size(); ++i) {
    runs_of[runs[i].tid].insert(i);
    learn_run(runs[i].tid, runs[i]);
  }
  for (auto& [tid, w] : model.by_thread_) decide(w);
  // The producers' own hand-offs over their consumers' runs, level by level up the chain: a
  // token handed from an engine process's loop to its ZMQ I/O thread, to the API process's I/O
  // thread, to the event loop that sends it is three levels.
  std::set<uint32_t> frontier;
  for (const TypicalRun& r : runs) frontier.insert(r.tid);
  const std::set<uint32_t> token_threads = frontier;
  for (int level = 1; level < thresholds::kMaxWakerDepth && !frontier.empty(); ++level) {
    std::map<uint32_t, std::set<size_t>> fresh;
    for (uint32_t consumer : frontier)
      for (uint32_t producer : model.producers_of(consumer)) {
        if (token_threads.count(producer)) continue;
        for (size_t i : runs_of[consumer])
          if (!runs_of[producer].count(i)) fresh[producer].insert(i);
      }
    frontier.clear();
    for (const auto& [producer, fresh_runs] : fresh) {
      for (size_t i : fresh_runs) {
        runs_of[producer].insert(i);
        learn_run(producer, runs[i]);
      }
      frontier.insert(producer);
    }
    for (auto& [tid, w] : model.by_thread_) decide(w);
  }
  return model;
}

void HandoffModel::decide(Wakes& w) {
  uint64_t total = 0, best = 0;
  for (const auto& [waker, n] : w.count) {
    total += n;
    if (n >= thresholds::kMinProducerWakes &&
        static_cast<double>(n) >= thresholds::kProducerShare * static_cast<double>(w.gaps))
      w.producers.insert(waker);
    if (n > best && w.producers.count(waker)) {
      best = n;
      w.main = waker;
    }
  }
  // Several producers, none with most: no single one to follow.
  if (static_cast<double>(best) < thresholds::kMainProducerMajority * static_cast<double>(total)) w.main = 0;
}

bool HandoffModel::is_producer(uint32_t consumer, uint32_t waker) const {
  auto it = by_thread_.find(consumer);
  return it != by_thread_.end() && it->second.producers.count(waker) > 0;
}

uint32_t HandoffModel::main_producer(uint32_t consumer) const {
  auto it = by_thread_.find(consumer);
  return it == by_thread_.end() ? 0 : it->second.main;
}

std::vector<uint32_t> HandoffModel::producers_of(uint32_t consumer) const {
  auto it = by_thread_.find(consumer);
  if (it == by_thread_.end()) return {};
  return {it->second.producers.begin(), it->second.producers.end()};
}

}  // namespace ld::analysis
