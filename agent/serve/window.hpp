// Rolling analysis windows for serve: the records of the last minute or so kept in memory, and
// each window analysed by the code `report` runs (analysis::EventAnalyzer, rules::apply_rules).
//
// Counting each observation once: a window ending at cut T counts the first tokens, token gaps
// and outliers whose token was sent in [previous cut, T - settle), but analyses every record
// from (previous cut - look-back) on, so that a request that started up to the look-back
// before is seen whole (its request line, its earlier tokens, the evidence of its windows).
// Streams longer than the look-back lose their later gaps (the request line is gone); records
// are dropped oldest first past the memory cap (docs/deploy.md, "Windows").
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "export/metrics.hpp"
#include "model/report.hpp"
#include "rules/rule.hpp"
#include "trace/trace_header.hpp"

struct ld_hdr;

namespace ld::serve {

// Records as the ring buffer handed them, each at an 8-byte aligned offset.
struct RecordBlock {
  std::vector<uint64_t> words;
  size_t used_bytes = 0;
  uint64_t records = 0;
  uint64_t min_ts = UINT64_MAX;
  uint64_t max_ts = 0;
  // Calls fn(const ld_hdr&, size) for each record in arrival order.
  template <typename Fn>
  void for_each(Fn&& fn) const;
};

// Owned by the recording thread: append, seal, drop. Sealed blocks are immutable and shared
// with the analysis thread.
class RecordBuffer {
 public:
  explicit RecordBuffer(size_t max_bytes, size_t block_bytes = 1u << 20)
      : max_bytes_(max_bytes), block_bytes_(block_bytes) {}
  void append(const ld_hdr& rec, size_t size);
  // Every block, the open one sealed first.
  std::vector<std::shared_ptr<const RecordBlock>> snapshot();
  // Drops the blocks whose every record is older than `ts`.
  void drop_before(uint64_t ts);
  size_t bytes() const { return bytes_; }
  uint64_t records() const;
  // Records dropped by the memory cap since the last call.
  uint64_t take_dropped() {
    uint64_t d = dropped_;
    dropped_ = 0;
    return d;
  }

 private:
  void seal();
  size_t max_bytes_;
  size_t block_bytes_;
  std::deque<std::shared_ptr<const RecordBlock>> sealed_;
  std::shared_ptr<RecordBlock> open_;
  size_t bytes_ = 0;
  uint64_t dropped_ = 0;
};

struct WindowInput {
  std::vector<std::shared_ptr<const RecordBlock>> blocks;
  trace::TraceHeader header;               // the session's, targets as they are now
  std::vector<model::ProbeStatus> probes;  // the probes' table now
  uint64_t count_from_ns = 0;              // observations counted: [count_from, count_to)
  uint64_t count_to_ns = 0;
  uint64_t end_ns = 0;  // the cut (the analysed range's end)
};

struct WindowResult {
  model::Report report;  // of the whole analysed range, findings applied
  exporter::WindowObservations observed;
  std::vector<size_t> outliers;  // the ones counted: indices into report.outliers
  uint64_t records = 0;
  double analysis_seconds = 0;
  double ttft_p99_s = 0;  // of the counted first tokens; 0 when none
};

// Runs EventAnalyzer + rules over the input's records; counts what falls in the window.
WindowResult analyze_window(const WindowInput& input, const rules::RuleSet& rules);

// The counting step alone (unit-tested on synthetic reports): TTFTs, gaps and outliers of
// `report` whose token was sent in [from, to), and the report's findings.
void count_window(const model::Report& report, uint64_t from_ns, uint64_t to_ns, WindowResult& out);

// Nearest-rank p99 of `values` (0 when empty).
double p99(std::vector<double> values);

template <typename Fn>
void RecordBlock::for_each(Fn&& fn) const {
  const auto* base = reinterpret_cast<const unsigned char*>(words.data());
  size_t off = 0;
  while (off + 8 <= used_bytes) {
    const auto* rec = reinterpret_cast<const ld_hdr*>(base + off);
    const size_t size = *reinterpret_cast<const uint16_t*>(base + off + 2);  // ld_hdr.size
    if (size < 8) break;
    fn(*rec, size);
    off += (size + 7) & ~size_t{7};
  }
}

}  // namespace ld::serve
