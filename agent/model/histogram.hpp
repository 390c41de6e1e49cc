// A distribution kept as counts in log-spaced bins: the JSON report carries one for TTFT and one
// for TPOT, so that `diff` can put an interval on a percentile's change without every sample,
// and the HTML can draw two runs on one axis.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace ld::model {

class LogHistogram {
 public:
  // Bin 0 starts at 1 us; each bin is 2% wider than the one before, so a quantile read off the
  // bins (their geometric middle) is within 1% of the sample's. Values under 1 us, zero
  // included, share bin kBelowBase.
  static constexpr double kBaseMs = 0.001;
  static constexpr double kRatio = 1.02;
  static constexpr int kBelowBase = -1;

  void add(double ms, uint64_t times = 1);  // NaN and negative values are ignored
  // Adds `times` to a bin by its lower edge as written in a report (a bin edge read back).
  void add_bin(double low_ms, uint64_t times);

  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  const std::map<int, uint64_t>& bins() const { return bins_; }

  static int bin_of(double ms);
  static double low_ms(int bin);  // 0 for kBelowBase
  static double high_ms(int bin);
  static double mid_ms(int bin);  // geometric middle; kBaseMs / 2 for kBelowBase

  // The value under which a fraction u (0..1] of the counts lie: the first bin whose cumulative
  // count reaches u * count(), at its middle. NaN when empty.
  double value_at(double u) const;

 private:
  std::map<int, uint64_t> bins_;
  uint64_t count_ = 0;
};

LogHistogram make_log_histogram(const std::vector<double>& values_ms);

}  // namespace ld::model
