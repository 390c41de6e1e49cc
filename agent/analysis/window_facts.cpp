#include "analysis/window_facts.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "analysis/walk_thresholds.hpp"
#include "events.h"
#include "util/spans.hpp"
#include "util/time.hpp"

namespace ld::analysis {

using namespace model;

namespace {

// The GPUs' state over a stretch of the trace (the nvml probe's samples).
struct GpuState {
  size_t samples = 0, throttled = 0;
  double util_sum = 0;
  size_t util_n = 0;
  uint32_t sm_min = ~0u, sm_max_mhz = 0, temp_max = 0, power_max_mw = 0;
  uint64_t limit_reasons = 0, mem_used_max = 0, mem_total = 0;

  void add(const GpuSample& g) {
    ++samples;
    if (g.util != ~0u) {
      util_sum += g.util;
      ++util_n;
    }
    if (g.sm_mhz != ~0u) sm_min = std::min(sm_min, g.sm_mhz);
    if (g.sm_max_mhz != ~0u) sm_max_mhz = std::max(sm_max_mhz, g.sm_max_mhz);
    if (g.temp_c != ~0u) temp_max = std::max(temp_max, g.temp_c);
    if (g.power_mw != ~0u) power_max_mw = std::max(power_max_mw, g.power_mw);
    if (g.throttled()) {
      ++throttled;
      limit_reasons |= g.reasons;
    }
    if (g.mem_used != ~0ULL && g.mem_total != ~0ULL && g.mem_total) {
      mem_used_max = std::max(mem_used_max, g.mem_used);
      mem_total = std::max(mem_total, g.mem_total);
    }
  }
};

// What held the clocks down, in words: the reasons of nvmlClocksEventReason* that are limits.
std::string gpu_limit_names(uint64_t reasons) {
  std::string out;
  auto add = [&](uint64_t bit, const char* name) {
    if (!(reasons & bit) || out.find(name) != std::string::npos) return;
    out += out.empty() ? name : std::string(", ") + name;
  };
  add(LD_GPU_R_SW_THERMAL, "thermal limit");
  add(LD_GPU_R_HW_THERMAL, "thermal limit");
  add(LD_GPU_R_SW_POWER_CAP, "power cap");
  add(LD_GPU_R_HW_POWER_BRAKE, "power brake");
  add(LD_GPU_R_HW_SLOWDOWN, "hardware slowdown");
  return out;
}

// A slow window's GPU state: its samples, or the last one before its end (a window shorter
// than the 200 ms sampling period holds none).
GpuState gpu_state_in(const std::vector<GpuSample>& gpu, uint64_t a, uint64_t b) {
  GpuState s;
  auto it = std::partition_point(gpu.begin(), gpu.end(), [&](const GpuSample& g) { return g.ts_ns < a; });
  for (auto j = it; j != gpu.end() && j->ts_ns <= b; ++j) s.add(*j);
  if (s.samples == 0 && it != gpu.begin()) {
    const uint64_t last = std::prev(it)->ts_ns;
    for (auto j = std::prev(it);; --j) {  // every device's last sample, taken together
      if (j->ts_ns != last || a - last > thresholds::kGpuSampleStaleNs) break;
      s.add(*j);
      if (j == gpu.begin()) break;
    }
  }
  return s;
}

}  // namespace

void note_gpu_queue(model::Outlier& o, const EvidenceStore& store, uint32_t tgid, uint64_t a, uint64_t b) {
  const auto* queued = store.gpu_queued(tgid);
  if (!queued || b <= a) return;
  const uint64_t busy = util::covered_ns(*queued, a, b);
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  o.facts["gpu_queued_ms"] = round1(util::ns_to_ms(busy));
  o.facts["gpu_idle_ms"] = round1(util::ns_to_ms(b - a - busy));
  if (o.causes.empty()) return;
  model::CauseTime& top = o.causes.front();
  if (top.cause == Cause::kGpuBusy || top.cause == Cause::kUnknown) return;
  if (!top.evidence.is_object()) top.evidence = nlohmann::json::object();
  top.evidence["gpu_idle_ms"] = round1(util::ns_to_ms(b - a - busy));
}

void note_gpu_state(model::Outlier& o, const EvidenceStore& store, uint64_t a, uint64_t b) {
  const GpuState s = gpu_state_in(store.gpu_samples(), a, b);
  if (s.samples == 0) return;
  if (s.util_n) o.facts["gpu_util_pct"] = std::round(s.util_sum / static_cast<double>(s.util_n));
  if (s.sm_min != ~0u) o.facts["gpu_sm_mhz"] = s.sm_min;
  o.facts["gpu_throttled"] = s.throttled > 0;
  if (s.throttled) o.facts["gpu_throttle"] = gpu_limit_names(s.limit_reasons);
}

namespace {

// TCP: TIME_WAIT, listen overflows and drops, connections and retransmits.
void tcp_facts(nlohmann::json& f, const EvidenceStore& store, uint64_t start, uint64_t end, uint64_t requests,
               uint64_t duration_ms) {
  const auto& net = store.net_samples();
  if (!net.empty()) {
    uint64_t tw_max = 0;
    for (const auto& n : net) tw_max = std::max(tw_max, n.time_wait);
    f["time_wait_max"] = tw_max;
    f["listen_overflows"] =
        net.back().listen_overflows - std::min(net.back().listen_overflows, net.front().listen_overflows);
    f["listen_drops"] = net.back().listen_drops - std::min(net.back().listen_drops, net.front().listen_drops);
  }
  if (store.tcp_events().empty() && net.empty()) return;
  uint64_t connects = 0, tw_entries = 0;
  for (const auto& e : store.tcp_events()) {
    if (e.established) ++connects;
    if (e.time_wait) ++tw_entries;
  }
  f["connects"] = connects;
  f["time_wait_entries"] = tw_entries;
  f["retransmits"] = store.retransmits_between(start, end + 1);
  if (requests) f["connects_per_request"] = static_cast<double>(connects) / static_cast<double>(requests);
  if (!duration_ms) return;
  // A socket stays in TIME_WAIT for TCP_TIMEWAIT_LEN, 60 s, fixed in the kernel (not
  // tcp_fin_timeout): the rate it enters at, held that long, is the steady state a short trace
  // has not reached yet.
  constexpr double kTimeWaitSeconds = 60;
  const double per_s = static_cast<double>(tw_entries) * 1000.0 / static_cast<double>(duration_ms);
  f["time_wait_per_s"] = std::round(per_s * 10) / 10;
  f["time_wait_projected"] = std::round(per_s * kTimeWaitSeconds);
}

// CPU: the cgroup's throttling and quota, the frequency range, migrations.
void cpu_facts(nlohmann::json& f, const EvidenceStore& store, uint64_t duration_ms) {
  const auto& cg = store.cgroup_samples();
  if (cg.size() >= 2 && cg.back().throttled_ns != ~0ULL && cg.front().throttled_ns != ~0ULL) {
    f["cgroup_throttled_ms"] =
        util::ns_to_ms(cg.back().throttled_ns - std::min(cg.back().throttled_ns, cg.front().throttled_ns));
    f["cgroup_nr_throttled"] = cg.back().nr_throttled - std::min(cg.back().nr_throttled, cg.front().nr_throttled);
  }
  if (!cg.empty() && cg.back().quota_us != ~0ULL && cg.back().period_us && cg.back().period_us != ~0ULL)
    f["cgroup_quota_cpus"] = static_cast<double>(cg.back().quota_us) / static_cast<double>(cg.back().period_us);
  const auto& freq = store.freq_samples();
  if (!freq.empty()) {
    uint32_t lo = ~0u, hi = 0, max_khz = 0;
    for (const auto& s : freq) {
      lo = std::min(lo, s.khz);
      hi = std::max(hi, s.khz);
      max_khz = std::max(max_khz, s.max_khz);
    }
    f["cpu_khz_min"] = lo;
    f["cpu_khz_max"] = hi;
    if (max_khz) f["cpu_freq_min_ratio"] = static_cast<double>(lo) / max_khz;
  }
  uint64_t migrations = 0;
  for (const auto& [tid, t] : store.threads()) migrations += t.migrations;
  if (store.has_sched() && duration_ms)
    f["migrations_per_s"] = static_cast<double>(migrations) * 1000.0 / static_cast<double>(duration_ms);
}

void gpu_facts(nlohmann::json& f, const EvidenceStore& store) {
  if (store.gpu_samples().empty()) return;
  GpuState s;
  std::set<uint32_t> devices;
  for (const GpuSample& g : store.gpu_samples()) {
    s.add(g);
    devices.insert(g.device);
  }
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  f["gpu_devices"] = devices.size();
  if (s.util_n) f["gpu_util_mean"] = std::round(s.util_sum / static_cast<double>(s.util_n));
  if (s.sm_min != ~0u) f["gpu_sm_mhz_min"] = s.sm_min;
  if (s.sm_max_mhz) f["gpu_sm_max_mhz"] = s.sm_max_mhz;
  f["gpu_throttled_share"] = static_cast<double>(s.throttled) / static_cast<double>(s.samples);
  if (s.throttled) f["gpu_throttle"] = gpu_limit_names(s.limit_reasons);
  if (s.temp_max) f["gpu_temp_max_c"] = s.temp_max;
  if (s.power_max_mw) f["gpu_power_max_w"] = std::round(s.power_max_mw / 1000.0);
  if (s.mem_total) {
    f["gpu_mem_used_max_share"] = static_cast<double>(s.mem_used_max) / static_cast<double>(s.mem_total);
    f["gpu_mem_used_max_gib"] = std::round(s.mem_used_max / kGiB * 10) / 10;
    f["gpu_mem_total_gib"] = std::round(s.mem_total / kGiB * 10) / 10;
  }
}

}  // namespace

nlohmann::json window_facts(const EvidenceStore& store, uint64_t start, uint64_t end, uint64_t requests,
                            uint64_t duration_ms) {
  nlohmann::json f = nlohmann::json::object();
  tcp_facts(f, store, start, end, requests, duration_ms);
  cpu_facts(f, store, duration_ms);
  gpu_facts(f, store);
  return f;
}

nlohmann::json outlier_facts(const EvidenceStore& store, const Request& r, const Window& w, bool first_request,
                             uint64_t target_start) {
  nlohmann::json f = nlohmann::json::object();
  f["input_bytes"] = r.input_bytes;
  if (r.input_tokens >= 0) f["input_tokens"] = r.input_tokens;
  f["first_request"] = first_request;
  if (target_start && w.a > target_start) f["since_target_start_ms"] = std::round(util::ns_to_ms(w.a - target_start));
  // Searched, not scanned: a long trace has thousands of outliers and of samples and events.
  const auto& net = store.net_samples();  // sorted by time (EvidenceStore::finish)
  auto after_b = std::partition_point(net.begin(), net.end(), [&](const NetSample& n) { return n.ts_ns <= w.b; });
  if (after_b != net.begin()) f["time_wait"] = std::prev(after_b)->time_wait;  // the last sample by b
  const auto& tcp = store.tcp_events();
  uint64_t connects = 0;
  for (auto it = std::partition_point(tcp.begin(), tcp.end(), [&](const TcpEvent& e) { return e.ts_ns < w.a; });
       it != tcp.end() && it->ts_ns <= w.b; ++it)
    if (it->established) ++connects;
  if (!tcp.empty()) f["connects"] = connects;
  return f;
}

}  // namespace ld::analysis
