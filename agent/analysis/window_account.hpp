// A window's time by cause, with the evidence gathered while charging it: what the walk fills.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cause.hpp"

namespace ld::analysis {

using model::Cause;
using model::kCauseCount;

// Evidence gathered for one cause while charging time to it.
struct CauseEvidence {
  uint64_t best_ns = 0;  // the largest single piece: its strings are kept
  // Null until a piece brings strings: a WindowAccount is made per token gap, and 14 empty
  // objects (one allocation each) were most of its cost.
  nlohmann::json strings;
  std::map<std::string, double> sums;  // counts and ms, summed over the pieces
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
  // interference: which of the window's compute a thread shared between streams did while other
  // requests' prompts were being processed.
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
  uint64_t ns_of(Cause cause) const { return ns[static_cast<size_t>(cause)]; }
  CauseEvidence& evidence_of(Cause cause) { return evidence[static_cast<size_t>(cause)]; }
  // Evidence for `cause` from a piece of `ns`: its strings replace the kept ones when the piece
  // is the largest so far; its sums add up. Nothing when the account keeps no evidence.
  void note(Cause cause, uint64_t ns, nlohmann::json strings,
            std::initializer_list<std::pair<const char*, double>> sums);
};

}  // namespace ld::analysis
