// util::BigVector (realloc-grown record lists) and util::partition_from (hinted search).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "util/big_vector.hpp"
#include "util/search.hpp"

namespace {

struct Rec {
  uint64_t ts;
  uint32_t id;
};

TEST(BigVector, GrowsPastHugePagesAndKeepsEveryElement) {
  ld::util::BigVector<Rec> v;
  // 3M x 16 bytes = 48 MiB: past glibc's mmap threshold and the 2 MiB huge-page size.
  constexpr uint32_t kCount = 3'000'000;
  for (uint32_t i = 0; i < kCount; ++i) v.push_back({uint64_t(i) * 7, i});
  ASSERT_EQ(v.size(), kCount);
  for (uint32_t i = 0; i < kCount; i += 9973) {
    EXPECT_EQ(v[i].ts, uint64_t(i) * 7);
    EXPECT_EQ(v[i].id, i);
  }
  EXPECT_EQ(v.back().id, kCount - 1);
  EXPECT_EQ(v.end() - v.begin(), std::ptrdiff_t(kCount));
}

TEST(BigVector, PushBackOfItsOwnElementWhileGrowing) {
  ld::util::BigVector<Rec> v;
  v.push_back({42, 1});
  for (int i = 0; i < 1000; ++i) v.push_back(v[0]);  // grows several times from its own buffer
  for (const Rec& r : v) EXPECT_EQ(r.ts, 42u);
}

TEST(BigVector, CopyMoveAndSortLikeAVector) {
  ld::util::BigVector<Rec> v{{3, 0}, {1, 1}, {2, 2}};
  ld::util::BigVector<Rec> copy = v;
  std::stable_sort(copy.begin(), copy.end(), [](const Rec& a, const Rec& b) { return a.ts < b.ts; });
  EXPECT_EQ(copy.front().ts, 1u);
  EXPECT_EQ(v.front().ts, 3u);  // the original is untouched
  ld::util::BigVector<Rec> moved = std::move(copy);
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by design
  moved = v;
  EXPECT_EQ(moved[0].ts, 3u);
  ld::util::BigVector<Rec> empty;
  moved = empty;
  EXPECT_TRUE(moved.empty());
}

TEST(PartitionFrom, SameAnswerAsABinarySearchWhateverTheHint) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> items(5000);
  uint64_t t = 0;
  for (auto& x : items) x = t += rng() % 5;  // sorted, with runs of equal values
  size_t hint = 0;
  for (int q = 0; q < 20000; ++q) {
    // Mostly increasing queries (as attribution asks), with jumps back and hints out of range.
    uint64_t key = q % 7 == 0 ? rng() % (t + 10) : (q * t / 20000);
    if (q % 101 == 0) hint = rng() % (items.size() * 2);
    auto pred = [&](uint64_t v) { return v < key; };
    size_t want = size_t(std::partition_point(items.begin(), items.end(), pred) - items.begin());
    ASSERT_EQ(ld::util::partition_from(items, hint, pred), want) << "query " << q << " key " << key;
    EXPECT_EQ(hint, want);
  }
  std::vector<uint64_t> none;
  size_t h = 3;
  EXPECT_EQ(ld::util::partition_from(none, h, [](uint64_t) { return true; }), 0u);
}

}  // namespace
