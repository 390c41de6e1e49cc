// util::pace(): within the budget of a stretch it does nothing; past it, it yields and begins
// the next stretch.
#include <time.h>

#include <cstdint>

#include <gtest/gtest.h>

#include "util/pacing.hpp"

namespace {

void spin_for_ns(uint64_t ns) {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  do clock_gettime(CLOCK_MONOTONIC, &now);
  while (uint64_t(now.tv_sec - start.tv_sec) * 1'000'000'000ULL + uint64_t(now.tv_nsec) - uint64_t(start.tv_nsec) < ns);
}

TEST(Pacing, WithinTheBudgetNothingHappens) {
  ld::util::pace_begin();
  EXPECT_FALSE(ld::util::pace());
}

TEST(Pacing, PastTheBudgetItYields) {
  ld::util::pace_begin();
  spin_for_ns(ld::util::kPaceBudgetNs + 10'000);
  EXPECT_TRUE(ld::util::pace());
}

}  // namespace
