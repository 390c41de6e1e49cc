#include "model/histogram.hpp"

#include <cmath>
#include <limits>

namespace ld::model {

namespace {
const double kLogRatio = std::log(LogHistogram::kRatio);
}

int LogHistogram::bin_of(double ms) {
  if (!(ms >= kBaseMs)) return kBelowBase;
  const double index = std::floor(std::log(ms / kBaseMs) / kLogRatio);
  // A value at a bin's lower edge can land one bin low through rounding: move it up.
  int bin = static_cast<int>(std::min(index, 1e6));
  if (low_ms(bin + 1) <= ms) ++bin;
  return bin;
}

double LogHistogram::low_ms(int bin) { return bin <= kBelowBase ? 0.0 : kBaseMs * std::pow(kRatio, bin); }
double LogHistogram::high_ms(int bin) { return bin <= kBelowBase ? kBaseMs : kBaseMs * std::pow(kRatio, bin + 1); }
double LogHistogram::mid_ms(int bin) { return bin <= kBelowBase ? kBaseMs / 2 : std::sqrt(low_ms(bin) * high_ms(bin)); }

void LogHistogram::add(double ms, uint64_t times) {
  if (std::isnan(ms) || ms < 0 || times == 0) return;
  bins_[bin_of(ms)] += times;
  count_ += times;
}

void LogHistogram::add_bin(double low_ms_value, uint64_t times) {
  if (std::isnan(low_ms_value) || low_ms_value < 0 || times == 0) return;
  // A written edge is rounded: the nearest bin edge, not floor(), finds its bin.
  const int bin =
      low_ms_value < kBaseMs ? kBelowBase : static_cast<int>(std::lround(std::log(low_ms_value / kBaseMs) / kLogRatio));
  bins_[bin] += times;
  count_ += times;
}

double LogHistogram::value_at(double u) const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  const double target = std::max(u, 0.0) * static_cast<double>(count_);
  uint64_t seen = 0;
  for (const auto& [bin, n] : bins_) {
    seen += n;
    if (static_cast<double>(seen) >= target) return mid_ms(bin);
  }
  return mid_ms(bins_.rbegin()->first);
}

LogHistogram make_log_histogram(const std::vector<double>& values_ms) {
  LogHistogram h;
  for (double v : values_ms) h.add(v);
  return h;
}

}  // namespace ld::model
