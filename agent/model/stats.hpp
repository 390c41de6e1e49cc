// Small statistics used by the reports. Percentiles use linear interpolation between closest
// ranks (the method numpy calls "linear"), so p50 of an even count is the mean of the middle two.
// NaN inputs are ignored by every function here (a request without a TTFT must not poison the
// distribution); an input with no finite-or-infinite number left gives NaN results.
#pragma once

#include <cstdint>
#include <vector>

namespace ld::model {

double percentile(std::vector<double> values, double p);  // p in [0,100] (clamped); NaN when empty
double median(std::vector<double> values);
// The same without a copy: `values` loses its NaNs and its order (a trace's millions of gaps).
double percentile_in_place(std::vector<double>& values, double p);
// Median absolute deviation from `center`; `values` becomes the deviations, reordered.
double mad_in_place(std::vector<double>& values, double center);
double mean(const std::vector<double>& values);    // NaN when empty
double stddev(const std::vector<double>& values);  // population sd; NaN when empty

struct Distribution {
  uint64_t count = 0;                                                        // values described (NaN inputs excluded)
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0, mean = 0, stddev = 0;  // NaN when count==0
};
Distribution describe(std::vector<double> values);  // pass an rvalue to spare the copy

// Proportions of counted samples (a frame's share of a window's on-CPU samples). Samples of one
// slow token are not independent draws, so these bound what the counts can say; the rules ask
// for several slow tokens besides (docs/attribution.md, "How much evidence a finding needs").
struct Interval {
  double low = 0, high = 1;
};
// The Wilson score interval of k successes in n at ~95% (z = 1.96); [0, 1] when n == 0.
Interval wilson_interval(uint64_t k, uint64_t n, double z = 1.96);
// Fisher's exact test, one-sided: the probability of a first share k1/n1 at least this far
// above the second k2/n2 if both came from one share (hypergeometric tail). 1 when n1 == 0.
double fisher_greater_p(uint64_t k1, uint64_t n1, uint64_t k2, uint64_t n2);

}  // namespace ld::model
