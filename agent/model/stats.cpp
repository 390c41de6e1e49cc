#include "model/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ld::model {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> without_nan(const std::vector<double>& values) {
  std::vector<double> kept;
  kept.reserve(values.size());
  for (double v : values) {
    if (!std::isnan(v)) kept.push_back(v);
  }
  return kept;
}

void drop_nan(std::vector<double>& values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
}

// `sorted` must be free of NaN and hold, at the ranks p reads, what ascending order puts there.
double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return kNaN;
  if (std::isnan(p)) return kNaN;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(lo);
  if (fraction == 0.0 || lo == hi) return sorted[lo];
  return sorted[lo] + (sorted[hi] - sorted[lo]) * fraction;
}

double mean_of(const std::vector<double>& finite) {
  if (finite.empty()) return kNaN;
  double sum = 0;
  for (double v : finite) sum += v;
  return sum / static_cast<double>(finite.size());
}

// Two passes: the naive sum-of-squares formula loses precision when gaps are large and similar.
double stddev_of(const std::vector<double>& finite) {
  if (finite.empty()) return kNaN;
  const double m = mean_of(finite);
  double sum_sq = 0;
  for (double v : finite) sum_sq += (v - m) * (v - m);
  return std::sqrt(sum_sq / static_cast<double>(finite.size()));
}

}  // namespace

// The two order statistics around the rank, by selection rather than a full sort: the analysis
// takes medians of every TPOT gap of a trace several times (same values as sorting).
double percentile(std::vector<double> values, double p) { return percentile_in_place(values, p); }

double percentile_in_place(std::vector<double>& values, double p) {
  drop_nan(values);
  if (values.empty() || std::isnan(p)) return kNaN;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const auto lo_it = values.begin() + static_cast<std::ptrdiff_t>(lo);
  std::nth_element(values.begin(), lo_it, values.end());
  const double fraction = rank - static_cast<double>(lo);
  if (fraction == 0.0 || lo + 1 == values.size()) return *lo_it;
  const double next = *std::min_element(lo_it + 1, values.end());  // what sorting puts at lo + 1
  return *lo_it + (next - *lo_it) * fraction;
}

double median(std::vector<double> values) { return percentile_in_place(values, 50.0); }

double mad_in_place(std::vector<double>& values, double center) {
  for (double& v : values) v = std::fabs(v - center);
  return percentile_in_place(values, 50.0);
}

double mean(const std::vector<double>& values) { return mean_of(without_nan(values)); }

double stddev(const std::vector<double>& values) { return stddev_of(without_nan(values)); }

// Places the order statistics that p50/p90/p95/p99 read (ranks lo and lo + 1 of each) where a
// full sort would put them: a cascade of selections, each on the part above the last, so a
// trace's million gaps are partitioned a few times instead of sorted.
void select_ranks(std::vector<double>& v, std::initializer_list<double> percents) {
  auto from = v.begin();
  for (double p : percents) {
    const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    for (size_t r : {lo, std::min(lo + 1, v.size() - 1)}) {
      auto at = v.begin() + static_cast<std::ptrdiff_t>(r);
      if (at < from) continue;  // already placed by the previous selection
      if (at == from)           // the smallest of the rest: a scan, not a selection
        std::iter_swap(at, std::min_element(from, v.end()));
      else std::nth_element(from, at, v.end());
      from = at + 1;
    }
  }
}

Distribution describe(std::vector<double> ranked) {
  drop_nan(ranked);
  Distribution d;
  d.count = ranked.size();
  d.mean = mean_of(ranked);
  d.stddev = stddev_of(ranked);
  if (!ranked.empty()) {
    select_ranks(ranked, {50, 90, 95, 99});
    d.max = *std::max_element(ranked.begin(), ranked.end());
  } else {
    d.max = kNaN;
  }
  d.p50 = percentile_of_sorted(ranked, 50);
  d.p90 = percentile_of_sorted(ranked, 90);
  d.p95 = percentile_of_sorted(ranked, 95);
  d.p99 = percentile_of_sorted(ranked, 99);
  return d;
}

Interval wilson_interval(uint64_t k, uint64_t n, double z) {
  if (n == 0) return {};
  const double nd = static_cast<double>(n), p = static_cast<double>(std::min(k, n)) / nd, z2 = z * z;
  const double center = (p + z2 / (2 * nd)) / (1 + z2 / nd);
  const double half = z * std::sqrt(p * (1 - p) / nd + z2 / (4 * nd * nd)) / (1 + z2 / nd);
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

namespace {
double log_choose(uint64_t n, uint64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}
}  // namespace

double fisher_greater_p(uint64_t k1, uint64_t n1, uint64_t k2, uint64_t n2) {
  k1 = std::min(k1, n1);
  k2 = std::min(k2, n2);
  if (n1 == 0) return 1;
  // X: the first group's successes when the k1 + k2 successes fall at random over n1 + n2.
  const uint64_t total = n1 + n2, successes = k1 + k2;
  const double denominator = log_choose(total, n1);
  const uint64_t most = std::min(n1, successes);
  double p = 0;
  for (uint64_t x = k1; x <= most; ++x) {
    if (n1 - x > total - successes) continue;  // more failures in the first group than exist
    p += std::exp(log_choose(successes, x) + log_choose(total - successes, n1 - x) - denominator);
  }
  return std::min(1.0, p);
}

}  // namespace ld::model
