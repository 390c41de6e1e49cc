#include "model/report.hpp"

#include <limits>
#include <ostream>

namespace ld::model {

uint64_t mono_to_unix_ns(uint64_t mono_ns, int64_t realtime_minus_monotonic_ns) {
  const __int128 unix_ns = static_cast<__int128>(mono_ns) + realtime_minus_monotonic_ns;
  if (unix_ns < 0) return 0;
  if (unix_ns > static_cast<__int128>(std::numeric_limits<uint64_t>::max())) {
    return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(unix_ns);
}

std::ostream& operator<<(std::ostream& out, WindowKind kind) { return out << window_kind_name(kind); }

}  // namespace ld::model
