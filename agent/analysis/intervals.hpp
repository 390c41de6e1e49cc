// Disjoint sorted spans: how much of a window a set of (possibly overlapping) spans covers, and
// what one set leaves of another.
#pragma once

#include <cstdint>
#include <utility>

#include "util/spans.hpp"

namespace ld::analysis {

class Intervals {
 public:
  void add(uint64_t a, uint64_t b) {
    if (b > a) spans_.push_back({a, b});
  }
  void normalise() { spans_ = util::merge_spans(std::move(spans_)); }
  bool empty() const { return spans_.empty(); }
  const util::Spans& spans() const { return spans_; }
  uint64_t total() const {
    uint64_t sum = 0;
    for (const auto& s : spans_) sum += s.second - s.first;
    return sum;
  }
  bool covers(uint64_t t) const {
    for (const auto& s : spans_)
      if (t >= s.first && t < s.second) return true;
    return false;
  }
  // This set minus `other` (both normalised).
  Intervals minus(const Intervals& other) const {
    Intervals out;
    for (auto [a, b] : spans_) {
      uint64_t cur = a;
      for (const auto& o : other.spans_) {
        if (o.second <= cur || o.first >= b) continue;
        if (o.first > cur) out.add(cur, o.first);
        cur = std::max(cur, o.second);
      }
      if (cur < b) out.add(cur, b);
    }
    return out;
  }
  void merge(const Intervals& other) {
    spans_.insert(spans_.end(), other.spans_.begin(), other.spans_.end());
    normalise();
  }

 private:
  util::Spans spans_;
};

}  // namespace ld::analysis
