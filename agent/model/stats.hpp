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

}  // namespace ld::model
