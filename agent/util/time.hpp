// Time units: the one set of conversions between ns, us, ms and s.
//
// Plain integers and doubles, not std::chrono durations: times arrive as uint64_t ns (the
// records' CLOCK_MONOTONIC stamps, bpf/events.h) and leave as double ms or s (the report, its
// JSON, the metrics), and in between they are one expression long. A duration type would be
// built and unwrapped again on the same line at nearly every call site, and the report's
// numbers must stay bit-for-bit what they were, which is easiest to see when each helper is
// the very expression it replaced. std::chrono stays where it already reads better: sleeps,
// timeouts and steady_clock measurements.
//
// Each double helper is one IEEE operation with the exact power of ten (x / 1e6, x * 1e3), so
// it rounds the way the inline expression did; none is composed of the others, since
// x / 1e3 / 1e3 and x * 1e-6 do not always equal x / 1e6.
#pragma once

#include <cstdint>
#include <ctime>

#include <sys/time.h>

namespace ld::util {

inline constexpr uint64_t kNsPerUs = 1'000;
inline constexpr uint64_t kNsPerMs = 1'000'000;
inline constexpr uint64_t kNsPerSec = 1'000'000'000;
inline constexpr uint64_t kUsPerMs = 1'000;
inline constexpr uint64_t kUsPerSec = 1'000'000;
inline constexpr uint64_t kMsPerSec = 1'000;

// A count of ns (a stamp, or the difference of two) in fractional units.
constexpr double ns_to_us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }
constexpr double ns_to_ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }
constexpr double ns_to_s(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// later - earlier in ms, negative when `later` comes first. Each stamp is made a double before
// the subtraction, not after: unix-ns stamps exceed 2^53, and the difference of the rounded
// stamps is what the report has always shown.
constexpr double delta_ms(uint64_t later, uint64_t earlier) {
  return (static_cast<double>(later) - static_cast<double>(earlier)) / 1e6;
}

// Seconds from `origin_ns` to `t_ns`, negative when t comes first; the difference is taken
// exactly, in integers.
constexpr double offset_s(uint64_t t_ns, uint64_t origin_ns) {
  return t_ns >= origin_ns ? ns_to_s(t_ns - origin_ns) : -ns_to_s(origin_ns - t_ns);
}

// Fractional units to others.
constexpr double us_to_ms(double us) { return us / 1e3; }
constexpr double us_to_s(double us) { return us / 1e6; }
constexpr double ms_to_us(double ms) { return ms * 1e3; }
constexpr double ms_to_s(double ms) { return ms / 1e3; }
constexpr double s_to_ms(double s) { return s * 1e3; }

// Fractional ms as whole ns, truncated; `ms` must not be negative.
constexpr uint64_t ms_to_ns(double ms) { return static_cast<uint64_t>(ms * 1e6); }

// How many times a second something happens that happens every `period_ns`.
constexpr double per_second(uint64_t period_ns) { return 1e9 / static_cast<double>(period_ns); }

// The kernel's time structures in ns and ms.
constexpr uint64_t timespec_ns(const timespec& ts) {
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}
constexpr double timeval_ms(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
}

}  // namespace ld::util
