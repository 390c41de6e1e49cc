// Hand-offs. Real servers move every token between threads: an HTTP thread waits on a condition
// variable for the engine loop (llama.cpp), an event loop for an engine thread, an API process
// for an engine process. A thread that regularly wakes a token thread during its typical gaps
// is that thread's producer: a wait it ends is the producer's time, split by what the producer
// did, not lock contention. The model is learned once, from every typical stretch of tokens,
// before any window is walked.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "analysis/evidence.hpp"

namespace ld::analysis {

// Back-to-back typical token gaps sent by one thread: [a, b] holds `gaps` of them.
struct TypicalRun {
  uint32_t tid = 0;
  uint64_t a = 0, b = 0, gaps = 0;
};

class HandoffModel {
 public:
  // Who ends the token threads' waits in their typical runs, then who ends their producers'
  // waits over the same runs, up to the walk's depth (an engine loop that waits for its worker
  // pool each step is handed its work the same way; so is an API process's I/O thread by an
  // engine process's).
  static HandoffModel learn(const EvidenceStore& store, const std::set<uint32_t>& targets,
                            const std::vector<TypicalRun>& runs);

  bool is_producer(uint32_t consumer, uint32_t waker) const;
  // The one producer of most of `consumer`'s wake-ups, or 0.
  uint32_t main_producer(uint32_t consumer) const;
  std::vector<uint32_t> producers_of(uint32_t consumer) const;

 private:
  struct Wakes {
    uint64_t gaps = 0;                   // typical token gaps seen
    std::map<uint32_t, uint64_t> count;  // waker tid -> waits of this thread it ended in them
    std::set<uint32_t> producers;        // wakers of at least kProducerShare of the gaps
    uint32_t main = 0;                   // the producer of most wake-ups, when it has most
  };
  static void decide(Wakes& w);
  std::map<uint32_t, Wakes> by_thread_;
};

}  // namespace ld::analysis
