#include "analysis/summary.hpp"

#include <cmath>
#include <limits>

#include "util/time.hpp"

namespace ld::analysis {

using namespace model;

namespace {

double max_of(const std::vector<double>& values) {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (double v : values) {
    if (std::isnan(best) || v > best) best = v;
  }
  return best;
}

RequestRow row_of(const model::Request& request, const std::vector<double>& gaps, int64_t realtime_minus_monotonic_ns) {
  RequestRow row;
  row.id = request.id;
  row.start_unix_ns = mono_to_unix_ns(request.start_ns, realtime_minus_monotonic_ns);
  row.input_bytes = request.input_bytes;
  row.input_tokens = request.input_tokens;
  row.ttft_ms = request.ttft_ms();
  row.tokens = request.token_ns.size();
  // median/stddev give NaN for no gaps (< 2 tokens), as the contract wants.
  row.tpot_median_ms = model::median(gaps);
  row.tpot_stddev_ms = model::stddev(gaps);
  row.tpot_max_ms = max_of(gaps);
  row.complete = request.complete;
  row.start_mono_ns = request.start_ns;
  row.token_mono_ns = request.token_ns;
  row.token_tid = request.token_tid;
  return row;
}

void count_over_thresholds(const RequestRow& row, const std::vector<double>& gaps, const Thresholds& limits,
                           ThresholdCounts& counts) {
  if (row.ttft_ms > limits.ttft_stuck_ms) ++counts.ttft_stuck;
  for (double gap : gaps) {
    if (gap > limits.gap_broken_ms) ++counts.gaps_broken;
    if (gap > limits.gap_spike_ms) ++counts.gaps_spike;
  }
}

TcpSends tcp_sends_of(const model::Timeline& timeline) {
  TcpSends t;
  for (const model::Request& request : timeline.requests) {
    bool read = false, nagle = false;
    // A complete stream's last send held back delays its end, not a token a reader waits for:
    // llama-server sends a last event with empty text right after the last token, and Nagle
    // holds it behind that token's unacknowledged segment (11 of 12 requests on loopback).
    for (size_t i = 0; i < request.token_tcp.size(); ++i) {
      const uint8_t tcp = request.token_tcp[i];
      const bool closes_stream = request.complete && i + 1 == request.token_tcp.size();
      if (!(tcp & model::kTcpRead)) continue;
      read = true;
      ++t.token_sends;
      if (tcp & model::kTcpCork) ++t.corked;
      if (!model::nagle_on(tcp)) continue;
      nagle = true;
      ++t.nagle;
      if (model::held_by_nagle(tcp) && !closes_stream) ++t.held;
    }
    t.requests += read;
    t.nagle_requests += nagle;
  }
  return t;
}

}  // namespace

Report build_report(const model::Timeline& timeline, const Target& target, uint64_t window_start_mono_ns,
                    uint64_t window_end_mono_ns, int64_t realtime_minus_monotonic_ns, const Thresholds& thresholds) {
  Report report;
  report.target = target;
  report.start_unix_ns = mono_to_unix_ns(window_start_mono_ns, realtime_minus_monotonic_ns);
  report.realtime_minus_monotonic_ns = realtime_minus_monotonic_ns;
  report.duration_ms =
      window_end_mono_ns > window_start_mono_ns ? (window_end_mono_ns - window_start_mono_ns) / util::kNsPerMs : 0;
  report.thresholds = thresholds;
  report.non_streaming_requests = timeline.non_streaming_requests;
  report.partial_requests = timeline.partial_requests;
  report.in_flight_requests = timeline.in_flight_requests;
  report.connections = timeline.connections;
  report.multi_event_sends = timeline.multi_event_sends;
  report.tcp_sends = tcp_sends_of(timeline);
  report.send_syscalls = timeline.send_syscalls;

  std::vector<double> ttfts;
  std::vector<double> all_gaps;  // TPOT is judged over every gap, not over per-request medians
  ttfts.reserve(timeline.requests.size());
  size_t gap_count = 0;
  for (const model::Request& request : timeline.requests)
    gap_count += request.token_ns.size() > 1 ? request.token_ns.size() - 1 : 0;
  all_gaps.reserve(gap_count);
  report.request_rows.reserve(timeline.requests.size());
  for (const model::Request& request : timeline.requests) {
    const std::vector<double> gaps = request.gaps_ms();
    RequestRow row = row_of(request, gaps, realtime_minus_monotonic_ns);
    count_over_thresholds(row, gaps, thresholds, report.over_thresholds);
    ttfts.push_back(row.ttft_ms);
    all_gaps.insert(all_gaps.end(), gaps.begin(), gaps.end());
    report.tokens += row.tokens;
    report.request_rows.push_back(std::move(row));
  }
  report.requests = timeline.requests.size();
  report.gaps = all_gaps.size();
  report.ttft_hist = model::make_log_histogram(ttfts);
  report.tpot_hist = model::make_log_histogram(all_gaps);
  report.ttft_ms = model::describe(std::move(ttfts));
  report.tpot_ms = model::describe(std::move(all_gaps));
  return report;
}

}  // namespace ld::analysis
