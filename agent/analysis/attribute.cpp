// attribute(): the report's attribution section, from the outlier windows to their causes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "analysis/attribution.hpp"
#include "analysis/interference.hpp"
#include "analysis/outlier_windows.hpp"
#include "analysis/walk.hpp"
#include "analysis/window_facts.hpp"
#include "util/time.hpp"

namespace ld::analysis {

using namespace model;

namespace {

double round1(double v) { return std::round(v * 10) / 10; }

// The typical token: every gap that is not an outlier, gathered as the gaps are found.
// Back-to-back typical gaps sent by one thread (a request's tokens between its outliers) are
// one run, walked as one span: the same time, one walk instead of one per token, which was most
// of the analysis of a long trace. Splitting a span only prorates samples and short slices at
// more boundaries.
struct TypicalGaps {
  std::vector<TypicalRun> runs;
  uint64_t ns = 0, windows = 0;

  void add(const Window& w) {
    if (w.tid == 0) return;
    if (!runs.empty() && w.tid == runs.back().tid && w.a == runs.back().b) {
      runs.back().b = w.b;
      runs.back().gaps++;
    } else {
      runs.push_back({w.tid, w.a, w.b, 1});
    }
    ns += w.b - w.a;
    windows++;
  }
};

// What every window's attribution shares.
struct Context {
  const Timeline& timeline;
  const std::vector<const Request*>& matched;
  const EvidenceStore& store;
  const HandoffModel& handoffs;
  Walker& walker;
  const BatchInterference& interference;
  double typical_compute_ms = 0;
  uint64_t target_start = 0;
  bool cold_start_possible = false;  // a fresh target whose only slow first token is its first
};

// Before the server saw the request (a token log's window starts at the client): connection
// set-up for a new connection, transport otherwise.
void charge_before_server(WindowAccount& acc, const Context& cx, const Window& w) {
  const uint64_t pre = w.walk_from - w.a;
  const bool new_conn = cx.matched[w.request] && cx.matched[w.request]->index_on_connection == 1;
  const Cause c = new_conn ? Cause::kTimeWait : Cause::kNetwork;
  acc.charge(c, pre);
  acc.evidence_of(c).strings = {{"before_server_ms", round1(util::ns_to_ms(pre))}, {"new_connection", new_conn}};
}

// What the walk found beside the causes, for the outlier's facts.
struct WalkFacts {
  uint64_t gil_engine_ns = 0, own_contention_ns = 0;
  size_t own_busy_threads = 0;
};

// Walks the window and fills the outlier's causes, activity and extra code.
WalkFacts account_window(Outlier& o, const Context& cx, const Window& w) {
  WindowAccount acc;
  if (w.walk_from > w.a) charge_before_server(acc, cx, w);
  acc.keep_steps = true;
  acc.keep_compute = true;
  cx.walker.account(acc, w.tid, w.walk_from, w.b);
  // What the window computes anyway stays compute: a typical gap's compute, or for a first
  // token its whole baseline (its own prefill).
  const bool ttft = w.kind == WindowKind::kTtft;
  const double own_ms = ttft ? w.baseline_ms : cx.typical_compute_ms;
  if (std::isfinite(own_ms))
    cx.interference.apply(acc, w.request, w.walk_from, w.b, util::ms_to_ns(std::max(0.0, own_ms)), ttft);
  o.causes = causes_of(acc, w.b - w.a);
  o.activity = activity_of(acc.steps);
  // Extra code is compute beyond that same own work: a long prompt's prefill is not.
  describe_extra_code(o, cx.store, cx.handoffs, w.tid, w.walk_from, w.b,
                      std::isfinite(own_ms) ? own_ms : cx.typical_compute_ms);
  return {acc.gil_engine_ns, acc.own_contention_ns, acc.own_culprits.size()};
}

Outlier outlier_of(const Context& cx, const Window& w, bool attributed, int64_t realtime_minus_monotonic_ns) {
  const Request& r = cx.timeline.requests[w.request];
  Outlier o;
  o.kind = w.kind;
  o.request = r.id;
  o.token_index = w.token_index;
  o.start_mono_ns = w.a;
  o.end_mono_ns = w.b;
  o.start_unix_ns = mono_to_unix_ns(w.a, realtime_minus_monotonic_ns);
  o.duration_ms = util::ns_to_ms(w.b - w.a);
  o.baseline_ms = std::round(w.baseline_ms * 1000) / 1000;
  o.tid = w.tid;
  WalkFacts walked;
  if (attributed && w.tid == 0)
    o.causes = {{Cause::kUnknown, o.duration_ms, 1.0, nlohmann::json::object()}};  // no thread sent it
  else if (attributed) walked = account_window(o, cx, w);
  o.facts = outlier_facts(cx.store, r, w, w.request == 0, cx.target_start);
  note_gpu_queue(o, cx.store, r.tgid, w.a, w.b);
  note_gpu_state(o, cx.store, w.a, w.b);
  if (walked.gil_engine_ns) o.facts["gil_engine_ms"] = round1(util::ns_to_ms(walked.gil_engine_ns));
  if (walked.own_contention_ns) {  // runnable behind the server's own threads
    o.facts["own_contention_ms"] = round1(util::ns_to_ms(walked.own_contention_ns));
    o.facts["own_busy_threads"] = walked.own_busy_threads;
  }
  if (attributed && w.kind == WindowKind::kTtft && w.request == 0 && cx.cold_start_possible)
    apply_cold_start(o, util::ns_to_ms(w.a - cx.target_start));
  return o;
}

void fill_typical(Profile& typical, const WindowAccount& sum, uint64_t typical_ns) {
  typical.total_ms = util::ns_to_ms(typical_ns);
  typical.causes = causes_of(sum, typical_ns);
  typical.own_contention_ms = util::ns_to_ms(sum.own_contention_ns);
  typical.gil_engine_ms = util::ns_to_ms(sum.gil_engine_ns);
  typical.own_busy_threads = sum.own_culprits.size();
  for (auto& c : typical.causes) c.evidence = nlohmann::json::object();
}

// Outliers that recur at a fixed period, and the culprit most of them name.
Periodicity periodicity_of(const std::vector<Outlier>& outliers) {
  std::vector<uint64_t> ends;
  for (const Outlier& o : outliers) ends.push_back(o.end_mono_ns);
  Periodicity p = find_period(ends);
  if (!p.found) return p;
  std::map<std::string, size_t> votes;
  for (const auto& o : outliers) votes[culprit_of(o)]++;
  auto best = std::max_element(votes.begin(), votes.end(), [](auto& x, auto& y) { return x.second < y.second; });
  if (best != votes.end()) p.coincides = best->first;
  return p;
}

// The first request counts as "first since start" when the target started shortly before the
// trace saw it (otherwise earlier requests may have warmed it up before we attached), and only
// when no later first token was slow like it.
bool cold_start_possible(const Timeline& timeline, const std::vector<Window>& windows, uint64_t target_start) {
  const uint64_t first_start = timeline.requests.empty() ? 0 : timeline.requests.front().start_ns;
  const bool fresh =
      target_start && first_start > target_start && first_start - target_start < thresholds::kFreshTargetNs;
  return fresh && std::none_of(windows.begin(), windows.end(),
                               [](const Window& w) { return w.kind == WindowKind::kTtft && w.request != 0; });
}

nlohmann::json whole_window_facts(const Report& report, const Timeline& timeline, const EvidenceStore& store) {
  const uint64_t start = timeline.requests.empty() ? 0 : timeline.requests.front().start_ns;
  uint64_t end = start;
  for (const Request& r : timeline.requests)
    if (!r.token_ns.empty()) end = std::max(end, r.token_ns.back());
  return window_facts(store, start, end, timeline.requests.size(), report.duration_ms);
}

}  // namespace

void attribute(Report& report, const Timeline& timeline, const Timeline* server, const EvidenceStore& store,
               const std::set<uint32_t>& target_tgids, uint64_t target_start_mono_ns) {
  const auto matched = match_server(timeline, server);
  report.attributed = !store.empty();
  TypicalGaps typical;
  const std::vector<Window> windows =
      find_outliers(timeline, matched, report.outlier_config, report.ttft_fit, [&](const Window& w) {
        if (report.attributed) typical.add(w);
      });
  report.typical.windows = typical.windows;
  // Who hands each token thread its tokens is learned from the typical gaps, before any window
  // is walked: the typical token's waits are hand-offs as much as the outliers' are.
  const HandoffModel handoffs = HandoffModel::learn(store, target_tgids, typical.runs);
  Walker walker(store, handoffs, target_tgids);
  WindowAccount typical_sum;
  typical_sum.with_evidence = false;  // only the times are summed: evidence for every gap was waste
  for (const TypicalRun& r : typical.runs) walker.account(typical_sum, r.tid, r.a, r.b);
  const BatchInterference interference(timeline, server ? *server : timeline, handoffs);
  Context cx{timeline, matched, store, handoffs, walker, interference};
  cx.typical_compute_ms =
      typical.windows ? util::ns_to_ms(typical_sum.ns_of(Cause::kCompute)) / static_cast<double>(typical.windows) : 0;
  cx.target_start = target_start_mono_ns;
  cx.cold_start_possible = cold_start_possible(timeline, windows, target_start_mono_ns);
  for (const Window& w : windows)
    report.outliers.push_back(outlier_of(cx, w, report.attributed, report.realtime_minus_monotonic_ns));
  if (report.attributed) fill_typical(report.typical, typical_sum, typical.ns);
  report.periodicity = periodicity_of(report.outliers);
  report.window_facts = whole_window_facts(report, timeline, store);
}

}  // namespace ld::analysis
