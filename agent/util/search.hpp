// Searches of sorted lists that are asked in nearly increasing order.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ld::util {

// std::partition_point(items, pred) for a pred true on a prefix, started from `hint`: the
// previous answer for the same list. Windows are attributed in time order per thread (token
// after token), so the answer is usually at or just after the hint, and a galloping search
// from there costs a few comparisons where a binary search of a long recording costs ~20
// cache misses. The result is the binary search's, wherever the hint points.
template <class V, class Pred>
size_t partition_from(const V& items, size_t& hint, Pred pred) {
  const size_t n = items.size();
  size_t lo = std::min(hint, n);
  if (lo > 0 && !pred(items[lo - 1])) {  // the answer lies before the hint: search behind it
    hint = static_cast<size_t>(
        std::partition_point(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(lo), pred) - items.begin());
    return hint;
  }
  // Every item before lo satisfies pred; probe lo, lo+1, lo+3, lo+7, ... until one does not.
  for (size_t step = 1; lo < n; step *= 2) {
    const size_t probe = lo + std::min(step, n - lo) - 1;
    if (!pred(items[probe])) {
      hint = static_cast<size_t>(std::partition_point(items.begin() + static_cast<std::ptrdiff_t>(lo),
                                                      items.begin() + static_cast<std::ptrdiff_t>(probe), pred) -
                                 items.begin());
      return hint;
    }
    lo = probe + 1;
  }
  hint = n;
  return n;
}

}  // namespace ld::util
