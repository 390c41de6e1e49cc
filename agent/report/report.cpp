#include "report/report.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace ld::report {

uint64_t mono_to_unix_ns(uint64_t mono_ns, int64_t realtime_minus_monotonic_ns) {
  const __int128 unix_ns = static_cast<__int128>(mono_ns) + realtime_minus_monotonic_ns;
  if (unix_ns < 0) return 0;
  if (unix_ns > static_cast<__int128>(std::numeric_limits<uint64_t>::max())) {
    return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(unix_ns);
}

namespace {

std::string str(const nlohmann::json& ev, const char* key) {
  auto it = ev.find(key);
  if (it == ev.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return fmt::format("{:.0f}", it->get<double>());
  return "";
}

double num(const nlohmann::json& ev, const char* key) {
  auto it = ev.find(key);
  return it != ev.end() && it->is_number() ? it->get<double>() : 0;
}

std::string bytes_text(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.0f} KiB", bytes / 1024.0);
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ", ";
    out += p;
  }
  return out;
}

double max_of(const std::vector<double>& values) {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (double v : values) {
    if (std::isnan(best) || v > best) best = v;
  }
  return best;
}

RequestRow row_of(const analysis::Request& request, const std::vector<double>& gaps,
                  int64_t realtime_minus_monotonic_ns) {
  RequestRow row;
  row.id = request.id;
  row.start_unix_ns = mono_to_unix_ns(request.start_ns, realtime_minus_monotonic_ns);
  row.input_bytes = request.input_bytes;
  row.input_tokens = request.input_tokens;
  row.ttft_ms = request.ttft_ms();
  row.tokens = request.token_ns.size();
  // median/stddev give NaN for no gaps (< 2 tokens), as the contract wants.
  row.tpot_median_ms = analysis::median(gaps);
  row.tpot_stddev_ms = analysis::stddev(gaps);
  row.tpot_max_ms = max_of(gaps);
  row.complete = request.complete;
  row.start_mono_ns = request.start_ns;
  row.token_mono_ns = request.token_ns;
  row.token_tid = request.token_tid;
  return row;
}

void count_over_thresholds(const RequestRow& row, const std::vector<double>& gaps,
                           const Thresholds& limits, ThresholdCounts& counts) {
  if (row.ttft_ms > limits.ttft_stuck_ms) ++counts.ttft_stuck;
  for (double gap : gaps) {
    if (gap > limits.gap_broken_ms) ++counts.gaps_broken;
    if (gap > limits.gap_spike_ms) ++counts.gaps_spike;
  }
}

}  // namespace

std::string evidence_phrase(const CauseTime& c) {
  const nlohmann::json& ev = c.evidence;
  if (!ev.is_object() || ev.empty()) return "";
  auto who = [&](const char* comm, const char* pid) {
    const std::string name = str(ev, comm), id = str(ev, pid);
    if (name.empty() && id.empty()) return std::string();
    return id.empty() ? name : fmt::format("{} (pid {})", name, id);
  };
  if (c.cause == "disk_io") return join({str(ev, "syscall") + (ev.contains("path") ? " " + str(ev, "path") : "")});
  if (c.cause == "kv_alloc") {
    std::vector<std::string> parts{str(ev, "syscall")};
    if (num(ev, "mmap_bytes") > 0) parts.push_back(bytes_text(num(ev, "mmap_bytes")) + " mapped");
    if (num(ev, "faults") > 0) parts.push_back(fmt::format("{:.0f} page faults", num(ev, "faults")));
    return join(parts);
  }
  if (c.cause == "cpu_contention") {
    const std::string culprit = who("culprit_comm", "culprit_pid");
    return culprit.empty() ? "waiting for a CPU" : "behind " + culprit;
  }
  if (c.cause == "lock_contention") {
    std::string holder = who("holder_comm", "holder_pid");
    if (!holder.empty() && !str(ev, "holder_tid").empty() && str(ev, "holder_tid") != str(ev, "holder_pid"))
      holder.insert(holder.size() - 1, ", thread " + str(ev, "holder_tid"));  // threads share the comm
    return join({holder.empty() ? "" : "lock held by " + holder, ev.contains("uaddr") ? "futex " + str(ev, "uaddr") : ""});
  }
  if (c.cause == "gil") {
    const std::string holder = str(ev, "holder_comm");
    return join({fmt::format("{:.0f} GIL waits", num(ev, "waits")), holder.empty() ? "" : "woken by " + holder,
                 str(ev, "method").empty() ? "" : "via " + str(ev, "method")});
  }
  if (c.cause == "cgroup_throttle") return fmt::format("throttled {:.0f} ms by the CPU quota", num(ev, "throttled_ms"));
  if (c.cause == "time_wait") return fmt::format("{:.0f} ms before the server read the request{}",
                                                   num(ev, "before_server_ms"),
                                                   ev.value("new_connection", false) ? " (new connection)" : "");
  if (c.cause == "app_wait") return str(ev, "syscall");
  if (c.cause == "swap_reclaim") return str(ev, "kind");
  if (c.cause == "cold_start") return "first request after start";
  if (c.cause == "unknown") return str(ev, "woken_by").empty() ? "" : "woken by " + str(ev, "woken_by");
  return str(ev, "syscall");
}

Report build_report(const analysis::Timeline& timeline, const Target& target,
                    uint64_t window_start_mono_ns, uint64_t window_end_mono_ns,
                    int64_t realtime_minus_monotonic_ns, const Thresholds& thresholds) {
  Report report;
  report.target = target;
  report.start_unix_ns = mono_to_unix_ns(window_start_mono_ns, realtime_minus_monotonic_ns);
  report.realtime_minus_monotonic_ns = realtime_minus_monotonic_ns;
  report.duration_ms = window_end_mono_ns > window_start_mono_ns
                           ? (window_end_mono_ns - window_start_mono_ns) / 1'000'000
                           : 0;
  report.thresholds = thresholds;
  report.non_streaming_requests = timeline.non_streaming_requests;
  report.partial_requests = timeline.partial_requests;
  report.in_flight_requests = timeline.in_flight_requests;
  report.connections = timeline.connections;
  report.multi_event_sends = timeline.multi_event_sends;
  report.send_syscalls = timeline.send_syscalls;

  std::vector<double> ttfts;
  std::vector<double> all_gaps;  // TPOT is judged over every gap, not over per-request medians
  ttfts.reserve(timeline.requests.size());
  size_t gap_count = 0;
  for (const analysis::Request& request : timeline.requests)
    gap_count += request.token_ns.size() > 1 ? request.token_ns.size() - 1 : 0;
  all_gaps.reserve(gap_count);
  report.request_rows.reserve(timeline.requests.size());
  for (const analysis::Request& request : timeline.requests) {
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
  report.ttft_ms = analysis::describe(std::move(ttfts));
  report.tpot_ms = analysis::describe(std::move(all_gaps));
  return report;
}

}  // namespace ld::report
