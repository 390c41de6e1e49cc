// util/time.hpp: each helper gives the bit pattern of the inline expression it stands for, so
// swapping one for the other cannot move a number in a report.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "util/time.hpp"

using namespace ld::util;

namespace {

uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

// Stamps of every size the agent sees: durations, monotonic stamps (~2^50 after weeks of
// uptime), unix stamps (past 2^53, where a double cannot hold every ns).
std::vector<uint64_t> stamps() {
  std::vector<uint64_t> out{0,
                            1,
                            999,
                            1'000,
                            999'999,
                            1'000'000,
                            1'234'567,
                            1'000'000'000,
                            86'400'000'000'000ULL,
                            1'700'000'000'123'456'789ULL,
                            UINT64_MAX};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    out.push_back(rng() >> (rng() % 64));
    out.push_back(1'700'000'000'000'000'000ULL + rng() % 1'000'000'000'000'000ULL);
  }
  return out;
}

}  // namespace

TEST(Time, Constants) {
  EXPECT_EQ(kNsPerUs * kUsPerMs, kNsPerMs);
  EXPECT_EQ(kNsPerMs * kMsPerSec, kNsPerSec);
  EXPECT_EQ(kUsPerMs * kMsPerSec, kUsPerSec);
  static_assert(ns_to_ms(kNsPerMs) == 1.0 && ns_to_s(kNsPerSec) == 1.0 && ns_to_us(kNsPerUs) == 1.0);
}

TEST(Time, NsHelpersAreTheDivisionsTheyReplace) {
  for (uint64_t ns : stamps()) {
    EXPECT_EQ(bits(ns_to_ms(ns)), bits(static_cast<double>(ns) / 1e6)) << ns;
    EXPECT_EQ(bits(ns_to_s(ns)), bits(static_cast<double>(ns) / 1e9)) << ns;
    EXPECT_EQ(bits(ns_to_us(ns)), bits(static_cast<double>(ns) / 1000.0)) << ns;
  }
}

TEST(Time, DifferencesKeepTheirOrderOfRounding) {
  const auto all = stamps();
  for (size_t i = 1; i < all.size(); ++i) {
    const uint64_t a = all[i], b = all[i - 1];
    EXPECT_EQ(bits(delta_ms(a, b)), bits((static_cast<double>(a) - static_cast<double>(b)) / 1e6));
    const double exact = a >= b ? static_cast<double>(a - b) / 1e9 : -static_cast<double>(b - a) / 1e9;
    EXPECT_EQ(bits(offset_s(a, b)), bits(exact));
  }
  EXPECT_EQ(delta_ms(1'000'000, 3'000'000), -2.0);
  EXPECT_EQ(offset_s(1'000'000'000, 3'000'000'000), -2.0);
}

TEST(Time, FractionalUnits) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> any(0, 1e7);
  for (int i = 0; i < 5000; ++i) {
    const double v = any(rng);
    EXPECT_EQ(bits(ms_to_s(v)), bits(v / 1e3));
    EXPECT_EQ(bits(ms_to_s(v)), bits(v / 1000.0));
    EXPECT_EQ(bits(s_to_ms(v)), bits(v * 1e3));
    EXPECT_EQ(bits(ms_to_us(v)), bits(v * 1000));
    EXPECT_EQ(bits(us_to_ms(v)), bits(v / 1000.0));
    EXPECT_EQ(bits(us_to_s(v)), bits(v / 1e6));
    EXPECT_EQ(ms_to_ns(v), static_cast<uint64_t>(v * 1e6));
  }
  EXPECT_EQ(ms_to_ns(1.5), 1'500'000u);
  EXPECT_EQ(per_second(10'000'000), 100.0);
}

TEST(Time, KernelStructures) {
  const timespec ts{1'700'000'000, 123'456'789};
  EXPECT_EQ(timespec_ns(ts), 1'700'000'000'123'456'789ULL);
  const timeval tv{12, 345'678};
  EXPECT_EQ(bits(timeval_ms(tv)), bits(12 * 1e3 + 345'678 / 1e3));
}
