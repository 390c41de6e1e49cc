#include "analysis/outlier_windows.hpp"

#include <algorithm>
#include <cmath>

#include "analysis/attribution.hpp"
#include "analysis/walk_thresholds.hpp"
#include "model/stats.hpp"
#include "util/time.hpp"

namespace ld::analysis {

using namespace model;

namespace {

double input_of(const Request& r) {
  return r.input_tokens >= 0 ? static_cast<double>(r.input_tokens) : static_cast<double>(r.input_bytes);
}

uint32_t token_thread(const Request& r, const Request* server, size_t token) {
  const Request& source = server ? *server : r;
  if (token < source.token_tid.size() && source.token_tid[token]) return source.token_tid[token];
  for (uint32_t tid : source.token_tid)
    if (tid) return tid;
  return 0;
}

// The gap above which a token gap is an outlier: the pooled median + k * MAD, at least the floor.
struct GapLimit {
  double median = 0, limit = 0;
};
GapLimit gap_limit(const Timeline& timeline, const OutlierConfig& config) {
  std::vector<double> gaps;
  size_t gap_count = 0;
  for (const Request& r : timeline.requests) gap_count += r.token_ns.size() > 1 ? r.token_ns.size() - 1 : 0;
  gaps.reserve(gap_count);
  for (const Request& r : timeline.requests)
    for (size_t k = 1; k < r.token_ns.size(); ++k) gaps.push_back(util::delta_ms(r.token_ns[k], r.token_ns[k - 1]));
  // In place: the gaps are not needed after their median and MAD.
  GapLimit g;
  g.median = percentile_in_place(gaps, 50.0);
  const double spread = mad_in_place(gaps, g.median);
  g.limit = std::max(g.median + config.tpot_mad_k * spread, config.tpot_floor_ms);
  return g;
}

// Each request's TTFT baseline (the fit at its input, or the median) and the limit above it.
struct TtftLimits {
  std::vector<double> base, limit;
};
TtftLimits ttft_limits(const Timeline& timeline, const OutlierConfig& config, TtftFit& fit) {
  std::vector<double> inputs, ttfts;
  bool tokens_known = !timeline.requests.empty();
  for (const Request& r : timeline.requests) {
    tokens_known = tokens_known && r.input_tokens >= 0;
    inputs.push_back(input_of(r));
    ttfts.push_back(r.ttft_ms());
  }
  fit = fit_ttft(inputs, ttfts);
  fit.input = tokens_known ? "tokens" : "bytes";
  const double ttft_median = median(ttfts);
  std::vector<double> residuals;
  for (size_t i = 0; i < ttfts.size(); ++i)
    residuals.push_back(ttfts[i] - (fit.valid ? fit.a * std::sqrt(inputs[i]) + fit.b : ttft_median));
  std::vector<double> for_mad = residuals;
  const double resid_spread = mad_in_place(for_mad, median(residuals));
  TtftLimits out;
  for (size_t i = 0; i < ttfts.size(); ++i) {
    const double base = fit.valid ? std::max(0.0, fit.a * std::sqrt(inputs[i]) + fit.b) : ttft_median;
    out.base.push_back(base);
    out.limit.push_back(
        std::max({base * config.ttft_margin, base + config.ttft_floor_ms, base + config.tpot_mad_k * resid_spread}));
  }
  return out;
}

}  // namespace

std::vector<Window> find_outliers(const Timeline& timeline, const std::vector<const Request*>& server,
                                  const OutlierConfig& config, TtftFit& fit,
                                  const std::function<void(const Window&)>& on_typical) {
  std::vector<Window> out;
  const GapLimit gaps = gap_limit(timeline, config);
  const TtftLimits ttft = ttft_limits(timeline, config, fit);
  for (size_t i = 0; i < timeline.requests.size(); ++i) {
    const Request& r = timeline.requests[i];
    if (r.token_ns.empty()) continue;
    const Request* s = server[i];
    if (const double ms = r.ttft_ms(); std::isfinite(ms) && ms > ttft.limit[i]) {
      Window w{WindowKind::kTtft, i, 0, r.start_ns, r.token_ns[0], r.start_ns, token_thread(r, s, 0), ttft.base[i]};
      if (s && s->start_ns > r.start_ns && s->start_ns < r.token_ns[0]) w.walk_from = s->start_ns;
      out.push_back(w);
    }
    for (size_t k = 1; k < r.token_ns.size(); ++k) {
      Window w{WindowKind::kTpot,     i,          k, r.token_ns[k - 1], r.token_ns[k], r.token_ns[k - 1],
               token_thread(r, s, k), gaps.median};
      if (util::ns_to_ms(w.b - w.a) > gaps.limit) out.push_back(w);
      else on_typical(w);
    }
  }
  return out;
}

std::vector<const Request*> match_server(const Timeline& log, const Timeline* server) {
  std::vector<const Request*> matched(log.requests.size(), nullptr);
  if (!server) return matched;
  std::vector<bool> used(server->requests.size(), false);
  for (size_t i = 0; i < log.requests.size(); ++i) {
    const Request& r = log.requests[i];
    if (r.token_ns.empty()) continue;
    int64_t best = -1;
    uint64_t best_gap = thresholds::kServerMatchNs;
    for (size_t j = 0; j < server->requests.size(); ++j) {
      const Request& s = server->requests[j];
      if (used[j] || s.token_ns.empty()) continue;
      const uint64_t gap =
          s.token_ns[0] > r.token_ns[0] ? s.token_ns[0] - r.token_ns[0] : r.token_ns[0] - s.token_ns[0];
      if (gap < best_gap) {
        best_gap = gap;
        best = static_cast<int64_t>(j);
      }
    }
    if (best >= 0) {
      used[best] = true;
      matched[i] = &server->requests[best];
    }
  }
  return matched;
}

}  // namespace ld::analysis
