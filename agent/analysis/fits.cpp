// The TTFT baseline fit and the period of outliers: the two statistics attribute() draws from
// the whole trace rather than from one window.
#include <algorithm>
#include <cmath>

#include "analysis/attribution.hpp"
#include "analysis/walk_thresholds.hpp"
#include "model/stats.hpp"
#include "util/time.hpp"

namespace ld::analysis {

namespace {

double mad(std::vector<double> values, double center) { return model::mad_in_place(values, center); }

// R^2 over the inliers (residual within kFitInlierSd robust sd), which is also what n counts.
void judge_fit(model::TtftFit& fit, const std::vector<double>& xs, const std::vector<double>& ys,
               std::vector<bool>* inlier) {
  const size_t n = xs.size();
  std::vector<double> resid;
  for (size_t i = 0; i < n; ++i) resid.push_back(ys[i] - (fit.a * xs[i] + fit.b));
  const double spread = 1.4826 * mad(resid, model::median(resid));
  std::vector<size_t> keep;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(resid[i]) <= std::max(thresholds::kFitInlierSd * spread, 1e-9)) keep.push_back(i);
  if (keep.empty()) return;
  double mean_y = 0;
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
  const size_t stride = std::max<size_t>(1, n / thresholds::kTheilSenPoints);
  for (size_t i = 0; i < n; i += stride)
    for (size_t j = i + 1; j < n; j += stride)
      if (xs[j] != xs[i]) slopes.push_back((ys[j] - ys[i]) / (xs[j] - xs[i]));
  fit.a = std::max(0.0, model::median(slopes));  // TTFT does not fall with input length
  std::vector<double> intercepts;
  for (size_t i = 0; i < n; ++i) intercepts.push_back(ys[i] - fit.a * xs[i]);
  fit.b = model::median(intercepts);
  judge_fit(fit, xs, ys, inlier);
  return fit;
}

namespace {

// The period is the largest spacing that every gap between events is (nearly) a multiple of:
// events can be missed (a scrape that fell between two requests), so the median gap can be two
// periods. Each test stops at the first sign it cannot pass: with thousands of outliers that
// are not periodic, every candidate is tried, and a full pass each would be quadratic.
bool fits_period(const std::vector<double>& diffs, double period) {
  const double n = static_cast<double>(diffs.size());
  double off_grid = 0, periods = 0;
  for (double d : diffs) {
    const double k = std::round(d / period);
    if (!(k >= 1 && std::fabs(d / period - k) <= thresholds::kPeriodGridTolerance) &&
        ++off_grid > thresholds::kPeriodOffGridShare * n)
      return false;
    if ((periods += std::max(1.0, k)) > thresholds::kPeriodMaxPeriodsPerGap * n) return false;
  }
  return true;
}

}  // namespace

model::Periodicity find_period(std::vector<uint64_t> ends) {
  model::Periodicity p;
  if (ends.size() < 3) return p;
  std::sort(ends.begin(), ends.end());
  std::vector<uint64_t> events;  // outliers close together are one event
  for (uint64_t t : ends)
    if (events.empty() || t - events.back() > thresholds::kPeriodEventNs) events.push_back(t);
  if (events.size() < 3) return p;
  std::vector<double> diffs;
  for (size_t i = 1; i < events.size(); ++i) diffs.push_back(util::ns_to_s(events[i] - events[i - 1]));
  // Candidates: each gap divided by 1..4, largest first.
  std::vector<double> candidates;
  for (double d : diffs)
    for (int k = 1; k <= 4; ++k)
      if (d / k >= 1.0) candidates.push_back(d / k);
  std::sort(candidates.rbegin(), candidates.rend());
  double period = 0;
  for (double c : candidates)
    if (fits_period(diffs, c)) {
      period = c;
      break;
    }
  if (period <= 0) return p;
  p.found = true;
  p.period_s = std::round(period * 100) / 100;
  p.outliers = ends.size();
  return p;
}

}  // namespace ld::analysis
