#include "model/timeline.hpp"

#include <limits>

#include "util/time.hpp"

namespace ld::model {

double Request::ttft_ms() const {
  if (token_ns.empty()) return std::numeric_limits<double>::quiet_NaN();
  // Signed: a token log may (wrongly) stamp a token before its start; show it, do not wrap.
  return util::delta_ms(token_ns.front(), start_ns);
}

std::vector<double> Request::gaps_ms() const {
  std::vector<double> gaps;
  if (token_ns.size() < 2) return gaps;
  gaps.reserve(token_ns.size() - 1);
  for (size_t i = 1; i < token_ns.size(); ++i) {
    gaps.push_back(util::delta_ms(token_ns[i], token_ns[i - 1]));
  }
  return gaps;
}

}  // namespace ld::model
