#include "live/top_model.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "events.h"
#include "report/report.hpp"
#include "util/time.hpp"

namespace ld::live {
namespace {

constexpr uint64_t kMinuteNs = 60 * util::kNsPerSec;
constexpr uint64_t kRecentNs = 10 * util::kNsPerSec;

int severity_rank(const std::string& s) { return s == "crit" ? 2 : s == "warn" ? 1 : 0; }

template <typename Samples>
model::Distribution describe_since(const Samples& samples, uint64_t since_ns) {
  std::vector<double> ms;
  for (const auto& s : samples)
    if (s.end_ns >= since_ns) ms.push_back(s.ms);
  return model::describe(std::move(ms));
}

SlowToken slow_token(const model::Outlier& o, int64_t realtime_minus_monotonic_ns, uint64_t now_ns) {
  SlowToken t;
  t.kind = o.kind;
  t.request = o.request;
  t.token_index = o.token_index;
  t.ms = o.duration_ms;
  t.baseline_ms = o.baseline_ms;
  t.end_mono_ns = o.end_mono_ns;
  t.end_unix_ns = model::mono_to_unix_ns(o.end_mono_ns, realtime_minus_monotonic_ns);
  t.tid = o.tid;
  t.explained_mono_ns = now_ns;
  if (!o.causes.empty()) {
    t.cause = o.causes.front().cause;
    t.cause_ms = o.causes.front().ms;
    t.culprit = report::evidence_phrase(o.causes.front());
  }
  for (const model::CauseTime& c : o.causes) t.split.push_back({c.cause, c.ms, c.share, nlohmann::json::object()});
  return t;
}

}  // namespace

std::string clock_text(uint64_t unix_ns) {
  const auto seconds = static_cast<time_t>(unix_ns / util::kNsPerSec);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  return fmt::format("{:02}:{:02}:{:02}.{:03}", tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (unix_ns / util::kNsPerMs) % util::kMsPerSec);
}

TopModel::TopModel(TopOptions options, std::shared_ptr<const rules::RuleSet> rules)
    : options_(options),
      rules_(std::move(rules)),
      watch_(options.ttft_slow_ms, options.gap_slow_ms),
      buffer_(options.max_buffer_bytes),
      budget_ms_(options.analysis_burst_ms) {}

void TopModel::on_start(const trace::TraceHeader& header) { header_ = header; }

void TopModel::on_record(const ld_hdr& rec, size_t size) {
  ++view_.records;
  buffer_.append(rec, size);
  const auto sample = watch_.observe(rec, size);
  if (!sample) return;
  (sample->first_token ? ttft_ : tpot_).push_back({sample->end_ns, sample->ms});
  if (watch_.slow(*sample)) {
    // Its stream from the request on: what the attribution must read to see this token.
    const uint64_t window_start = sample->end_ns - static_cast<uint64_t>(sample->ms * util::kNsPerMs);
    waiting_.push_back(sample->request_ns ? sample->request_ns : window_start);
    ++view_.slow_seen;
  }
}

std::vector<SlowToken> TopModel::tick(uint64_t now_ns, const std::vector<model::ProbeStatus>& probes) {
  prune(now_ns);
  std::vector<SlowToken> fresh;
  if (budget_at_ns_)
    budget_ms_ = std::min(options_.analysis_burst_ms,
                          budget_ms_ + options_.analysis_cpu_share * util::ns_to_ms(now_ns - budget_at_ns_));
  budget_at_ns_ = now_ns;
  if (!waiting_.empty() && rules_ && budget_ms_ > 0) fresh = explain(now_ns, probes);
  update_numbers(now_ns);
  return fresh;
}

void TopModel::prune(uint64_t now_ns) {
  const uint64_t minute_ago = now_ns > kMinuteNs ? now_ns - kMinuteNs : 0;
  while (!ttft_.empty() && ttft_.front().end_ns < minute_ago) ttft_.pop_front();
  while (!tpot_.empty() && tpot_.front().end_ns < minute_ago) tpot_.pop_front();
  const uint64_t lookback = options_.lookback_ms * util::kNsPerMs;
  buffer_.drop_before(now_ns > lookback ? now_ns - lookback : 0);
  view_.records_dropped += buffer_.take_dropped();
  while (!explained_.empty() && explained_.front().end_mono_ns + 2 * lookback < now_ns) explained_.pop_front();
}

std::vector<SlowToken> TopModel::explain(uint64_t now_ns, const std::vector<model::ProbeStatus>& probes) {
  serve::WindowInput input;
  input.header = header_;
  input.probes = probes;
  // From the oldest open stream's request (its gaps need it), the oldest waiting slow token's
  // window, or the minimum, whichever is earliest; never past the look-back.
  const uint64_t lookback = options_.lookback_ms * util::kNsPerMs;
  const uint64_t kept_from = now_ns > lookback ? now_ns - lookback : 0;
  const uint64_t min_ns = options_.min_analysis_ms * util::kNsPerMs;
  uint64_t from = now_ns > min_ns ? now_ns - min_ns : 0;
  if (const uint64_t open = watch_.oldest_open_request_ns(); open) from = std::min(from, open);
  for (const uint64_t needed : waiting_) from = std::min(from, needed);
  input.count_from_ns = std::max(from, kept_from);
  for (auto& block : buffer_.snapshot())
    if (block->max_ts >= input.count_from_ns) input.blocks.push_back(std::move(block));
  input.count_to_ns = input.end_ns = now_ns;
  serve::WindowResult result = serve::analyze_window(input, *rules_);
  waiting_.clear();  // each was looked at: a report outlier now, or typical of this server
  ++view_.analyses;
  view_.last_analysis_ms = result.analysis_seconds * util::kMsPerSec;
  budget_ms_ -= view_.last_analysis_ms;
  view_.analysis_ms += view_.last_analysis_ms;

  remember_findings(std::move(result.report.findings),
                    model::mono_to_unix_ns(now_ns, result.report.realtime_minus_monotonic_ns));

  std::vector<SlowToken> fresh;
  for (const model::Outlier& o : result.report.outliers) {
    if (o.end_mono_ns < input.count_from_ns) continue;  // half-seen: its stream began before the records kept
    const bool known = std::any_of(explained_.begin(), explained_.end(), [&](const SlowToken& t) {
      return t.tid == o.tid && t.end_mono_ns == o.end_mono_ns;
    });
    if (known) continue;
    fresh.push_back(slow_token(o, result.report.realtime_minus_monotonic_ns, now_ns));
  }
  std::sort(fresh.begin(), fresh.end(), [](const auto& a, const auto& b) { return a.end_mono_ns < b.end_mono_ns; });
  for (const SlowToken& t : fresh) {
    explained_.push_back(t);
    if (view_.frozen) continue;
    view_.slow.push_front(t);
    if (view_.slow.size() > options_.max_slow_tokens) view_.slow.pop_back();
  }
  return fresh;
}

void TopModel::remember_findings(std::vector<model::Finding> findings, uint64_t now_unix_ns) {
  auto& seen = view_.findings;
  for (model::Finding& f : findings) {
    auto it = std::find_if(seen.begin(), seen.end(), [&](const SeenFinding& s) { return s.finding.rule == f.rule; });
    if (it == seen.end()) it = seen.insert(seen.end(), SeenFinding{});
    *it = {std::move(f), now_unix_ns};
  }
  std::stable_sort(seen.begin(), seen.end(), [](const SeenFinding& a, const SeenFinding& b) {
    const int ra = severity_rank(a.finding.severity), rb = severity_rank(b.finding.severity);
    return ra != rb ? ra > rb : a.last_unix_ns > b.last_unix_ns;
  });
}

void TopModel::update_numbers(uint64_t now_ns) {
  const uint64_t minute_ago = now_ns > kMinuteNs ? now_ns - kMinuteNs : 0;
  const uint64_t recent = now_ns > kRecentNs ? now_ns - kRecentNs : 0;
  view_.ttft_10s = describe_since(ttft_, recent);
  view_.ttft_60s = describe_since(ttft_, minute_ago);
  view_.tpot_10s = describe_since(tpot_, recent);
  view_.tpot_60s = describe_since(tpot_, minute_ago);

  // One bar a second: the p99 of the gaps that ended in it.
  std::vector<std::vector<double>> by_second(60);
  for (const Sample& s : tpot_) {
    if (s.end_ns < minute_ago || s.end_ns >= now_ns) continue;
    const uint64_t age_s = (now_ns - 1 - s.end_ns) / util::kNsPerSec;  // 0 = the last second
    if (age_s < 60) by_second[59 - age_s].push_back(s.ms);
  }
  view_.tpot_p99_by_second.assign(60, 0.0);
  for (size_t i = 0; i < by_second.size(); ++i)
    if (!by_second[i].empty()) view_.tpot_p99_by_second[i] = model::describe(std::move(by_second[i])).p99;

  std::array<double, model::kCauseCount> ms{};
  for (const SlowToken& t : explained_)
    if (t.end_mono_ns >= minute_ago)
      for (const model::CauseTime& c : t.split) ms[static_cast<size_t>(c.cause)] += c.ms;
  double total = 0;
  for (double m : ms) total += m;
  view_.slow_causes_60s.clear();
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] > 0)
      view_.slow_causes_60s.push_back({static_cast<model::Cause>(i), ms[i], ms[i] / total, nlohmann::json::object()});
  std::sort(view_.slow_causes_60s.begin(), view_.slow_causes_60s.end(),
            [](const auto& a, const auto& b) { return a.ms > b.ms; });
  view_.pending = waiting_.size();
}

}  // namespace ld::live
