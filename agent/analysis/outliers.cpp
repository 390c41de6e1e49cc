// Outlier detection, the TTFT baseline fit, periodicity, window facts and the report's
// attribution section (attribute() in attribution.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "analysis/attribution.hpp"
#include "analysis/interference.hpp"
#include "events.h"
#include "model/stats.hpp"
#include "util/spans.hpp"

namespace ld::analysis {

using namespace model;
namespace {

constexpr double kNsPerMs = 1e6;
double ms(uint64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

// A GPU engine's slow window: how long the GPU had work queued in it and how long it sat idle
// (inferred from the CUDA calls, EvidenceStore::gpu_queued). A window whose time went to the CPU
// side (the engine computing, waiting for a CPU, for the GIL) with the GPU idle says so on its
// top cause: the GPU waited for the host, not the other way round.
void note_gpu_queue(model::Outlier& o, const EvidenceStore& store, uint32_t tgid, uint64_t a, uint64_t b) {
  const auto* queued = store.gpu_queued(tgid);
  if (!queued || b <= a) return;
  const uint64_t busy = util::covered_ns(*queued, a, b);
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  o.facts["gpu_queued_ms"] = round1(ms(busy));
  o.facts["gpu_idle_ms"] = round1(ms(b - a - busy));
  if (o.causes.empty()) return;
  model::CauseTime& top = o.causes.front();
  if (top.cause == Cause::kGpuBusy || top.cause == Cause::kUnknown) return;
  if (!top.evidence.is_object()) top.evidence = nlohmann::json::object();
  top.evidence["gpu_idle_ms"] = round1(ms(b - a - busy));
}

// The GPUs' state over a stretch of the trace (the nvml probe's samples).
struct GpuState {
  size_t samples = 0, throttled = 0;
  double util_sum = 0;
  size_t util_n = 0;
  uint32_t sm_min = ~0u, sm_max_mhz = 0, temp_max = 0, power_max_mw = 0;
  uint64_t limit_reasons = 0, mem_used_max = 0, mem_total = 0;

  void add(const GpuSample& g) {
    ++samples;
    if (g.util != ~0u) { util_sum += g.util; ++util_n; }
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
  constexpr uint64_t kStaleNs = 1'000'000'000;
  GpuState s;
  auto it = std::partition_point(gpu.begin(), gpu.end(), [&](const GpuSample& g) { return g.ts_ns < a; });
  for (auto j = it; j != gpu.end() && j->ts_ns <= b; ++j) s.add(*j);
  if (s.samples == 0 && it != gpu.begin()) {
    const uint64_t last = std::prev(it)->ts_ns;
    for (auto j = std::prev(it);; --j) {  // every device's last sample, taken together
      if (j->ts_ns != last || a - last > kStaleNs) break;
      s.add(*j);
      if (j == gpu.begin()) break;
    }
  }
  return s;
}

void note_gpu_state(model::Outlier& o, const EvidenceStore& store, uint64_t a, uint64_t b) {
  const GpuState s = gpu_state_in(store.gpu_samples(), a, b);
  if (s.samples == 0) return;
  if (s.util_n) o.facts["gpu_util_pct"] = std::round(s.util_sum / static_cast<double>(s.util_n));
  if (s.sm_min != ~0u) o.facts["gpu_sm_mhz"] = s.sm_min;
  o.facts["gpu_throttled"] = s.throttled > 0;
  if (s.throttled) o.facts["gpu_throttle"] = gpu_limit_names(s.limit_reasons);
}

double mad(std::vector<double> values, double center) { return mad_in_place(values, center); }

// A window to attribute: [a, b] on the thread that sent the token at b.
struct Window {
  WindowKind kind;
  size_t request = 0;  // index into the timeline
  uint64_t token_index = 0;
  uint64_t a = 0, b = 0;
  uint64_t walk_from = 0;  // the server saw the request at this time (jsonl: may be after a)
  uint32_t tid = 0;
  double baseline_ms = 0;
};

// The token thread's steps as a person reads them: neighbours of the same name merged, then the
// longest kActivitySteps kept in their order (a 300 ms fsync matters, a hundred 1 ms waits
// between tokens do not). A thread that did the same few things hundreds of times (GIL waits
// between bytecodes) is told as totals instead: "GIL wait 324 ms x3648, running 15 ms".
constexpr size_t kActivitySteps = 8;
constexpr uint64_t kActivityMinNs = 500'000;
constexpr double kActivityInOrderShare = 0.6;  // the kept steps must tell this much of the time

std::vector<model::ActivityStep> activity_of(const std::vector<WindowAccount::Step>& steps) {
  struct Piece {
    std::string what;
    uint64_t ns = 0;
    uint32_t times = 1;
  };
  std::vector<Piece> merged;
  uint64_t total = 0;
  for (const auto& s : steps) {
    total += s.b - s.a;
    if (!merged.empty() && merged.back().what == s.what) merged.back().ns += s.b - s.a;
    else merged.push_back({s.what, s.b - s.a});
  }
  auto keep_longest = [](const std::vector<Piece>& pieces) {
    std::vector<uint64_t> lengths;
    for (const Piece& p : pieces)
      if (p.ns >= kActivityMinNs) lengths.push_back(p.ns);
    std::sort(lengths.rbegin(), lengths.rend());
    const uint64_t cut = lengths.size() > kActivitySteps ? lengths[kActivitySteps - 1] : kActivityMinNs;
    std::vector<Piece> kept;
    for (const Piece& p : pieces)
      if (p.ns >= cut && kept.size() < kActivitySteps) kept.push_back(p);
    return kept;
  };
  std::vector<Piece> kept = keep_longest(merged);
  uint64_t told = 0;
  for (const Piece& p : kept) told += p.ns;
  if (static_cast<double>(told) < kActivityInOrderShare * static_cast<double>(total)) {
    std::vector<Piece> totals;  // by name, in the order each first happened
    for (const Piece& p : merged) {
      auto it = std::find_if(totals.begin(), totals.end(), [&](const Piece& t) { return t.what == p.what; });
      if (it == totals.end()) totals.push_back({p.what, p.ns, 1});
      else it->ns += p.ns, it->times++;
    }
    kept = keep_longest(totals);
  }
  std::vector<model::ActivityStep> out;
  for (const Piece& p : kept) out.push_back({p.what, std::round(ms(p.ns) * 10) / 10, p.times});
  return out;
}

std::vector<model::CauseTime> causes_of(const WindowAccount& acc, uint64_t window_ns) {
  std::vector<model::CauseTime> causes;
  for (size_t c = 0; c < kCauseCount; ++c) {
    if (acc.ns[c] < 50'000) continue;  // under 0.05 ms: rounding dust of the walk, not a cause
    model::CauseTime ct;
    ct.cause = static_cast<Cause>(c);
    ct.ms = ms(acc.ns[c]);
    ct.share = window_ns ? static_cast<double>(acc.ns[c]) / static_cast<double>(window_ns) : 0;
    ct.evidence = acc.evidence[c].strings.is_null() ? nlohmann::json::object() : acc.evidence[c].strings;
    for (const auto& [key, value] : acc.evidence[c].sums) {
      if (value == std::floor(value) && std::fabs(value) < 9e15) ct.evidence[key] = static_cast<int64_t>(value);
      else ct.evidence[key] = std::round(value * 1000.0) / 1000.0;
    }
    causes.push_back(std::move(ct));
  }
  std::sort(causes.begin(), causes.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
  return causes;
}

// The server-side request a token-log request corresponds to: the one whose first token send
// is nearest before the log's first token (the client receives after the server sends).
std::vector<const Request*> match_server(const Timeline& log, const Timeline* server) {
  std::vector<const Request*> matched(log.requests.size(), nullptr);
  if (!server) return matched;
  std::vector<bool> used(server->requests.size(), false);
  for (size_t i = 0; i < log.requests.size(); ++i) {
    const Request& r = log.requests[i];
    if (r.token_ns.empty()) continue;
    int64_t best = -1;
    uint64_t best_gap = 50'000'000;  // 50 ms: clocks are aligned to well under that
    for (size_t j = 0; j < server->requests.size(); ++j) {
      const Request& s = server->requests[j];
      if (used[j] || s.token_ns.empty()) continue;
      const uint64_t gap = s.token_ns[0] > r.token_ns[0] ? s.token_ns[0] - r.token_ns[0] : r.token_ns[0] - s.token_ns[0];
      if (gap < best_gap) { best_gap = gap; best = static_cast<int64_t>(j); }
    }
    if (best >= 0) {
      used[best] = true;
      matched[i] = &server->requests[best];
    }
  }
  return matched;
}

uint32_t token_thread(const Request& r, const Request* server, size_t token) {
  const Request& source = server ? *server : r;
  if (token < source.token_tid.size() && source.token_tid[token]) return source.token_tid[token];
  for (uint32_t tid : source.token_tid)
    if (tid) return tid;
  return 0;
}

double input_of(const Request& r) {
  return r.input_tokens >= 0 ? static_cast<double>(r.input_tokens) : static_cast<double>(r.input_bytes);
}

// The outlier windows; every other token gap goes to on_typical(const Window&) as it is found
// (a trace has millions: they are walked, not kept).
template <class OnTypical>
std::vector<Window> find_outliers(const Timeline& timeline, const std::vector<const Request*>& server,
                                  const model::OutlierConfig& config, model::TtftFit& fit,
                                  OnTypical on_typical) {
  std::vector<Window> out;
  // TPOT: every gap against the pooled median + k * MAD, and an absolute floor.
  std::vector<double> gaps;
  size_t gap_count = 0;
  for (const Request& r : timeline.requests) gap_count += r.token_ns.size() > 1 ? r.token_ns.size() - 1 : 0;
  gaps.reserve(gap_count);
  for (const Request& r : timeline.requests)
    for (size_t k = 1; k < r.token_ns.size(); ++k)
      gaps.push_back((static_cast<double>(r.token_ns[k]) - static_cast<double>(r.token_ns[k - 1])) / 1e6);
  // In place: the gaps are not needed after their median and MAD.
  const double gap_median = percentile_in_place(gaps, 50.0);
  const double gap_mad = mad_in_place(gaps, gap_median);
  const double gap_limit = std::max(gap_median + config.tpot_mad_k * gap_mad, config.tpot_floor_ms);
  // TTFT: against a*sqrt(input)+b fitted robustly (or the median when inputs do not vary).
  std::vector<double> inputs, ttfts;
  bool tokens_known = !timeline.requests.empty();
  for (const Request& r : timeline.requests) tokens_known = tokens_known && r.input_tokens >= 0;
  for (const Request& r : timeline.requests) {
    inputs.push_back(input_of(r));
    ttfts.push_back(r.ttft_ms());
  }
  fit = fit_ttft(inputs, ttfts);
  fit.input = tokens_known ? "tokens" : "bytes";
  const double ttft_median = median(ttfts);
  std::vector<double> residuals;
  for (size_t i = 0; i < ttfts.size(); ++i) {
    const double base = fit.valid ? fit.a * std::sqrt(inputs[i]) + fit.b : ttft_median;
    residuals.push_back(ttfts[i] - base);
  }
  const double resid_spread = mad(residuals, median(residuals));

  for (size_t i = 0; i < timeline.requests.size(); ++i) {
    const Request& r = timeline.requests[i];
    if (r.token_ns.empty()) continue;
    const Request* s = server[i];
    const double base = fit.valid ? std::max(0.0, fit.a * std::sqrt(inputs[i]) + fit.b) : ttft_median;
    const double ttft = r.ttft_ms();
    const double limit = std::max({base * config.ttft_margin, base + config.ttft_floor_ms,
                                   base + config.tpot_mad_k * resid_spread});
    if (std::isfinite(ttft) && ttft > limit) {
      Window w{WindowKind::kTtft, i, 0, r.start_ns, r.token_ns[0], r.start_ns, token_thread(r, s, 0), base};
      if (s && s->start_ns > r.start_ns && s->start_ns < r.token_ns[0]) w.walk_from = s->start_ns;
      out.push_back(w);
    }
    for (size_t k = 1; k < r.token_ns.size(); ++k) {
      Window w{WindowKind::kTpot, i, k, r.token_ns[k - 1], r.token_ns[k], r.token_ns[k - 1], token_thread(r, s, k), gap_median};
      if (ms(w.b - w.a) > gap_limit) out.push_back(w);
      else on_typical(w);
    }
  }
  return out;
}

// What the trace says about the whole window: TIME_WAIT, overflows, throttling, frequency.
nlohmann::json window_facts(const EvidenceStore& store, uint64_t start, uint64_t end, uint64_t requests,
                            uint64_t duration_ms) {
  nlohmann::json f = nlohmann::json::object();
  const auto& net = store.net_samples();
  if (!net.empty()) {
    uint64_t tw_max = 0;
    for (const auto& n : net) tw_max = std::max(tw_max, n.time_wait);
    f["time_wait_max"] = tw_max;
    f["listen_overflows"] = net.back().listen_overflows - std::min(net.back().listen_overflows, net.front().listen_overflows);
    f["listen_drops"] = net.back().listen_drops - std::min(net.back().listen_drops, net.front().listen_drops);
  }
  uint64_t connects = 0, tw_entries = 0;
  for (const auto& e : store.tcp_events()) {
    if (e.established) ++connects;
    if (e.time_wait) ++tw_entries;
  }
  if (!store.tcp_events().empty() || !net.empty()) {
    f["connects"] = connects;
    f["time_wait_entries"] = tw_entries;
    f["retransmits"] = store.retransmits_between(start, end + 1);
    if (requests) f["connects_per_request"] = static_cast<double>(connects) / static_cast<double>(requests);
    if (duration_ms) {
      // A socket stays in TIME_WAIT for TCP_TIMEWAIT_LEN, 60 s, fixed in the kernel (not
      // tcp_fin_timeout): the rate it enters at, held that long, is the steady state a short
      // trace has not reached yet.
      constexpr double kTimeWaitSeconds = 60;
      const double per_s = static_cast<double>(tw_entries) * 1000.0 / static_cast<double>(duration_ms);
      f["time_wait_per_s"] = std::round(per_s * 10) / 10;
      f["time_wait_projected"] = std::round(per_s * kTimeWaitSeconds);
    }
  }
  const auto& cg = store.cgroup_samples();
  if (cg.size() >= 2 && cg.back().throttled_ns != ~0ULL && cg.front().throttled_ns != ~0ULL) {
    f["cgroup_throttled_ms"] = ms(cg.back().throttled_ns - std::min(cg.back().throttled_ns, cg.front().throttled_ns));
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
  if (!store.gpu_samples().empty()) {
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
  uint64_t migrations = 0;
  for (const auto& [tid, t] : store.threads()) migrations += t.migrations;
  if (store.has_sched() && duration_ms) f["migrations_per_s"] = static_cast<double>(migrations) * 1000.0 / static_cast<double>(duration_ms);
  return f;
}

nlohmann::json outlier_facts(const EvidenceStore& store, const Request& r, const Window& w,
                             bool first_request, uint64_t target_start) {
  nlohmann::json f = nlohmann::json::object();
  f["input_bytes"] = r.input_bytes;
  if (r.input_tokens >= 0) f["input_tokens"] = r.input_tokens;
  f["first_request"] = first_request;
  if (target_start && w.a > target_start) f["since_target_start_ms"] = std::round(ms(w.a - target_start));
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

// One-off initialisation: the first request of a freshly started target took longer than its
// baseline and no later request was slow like it. The excess is `cold_start`; what it was made
// of stays in the evidence.
// Only the target's own work can be initialisation: computing, allocating, reading files. A first
// request that waited behind a neighbour, a quota, a lock or the GIL keeps that cause.
bool looks_like_own_work(const model::Outlier& o) {
  double own = 0;
  for (const auto& c : o.causes)
    if (c.cause == Cause::kCompute || c.cause == Cause::kKvAlloc || c.cause == Cause::kDiskIo ||
        c.cause == Cause::kSwapReclaim || c.cause == Cause::kUnknown)
      own += c.ms;
  return own >= 0.5 * o.duration_ms;
}

void apply_cold_start(model::Outlier& o, double since_start_ms) {
  const double excess = o.duration_ms - o.baseline_ms;
  if (excess <= 0 || o.duration_ms <= 0 || !looks_like_own_work(o)) return;
  nlohmann::json made_of = nlohmann::json::object();
  const double keep = o.baseline_ms / o.duration_ms;
  for (auto& c : o.causes) {
    made_of[std::string(model::cause_id(c.cause))] = std::round(c.ms * 10) / 10;
    c.ms *= keep;
    c.share = c.ms / o.duration_ms;
  }
  model::CauseTime cold;
  cold.cause = Cause::kColdStart;
  cold.ms = excess;
  cold.share = excess / o.duration_ms;
  cold.evidence = {{"first_request", true}, {"made_of", made_of}};
  if (since_start_ms >= 0) cold.evidence["since_start_ms"] = std::round(since_start_ms);
  o.causes.push_back(std::move(cold));
  std::erase_if(o.causes, [](const model::CauseTime& c) { return c.ms < 0.05; });  // scaled to dust
  std::sort(o.causes.begin(), o.causes.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
}

// A slow token that computed far more than the typical token ran extra code: how much more,
// and what its CPU samples saw (user code as a share; the kernel functions and syscalls by
// name). The token thread's samples, and its producer's when another thread makes its tokens.
void describe_extra_code(model::Outlier& o, const Attributor& attributor, uint32_t tid, uint64_t a, uint64_t b,
                         double typical_compute_ms) {
  auto compute = std::find_if(o.causes.begin(), o.causes.end(),
                              [](const model::CauseTime& c) { return c.cause == Cause::kCompute; });
  if (compute == o.causes.end() || compute->ms <= typical_compute_ms) return;
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  compute->evidence["excess_ms"] = round1(compute->ms - typical_compute_ms);
  compute->evidence["typical_ms"] = round1(typical_compute_ms);
  std::vector<uint32_t> tids{tid};
  if (const uint32_t producer = attributor.main_producer(tid)) tids.push_back(producer);
  const Attributor::HotCode hot = attributor.hot_code(tids, a, b);
  if (hot.samples == 0) return;
  auto listed = [](const std::vector<std::pair<std::string, double>>& items) {
    std::string out;
    for (const auto& [name, share] : items) out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", name, share * 100);
    return out;
  };
  compute->evidence["samples"] = hot.samples;
  compute->evidence["user_share"] = std::round(hot.user_share * 100) / 100;
  if (!hot.kernel_frames.empty()) compute->evidence["kernel_frames"] = listed(hot.kernel_frames);
  if (!hot.syscalls.empty()) compute->evidence["in_syscalls"] = listed(hot.syscalls);
}

std::string culprit_of(const model::Outlier& o) {
  if (o.causes.empty()) return "";
  const auto& top = o.causes.front();
  std::string who;
  for (const char* key : {"holder_comm", "culprit_comm", "path", "syscall"}) {
    if (top.evidence.contains(key) && top.evidence[key].is_string() && !top.evidence[key].get<std::string>().empty()) {
      who = top.evidence[key].get<std::string>();
      break;
    }
  }
  const std::string cause(model::cause_id(top.cause));
  return who.empty() ? cause : cause + " (" + who + ")";
}

}  // namespace

model::TtftFit fit_ttft(const std::vector<double>& input, const std::vector<double>& ttft_ms,
                         std::vector<bool>* inlier) {
  model::TtftFit fit;
  std::vector<double> xs, ys;
  for (size_t i = 0; i < input.size() && i < ttft_ms.size(); ++i) {
    if (!std::isfinite(ttft_ms[i]) || input[i] <= 0) continue;
    xs.push_back(std::sqrt(input[i]));
    ys.push_back(ttft_ms[i]);
  }
  std::vector<double> distinct = xs;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.size() < 3) return fit;
  // Theil-Sen: the median of pairwise slopes ignores up to ~29% of spikes, which a least-squares
  // fit would bend towards. Pairs are thinned on large traces (O(n^2)).
  std::vector<double> slopes;
  const size_t n = xs.size();
  const size_t stride = std::max<size_t>(1, n / 700);
  for (size_t i = 0; i < n; i += stride)
    for (size_t j = i + 1; j < n; j += stride)
      if (xs[j] != xs[i]) slopes.push_back((ys[j] - ys[i]) / (xs[j] - xs[i]));
  fit.a = std::max(0.0, median(slopes));  // TTFT does not fall with input length
  std::vector<double> intercepts;
  for (size_t i = 0; i < n; ++i) intercepts.push_back(ys[i] - fit.a * xs[i]);
  fit.b = median(intercepts);
  // R^2 over the inliers (residual within 3 robust sd), which is also what n counts.
  std::vector<double> resid;
  for (size_t i = 0; i < n; ++i) resid.push_back(ys[i] - (fit.a * xs[i] + fit.b));
  const double spread = 1.4826 * mad(resid, median(resid));
  double mean_y = 0;
  std::vector<size_t> keep;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(resid[i]) <= std::max(3 * spread, 1e-9)) keep.push_back(i);
  if (keep.empty()) return fit;
  for (size_t i : keep) mean_y += ys[i];
  mean_y /= static_cast<double>(keep.size());
  double ss_res = 0, ss_tot = 0;
  for (size_t i : keep) {
    ss_res += resid[i] * resid[i];
    ss_tot += (ys[i] - mean_y) * (ys[i] - mean_y);
  }
  fit.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  fit.n = keep.size();
  fit.valid = true;
  if (inlier) {
    inlier->assign(n, false);
    for (size_t i : keep) (*inlier)[i] = true;
  }
  return fit;
}

model::Periodicity find_period(std::vector<uint64_t> ends) {
  model::Periodicity p;
  if (ends.size() < 3) return p;
  std::sort(ends.begin(), ends.end());
  // Outliers within 0.5 s of each other are one event (one scrape can hurt several streams).
  std::vector<uint64_t> events;
  std::vector<uint64_t> members;
  for (uint64_t t : ends) {
    if (events.empty() || t - events.back() > 500'000'000ULL) {
      events.push_back(t);
      members.push_back(1);
    } else {
      members.back()++;
    }
  }
  if (events.size() < 3) return p;
  std::vector<double> diffs;
  for (size_t i = 1; i < events.size(); ++i) diffs.push_back(static_cast<double>(events[i] - events[i - 1]) / 1e9);
  // The period is the largest spacing that every gap between events is (nearly) a multiple
  // of: events can be missed (a scrape that fell between two requests), so the median gap can
  // be two periods. Candidates: each gap divided by 1..4, largest first.
  // A grid so fine that most gaps span many periods explains any times: at most half an
  // event may be missed per gap on average.
  // Each test stops at the first sign it cannot pass: with thousands of outliers that are not
  // periodic, every candidate is tried, and a full pass each would be quadratic.
  const double n = static_cast<double>(diffs.size());
  auto fits = [&](double period) {
    double off_grid = 0, periods = 0;
    for (double d : diffs) {
      const double k = std::round(d / period);
      if (!(k >= 1 && std::fabs(d / period - k) <= 0.1) && ++off_grid > 0.2 * n) return false;
      if ((periods += std::max(1.0, k)) > 1.5 * n) return false;
    }
    return true;
  };
  std::vector<double> candidates;
  for (double d : diffs)
    for (int k = 1; k <= 4; ++k)
      if (d / k >= 1.0) candidates.push_back(d / k);
  std::sort(candidates.rbegin(), candidates.rend());
  double period = 0;
  for (double c : candidates)
    if (fits(c)) { period = c; break; }
  if (period <= 0) return p;
  p.found = true;
  p.period_s = std::round(period * 100) / 100;
  p.outliers = ends.size();
  return p;
}

void attribute(model::Report& report, const Timeline& timeline, const Timeline* server,
               const EvidenceStore& store, const std::set<uint32_t>& target_tgids,
               uint64_t target_start_mono_ns) {
  const auto matched = match_server(timeline, server);
  report.attributed = !store.empty();
  Attributor attributor(store, target_tgids);
  // The typical token: the same accounting over every gap that is not an outlier, summed as the
  // gaps are found. Back-to-back typical gaps sent by one thread (a request's tokens between its
  // outliers) are walked as one span: the same time, one walk instead of one per token, which
  // was most of the analysis of a long trace. Splitting a span only prorates samples and short
  // slices at more boundaries.
  WindowAccount typical_sum;
  typical_sum.with_evidence = false;  // only the times are summed: evidence for every gap was waste
  uint64_t typical_ns = 0;
  struct Run {
    uint32_t tid;
    uint64_t a, b, gaps;
  };
  std::vector<Run> runs;
  auto on_typical = [&](const Window& w) {
    if (!report.attributed || w.tid == 0) return;
    if (!runs.empty() && w.tid == runs.back().tid && w.a == runs.back().b) {
      runs.back().b = w.b;
      runs.back().gaps++;
    } else {
      runs.push_back({w.tid, w.a, w.b, 1});
    }
    typical_ns += w.b - w.a;
    report.typical.windows++;
  };
  std::vector<Window> windows = find_outliers(timeline, matched, report.outlier_config, report.ttft_fit, on_typical);
  // Who hands each token thread its tokens is learned from the typical gaps, before any window
  // is accounted: the typical token's waits are hand-offs as much as the outliers' are.
  for (const Run& r : runs) attributor.learn_handoffs(r.tid, r.a, r.b, r.gaps);
  attributor.finish_learning();
  // And the producers' own hand-offs over the same gaps: an engine loop that waits for its
  // worker pool each step (llama.cpp's main loop and its threads) is handed its work the same way.
  std::set<uint32_t> token_threads;
  for (const Run& r : runs) token_threads.insert(r.tid);
  for (const Run& r : runs)
    for (uint32_t producer : attributor.producers_of(r.tid))
      if (!token_threads.count(producer)) attributor.learn_handoffs(producer, r.a, r.b, r.gaps);
  attributor.finish_learning();
  for (const Run& r : runs) attributor.account_into(typical_sum, r.tid, r.a, r.b);
  const double typical_compute_ms =
      report.typical.windows ? ms(typical_sum.ns_of(Cause::kCompute)) / static_cast<double>(report.typical.windows) : 0;
  const BatchInterference interference(timeline, server ? *server : timeline, attributor);
  const uint64_t first_start = timeline.requests.empty() ? 0 : timeline.requests.front().start_ns;
  // The first request counts as "first since start" when the target started shortly before the
  // trace saw it (otherwise earlier requests may have warmed it up before we attached).
  const bool fresh_target = target_start_mono_ns && first_start > target_start_mono_ns &&
                            first_start - target_start_mono_ns < 120'000'000'000ULL;
  size_t later_ttft_outliers = 0;
  for (const Window& w : windows)
    if (w.kind == WindowKind::kTtft && w.request != 0) later_ttft_outliers++;
  std::vector<uint64_t> ends;
  for (const Window& w : windows) {
    const Request& r = timeline.requests[w.request];
    model::Outlier o;
    o.kind = w.kind;
    o.request = r.id;
    o.token_index = w.token_index;
    o.start_mono_ns = w.a;
    o.end_mono_ns = w.b;
    o.start_unix_ns = model::mono_to_unix_ns(w.a, report.realtime_minus_monotonic_ns);
    o.duration_ms = ms(w.b - w.a);
    o.baseline_ms = std::round(w.baseline_ms * 1000) / 1000;
    o.tid = w.tid;
    uint64_t own_ns = 0, gil_engine_ns = 0;
    size_t own_threads = 0;
    if (report.attributed && w.tid == 0) {
      o.causes = {{Cause::kUnknown, o.duration_ms, 1.0, nlohmann::json::object()}};  // no thread sent it
    } else if (report.attributed) {
      WindowAccount acc;
      if (w.walk_from > w.a) {
        // Before the server saw the request: connection set-up and transport.
        const uint64_t pre = w.walk_from - w.a;
        const bool new_conn = matched[w.request] && matched[w.request]->index_on_connection == 1;
        const Cause c = new_conn ? Cause::kTimeWait : Cause::kNetwork;
        acc.charge(c, pre);
        acc.evidence_of(c).strings = {{"before_server_ms", std::round(ms(pre) * 10) / 10},
                                      {"new_connection", new_conn}};
      }
      acc.keep_steps = true;
      acc.keep_compute = true;
      attributor.account_into(acc, w.tid, w.walk_from, w.b);
      // What the window computes anyway stays compute: a typical gap's compute, or for a first
      // token its whole baseline (its own prefill).
      const bool ttft = w.kind == WindowKind::kTtft;
      const double own_ms = ttft ? w.baseline_ms : typical_compute_ms;
      if (std::isfinite(own_ms))
        interference.apply(acc, w.request, w.walk_from, w.b, static_cast<uint64_t>(std::max(0.0, own_ms) * kNsPerMs), ttft);
      o.causes = causes_of(acc, w.b - w.a);
      o.activity = activity_of(acc.steps);
      // Extra code is compute beyond that same own work: a long prompt's prefill is not.
      describe_extra_code(o, attributor, w.tid, w.walk_from, w.b, std::isfinite(own_ms) ? own_ms : typical_compute_ms);
      own_ns = acc.own_contention_ns;
      gil_engine_ns = acc.gil_engine_ns;
      own_threads = acc.own_culprits.size();
    }
    o.facts = outlier_facts(store, r, w, w.request == 0, target_start_mono_ns);
    note_gpu_queue(o, store, r.tgid, w.a, w.b);
    note_gpu_state(o, store, w.a, w.b);
    if (gil_engine_ns) o.facts["gil_engine_ms"] = std::round(ms(gil_engine_ns) * 10) / 10;
    if (own_ns) {  // runnable behind the server's own threads
      o.facts["own_contention_ms"] = std::round(ms(own_ns) * 10) / 10;
      o.facts["own_busy_threads"] = own_threads;
    }
    if (report.attributed && w.kind == WindowKind::kTtft && w.request == 0 && fresh_target && later_ttft_outliers == 0)
      apply_cold_start(o, ms(w.a - target_start_mono_ns));
    ends.push_back(w.b);
    report.outliers.push_back(std::move(o));
  }
  if (report.attributed) {
    report.typical.total_ms = ms(typical_ns);
    report.typical.causes = causes_of(typical_sum, typical_ns);
    report.typical.own_contention_ms = ms(typical_sum.own_contention_ns);
    report.typical.gil_engine_ms = ms(typical_sum.gil_engine_ns);
    report.typical.own_busy_threads = typical_sum.own_culprits.size();
    for (auto& c : report.typical.causes) c.evidence = nlohmann::json::object();
  }
  report.periodicity = find_period(ends);
  if (report.periodicity.found) {
    std::map<std::string, size_t> votes;
    for (const auto& o : report.outliers) votes[culprit_of(o)]++;
    auto best = std::max_element(votes.begin(), votes.end(), [](auto& x, auto& y) { return x.second < y.second; });
    if (best != votes.end()) report.periodicity.coincides = best->first;
  }
  const uint64_t start = timeline.requests.empty() ? 0 : timeline.requests.front().start_ns;
  uint64_t end = start;
  for (const Request& r : timeline.requests)
    if (!r.token_ns.empty()) end = std::max(end, r.token_ns.back());
  report.window_facts = window_facts(store, start, end, timeline.requests.size(), report.duration_ms);
}

}  // namespace ld::analysis
