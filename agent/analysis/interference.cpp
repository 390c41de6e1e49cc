#include "analysis/interference.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/stats.hpp"
#include "util/spans.hpp"
#include "util/time.hpp"

namespace ld::analysis {

using model::Cause;
using model::Request;

namespace {

// Producers of producers are followed this far up (the walk's own depth cap).
constexpr int kProducerLevels = 4;
// The interfering requests the evidence lists (the largest prompts).
constexpr size_t kListed = 8;
// A prompt this much above the median prompt is a long one: its prefill makes a step longer
// than the steps a typical token already pays for. Prompts of the usual size never interfere:
// with every prompt alike, what looks like another's prefill is the server's own work (an
// event loop busy in Python delays every first token too).
constexpr double kLongPromptFactor = 1.5;

using util::Spans;

double round1(double v) { return std::round(v * 10) / 10; }

// A prompt's size: its tokens when a token log gave them, else its bytes.
double input_of(const Request& r) {
  return r.input_tokens >= 0 ? static_cast<double>(r.input_tokens) : static_cast<double>(r.input_bytes);
}

// Token threads that send the tokens of two requests at once (an event loop serving every
// stream): their own compute is shared too.
std::set<uint32_t> multiplexing_threads(const model::Timeline& timeline) {
  std::map<uint32_t, Spans> lives;  // tid -> [first token, last token] of each request it sent for
  for (const Request& r : timeline.requests) {
    if (r.token_ns.empty()) continue;
    std::set<uint32_t> tids(r.token_tid.begin(), r.token_tid.end());
    tids.erase(0);
    for (uint32_t tid : tids) lives[tid].push_back({r.token_ns.front(), r.token_ns.back()});
  }
  std::set<uint32_t> out;
  for (auto& [tid, spans] : lives) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) {
        out.insert(tid);
        break;
      }
  }
  return out;
}

}  // namespace

BatchInterference::BatchInterference(const model::Timeline& requests, const model::Timeline& threads,
                                     const HandoffModel& handoffs)
    : requests_(requests) {
  for (size_t i = 0; i < requests.requests.size(); ++i) {
    const Request& r = requests.requests[i];
    if (r.token_ns.empty() || r.token_ns.front() <= r.start_ns) continue;
    prefills_.push_back({r.start_ns, r.token_ns.front(), i});
    longest_ = std::max(longest_, r.token_ns.front() - r.start_ns);
  }
  std::sort(prefills_.begin(), prefills_.end(), [](const Prefill& x, const Prefill& y) { return x.a < y.a; });
  std::vector<double> inputs;
  for (const Prefill& p : prefills_) inputs.push_back(input_of(requests.requests[p.request]));
  long_input_ = inputs.empty() ? 0 : kLongPromptFactor * model::median(inputs);

  // Who computes for whom: each producer's consumers, up the producers' own producers (an
  // engine loop's worker pool computes for every stream the loop serves).
  const std::set<uint32_t> multiplexing = multiplexing_threads(threads);
  std::map<uint32_t, std::set<uint32_t>> consumers;  // thread -> token threads it computes for
  std::set<uint32_t> level;
  for (const Request& r : threads.requests)
    for (uint32_t tid : r.token_tid)
      if (tid) level.insert(tid);
  for (uint32_t tid : level) consumers[tid] = {tid};
  for (int depth = 0; depth < kProducerLevels && !level.empty(); ++depth) {
    std::set<uint32_t> next;
    for (uint32_t consumer : level)
      for (uint32_t producer : handoffs.producers_of(consumer)) {
        if (producer == consumer) continue;
        auto& mine = consumers[producer];
        const size_t before = mine.size();
        mine.insert(consumers[consumer].begin(), consumers[consumer].end());
        if (mine.size() != before) next.insert(producer);
      }
    level = std::move(next);
  }
  for (const auto& [tid, served] : consumers) {
    const bool many = served.size() >= 2;
    const bool busy_one =
        std::any_of(served.begin(), served.end(), [&](uint32_t t) { return multiplexing.count(t) > 0; });
    if (many || busy_one) shared_.insert(tid);
  }
}

void BatchInterference::apply(WindowAccount& acc, size_t request, uint64_t a, uint64_t b, uint64_t own_ns,
                              bool ttft) const {
  const uint64_t compute = acc.ns_of(Cause::kCompute);
  if (compute <= own_ns || acc.compute_pieces.empty() || request >= requests_.requests.size()) return;
  const Request& own = requests_.requests[request];
  // Other requests of the same process in prefill during [a, b], and how long each overlapped.
  struct Hit {
    size_t request;
    uint64_t ns;
  };
  std::vector<Hit> hits;
  Spans spans;
  const uint64_t from = a > longest_ ? a - longest_ : 0;
  auto it = std::partition_point(prefills_.begin(), prefills_.end(), [&](const Prefill& p) { return p.a < from; });
  for (; it != prefills_.end() && it->a < b; ++it) {
    const Request& other = requests_.requests[it->request];
    const uint64_t o = util::overlap_ns(a, b, it->a, it->b);
    if (it->request == request || other.tgid != own.tgid || o == 0 || input_of(other) <= long_input_) continue;
    // A first token waits behind prompts that came before it, or that came after it and were
    // larger (computed in the same step); a smaller later one waited behind it instead.
    if (ttft && it->a >= a && input_of(other) <= input_of(own)) continue;
    hits.push_back({it->request, o});
    spans.push_back({std::max(a, it->a), std::min(b, it->b)});
  }
  if (hits.empty()) return;
  spans = util::merge_spans(std::move(spans));
  // The compute shared threads did inside those spans (a piece's compute is spread evenly over it).
  double shared_ns = 0;
  for (const auto& p : acc.compute_pieces)
    if (p.b > p.a && shared(p.tid))
      shared_ns += static_cast<double>(p.ns) * static_cast<double>(util::covered_ns(spans, p.a, p.b)) /
                   static_cast<double>(p.b - p.a);
  const uint64_t moved = std::min(static_cast<uint64_t>(shared_ns), compute - own_ns);
  if (moved == 0) return;
  acc.ns_of(Cause::kCompute) -= moved;
  acc.charge(Cause::kBatchInterference, moved);
  if (!acc.with_evidence) return;
  // The largest prompt first (what made the steps long), then the longest overlap.
  std::stable_sort(hits.begin(), hits.end(), [&](const Hit& x, const Hit& y) {
    const double ix = input_of(requests_.requests[x.request]), iy = input_of(requests_.requests[y.request]);
    return ix != iy ? ix > iy : x.ns > y.ns;
  });
  auto describe = [&](const Hit& h) {
    const Request& r = requests_.requests[h.request];
    nlohmann::json j = {{"request", r.id}, {"input_bytes", r.input_bytes}};
    if (r.input_tokens >= 0) j["input_tokens"] = r.input_tokens;
    // When it arrived, from the slow window's start (absent when it came before the window).
    if (r.start_ns >= a) j["arrived_ms"] = round1(util::ns_to_ms(r.start_ns - a));
    j["overlap_ms"] = round1(util::ns_to_ms(h.ns));
    return j;
  };
  // The first one at the top level (rule facts take scalars), all in a list.
  nlohmann::json ev = describe(hits.front());
  ev["overlap_ms"] = round1(util::ns_to_ms(util::covered_ns(spans, a, b)));
  ev["requests"] = hits.size();
  ev["own_ms"] = round1(util::ns_to_ms(own_ns));
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < hits.size() && i < kListed; ++i) list.push_back(describe(hits[i]));
  ev["interfering"] = std::move(list);
  CauseEvidence& e = acc.evidence_of(Cause::kBatchInterference);
  e.best_ns = moved;
  e.strings = std::move(ev);
}

}  // namespace ld::analysis
