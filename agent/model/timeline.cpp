#include "model/timeline.hpp"

#include <limits>

namespace ld::model {

double Request::ttft_ms() const {
  if (token_ns.empty()) return std::numeric_limits<double>::quiet_NaN();
  // Signed: a token log may (wrongly) stamp a token before its start; show it, do not wrap.
  return (static_cast<double>(token_ns.front()) - static_cast<double>(start_ns)) / 1e6;
}

std::vector<double> Request::gaps_ms() const {
  std::vector<double> gaps;
  if (token_ns.size() < 2) return gaps;
  gaps.reserve(token_ns.size() - 1);
  for (size_t i = 1; i < token_ns.size(); ++i) {
    gaps.push_back((static_cast<double>(token_ns[i]) - static_cast<double>(token_ns[i - 1])) / 1e6);
  }
  return gaps;
}

}  // namespace ld::model
