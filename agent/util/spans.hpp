// Time spans [start, end) in ns: the union of a list, and how much of a window a union covers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ld::util {

using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

// How much of [a, b) lies in [c, d).
inline uint64_t overlap_ns(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t lo = std::max(a, c), hi = std::min(b, d);
  return hi > lo ? hi - lo : 0;
}

// Sorted, overlapping and touching spans joined: the union.
inline Spans merge_spans(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) out.back().second = std::max(out.back().second, s.second);
    else out.push_back(s);
  }
  return out;
}

// The part of [a, b) inside `merged` (a merge_spans result).
inline uint64_t covered_ns(const Spans& merged, uint64_t a, uint64_t b) {
  auto it = std::lower_bound(merged.begin(), merged.end(), a, [](const auto& s, uint64_t t) { return s.second <= t; });
  uint64_t sum = 0;
  for (; it != merged.end() && it->first < b; ++it) sum += overlap_ns(a, b, it->first, it->second);
  return sum;
}

}  // namespace ld::util
