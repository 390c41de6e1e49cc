#include "analysis/outlier_account.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "analysis/walk_thresholds.hpp"
#include "events.h"
#include "util/time.hpp"

namespace ld::analysis {

using model::Cause;

namespace {

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

}  // namespace

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
      if (p.ns >= thresholds::kActivityMinNs) lengths.push_back(p.ns);
    std::sort(lengths.rbegin(), lengths.rend());
    const uint64_t cut = lengths.size() > thresholds::kActivitySteps ? lengths[thresholds::kActivitySteps - 1]
                                                                     : thresholds::kActivityMinNs;
    std::vector<Piece> kept;
    for (const Piece& p : pieces)
      if (p.ns >= cut && kept.size() < thresholds::kActivitySteps) kept.push_back(p);
    return kept;
  };
  std::vector<Piece> kept = keep_longest(merged);
  uint64_t told = 0;
  for (const Piece& p : kept) told += p.ns;
  if (static_cast<double>(told) < thresholds::kActivityInOrderShare * static_cast<double>(total)) {
    std::vector<Piece> totals;  // by name, in the order each first happened
    for (const Piece& p : merged) {
      auto it = std::find_if(totals.begin(), totals.end(), [&](const Piece& t) { return t.what == p.what; });
      if (it == totals.end()) totals.push_back({p.what, p.ns, 1});
      else it->ns += p.ns, it->times++;
    }
    kept = keep_longest(totals);
  }
  std::vector<model::ActivityStep> out;
  for (const Piece& p : kept) out.push_back({p.what, std::round(util::ns_to_ms(p.ns) * 10) / 10, p.times});
  return out;
}

std::vector<model::CauseTime> causes_of(const WindowAccount& acc, uint64_t window_ns) {
  std::vector<model::CauseTime> causes;
  for (size_t c = 0; c < kCauseCount; ++c) {
    if (acc.ns[c] < thresholds::kDustNs) continue;
    model::CauseTime ct;
    ct.cause = static_cast<Cause>(c);
    ct.ms = util::ns_to_ms(acc.ns[c]);
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

void describe_extra_code(model::Outlier& o, const EvidenceStore& store, const HandoffModel& handoffs, uint32_t tid,
                         uint64_t a, uint64_t b, double own_compute_ms) {
  auto compute = std::find_if(o.causes.begin(), o.causes.end(),
                              [](const model::CauseTime& c) { return c.cause == Cause::kCompute; });
  if (compute == o.causes.end() || compute->ms <= own_compute_ms) return;
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  compute->evidence["excess_ms"] = round1(compute->ms - own_compute_ms);
  compute->evidence["typical_ms"] = round1(own_compute_ms);
  std::vector<uint32_t> tids{tid};
  if (const uint32_t producer = handoffs.main_producer(tid)) tids.push_back(producer);
  const HotCode hot = hot_code(store, tids, a, b);
  if (hot.samples == 0) return;
  auto listed = [](const std::vector<std::pair<std::string, double>>& items) {
    std::string out;
    for (const auto& [name, share] : items)
      out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", name, share * 100);
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

HotCode hot_code(const EvidenceStore& store, const std::vector<uint32_t>& tids, uint64_t a, uint64_t b, size_t top) {
  HotCode hot;
  std::map<std::string, uint32_t> frames, syscalls;
  uint32_t user = 0;
  for (uint32_t tid : tids) {
    const ThreadEvidence* t = store.thread(tid);
    if (!t) continue;
    auto it =
        std::partition_point(t->samples.begin(), t->samples.end(), [&](const CpuSample& s) { return s.ts_ns < a; });
    for (; it != t->samples.end() && it->ts_ns < b; ++it) {
      ++hot.samples;
      if (it->user_mode) {
        ++user;
        continue;
      }
      if (const std::string& sc = store.sample_syscall(*it); !sc.empty()) ++syscalls[sc];
      const auto* stack = it->kstack_id >= 0 ? store.kstack(LD_PROBE_PERF, it->kstack_id) : nullptr;
      if (stack && !stack->empty()) ++frames[stack->front().substr(0, stack->front().find('+'))];
    }
  }
  if (hot.samples == 0) return hot;
  const double n = hot.samples;
  hot.user_share = user / n;
  auto largest = [&](const std::map<std::string, uint32_t>& counts) {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& [name, k] : counts) out.emplace_back(name, k / n);
    std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    if (out.size() > top) out.resize(top);
    return out;
  };
  hot.kernel_frames = largest(frames);
  hot.syscalls = largest(syscalls);
  return hot;
}

}  // namespace ld::analysis
