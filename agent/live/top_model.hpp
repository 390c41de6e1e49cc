// The model behind `top`: TTFT and TPOT of the last 10 s and 60 s from the socket records as
// they arrive (analysis::LiveWatch), and, when a token is slow, the attribution `report` runs
// over the last minute of records (serve::analyze_window), so that each slow token on screen
// carries its cause and culprit. Knows nothing of terminals (top_screen.hpp draws it) or of
// libbpf (the CLI feeds it).
//
// Cost: the records are kept in memory (serve::RecordBuffer) and looked at once each as they
// arrive; the attribution runs only when a slow token waits for its cause, at most once a
// tick (a second), over the look-back.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "analysis/live.hpp"
#include "model/report.hpp"
#include "model/stats.hpp"
#include "rules/rule.hpp"
#include "serve/window.hpp"
#include "trace/trace_header.hpp"

struct ld_hdr;

namespace ld::live {

struct TopOptions {
  double ttft_slow_ms = model::Thresholds{}.ttft_stuck_ms;  // a first token that feels stuck
  double gap_slow_ms = model::Thresholds{}.gap_broken_ms;   // a gap that breaks the sentence
  // Records kept for the attribution: a stream longer than this loses its later gaps (the
  // request line is gone), as in serve's windows.
  uint64_t lookback_ms = 60'000;
  // The attribution reads from the oldest open stream's request on, and at least this far back:
  // enough typical gaps for the outlier rule's median. Its cost follows the streams' length.
  uint64_t min_analysis_ms = 5'000;
  // The attribution's CPU budget, a token bucket: it earns this share of a CPU and holds at most
  // `analysis_burst_ms`; an attribution runs while the bucket is not empty. The first slow
  // token of an incident is explained at the next tick; when slow tokens keep coming, their
  // causes come as the budget allows (the screen counts those waiting).
  double analysis_cpu_share = 0.005;
  double analysis_burst_ms = 150;
  size_t max_buffer_bytes = 256u << 20;
  size_t max_slow_tokens = 200;  // the list keeps the newest
};

// A slow token with what the attribution made of it.
struct SlowToken {
  model::WindowKind kind = model::WindowKind::kTpot;
  std::string request;
  uint64_t token_index = 0;
  double ms = 0;
  double baseline_ms = 0;
  uint64_t end_mono_ns = 0;  // the token's send
  uint64_t end_unix_ns = 0;
  uint32_t tid = 0;
  model::Cause cause = model::Cause::kUnknown;  // the largest
  double cause_ms = 0;
  std::string culprit;                  // the largest cause's evidence in a few words: "fsync /var/log/app.log"
  std::vector<model::CauseTime> split;  // every cause's ms, most first (no evidence)
  uint64_t explained_mono_ns = 0;       // when the model gave it its cause
};

// A finding as the latest attribution that gave it wrote it.
struct SeenFinding {
  model::Finding finding;
  uint64_t last_unix_ns = 0;  // when an attribution last gave it
};

struct TopView {
  model::Distribution ttft_10s, ttft_60s, tpot_10s, tpot_60s;  // ms
  std::vector<double> tpot_p99_by_second;                      // the last 60 s, oldest first; 0 where no gap ended
  std::vector<model::CauseTime> slow_causes_60s;               // the slow tokens' ms by cause, most first
  std::deque<SlowToken> slow;                                  // newest first
  std::vector<SeenFinding> findings;  // every one so far, by rule: most severe, then latest first
  size_t pending = 0;                 // slow tokens seen, their cause not known yet
  uint64_t slow_seen = 0;             // slow first tokens and gaps since the start
  uint64_t records = 0;
  uint64_t records_dropped = 0;  // by the memory cap
  uint64_t analyses = 0;
  double last_analysis_ms = 0;
  double analysis_ms = 0;  // all of them
  bool frozen = false;     // the list takes no new rows
};

class TopModel {
 public:
  TopModel(TopOptions options, std::shared_ptr<const rules::RuleSet> rules);

  void on_start(const trace::TraceHeader& header);
  // The header's targets changed (followed processes, restarts).
  void set_header(const trace::TraceHeader& header) { header_ = header; }
  void on_record(const ld_hdr& rec, size_t size);
  // Once a wake-up: the rolling numbers, and the attribution when a slow token waits for its
  // cause. Returns the slow tokens it explained (line mode prints them as they come).
  std::vector<SlowToken> tick(uint64_t now_mono_ns, const std::vector<model::ProbeStatus>& probes);

  void set_frozen(bool frozen) { view_.frozen = frozen; }
  const TopView& view() const { return view_; }

 private:
  struct Sample {
    uint64_t end_ns;
    double ms;
  };
  void prune(uint64_t now_ns);
  void update_numbers(uint64_t now_ns);
  void remember_findings(std::vector<model::Finding> findings, uint64_t now_unix_ns);
  std::vector<SlowToken> explain(uint64_t now_ns, const std::vector<model::ProbeStatus>& probes);

  TopOptions options_;
  std::shared_ptr<const rules::RuleSet> rules_;
  trace::TraceHeader header_;
  analysis::LiveWatch watch_;
  serve::RecordBuffer buffer_;
  std::deque<Sample> ttft_, tpot_;  // the last 60 s, oldest first
  double budget_ms_ = 0;            // the bucket (starts full: set in the constructor)
  uint64_t budget_at_ns_ = 0;
  std::deque<uint64_t> waiting_;  // slow tokens not yet explained: where their stream began
  // Slow tokens explained in the last two look-backs, the list's or not: a later attribution
  // finds them again (by thread and send time) and leaves them be.
  std::deque<SlowToken> explained_;
  TopView view_;
};

// "12:03:04.512" in local time.
std::string clock_text(uint64_t unix_ns);

}  // namespace ld::live
