#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "model/stats.hpp"

namespace {

using namespace ld::model;

std::vector<double> one_to_ten() { return {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; }

TEST(Stats, PercentileLinearInterpolation) {
  // rank = p/100 * (n-1); numpy.percentile(range(1, 11), p) gives the same.
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 95), 9.55);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 99), 9.91);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 0), 1);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 100), 10);
  EXPECT_DOUBLE_EQ(percentile(one_to_ten(), 25), 3.25);
}

TEST(Stats, PercentileIgnoresInputOrderAndClampsP) {
  EXPECT_DOUBLE_EQ(percentile({10, 1, 7, 3}, 50), 5.0);
  EXPECT_DOUBLE_EQ(percentile({10, 1, 7, 3}, -5), 1.0);
  EXPECT_DOUBLE_EQ(percentile({10, 1, 7, 3}, 250), 10.0);
  EXPECT_DOUBLE_EQ(percentile({42}, 90), 42.0);
}

TEST(Stats, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(Stats, MeanAndPopulationStddev) {
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_DOUBLE_EQ(stddev(v), 2.0);  // population sd (divide by n), not sample sd
  EXPECT_DOUBLE_EQ(stddev({5}), 0.0);
}

TEST(Stats, EmptyInputGivesNaN) {
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_TRUE(std::isnan(mean({})));
  EXPECT_TRUE(std::isnan(stddev({})));
  const Distribution d = describe({});
  EXPECT_EQ(d.count, 0u);
  for (double x : {d.p50, d.p90, d.p95, d.p99, d.max, d.mean, d.stddev}) EXPECT_TRUE(std::isnan(x));
}

TEST(Stats, NaNInputsAreIgnored) {
  const double nan = std::nan("");
  EXPECT_DOUBLE_EQ(percentile({nan, 1, 3, nan}, 50), 2.0);
  EXPECT_DOUBLE_EQ(mean({nan, 1, 3}), 2.0);
  EXPECT_DOUBLE_EQ(stddev({nan, 1, 3}), 1.0);
  const Distribution d = describe({nan, nan});
  EXPECT_EQ(d.count, 0u);
  EXPECT_TRUE(std::isnan(d.p50));
}

TEST(Stats, DescribeOneToTen) {
  const Distribution d = describe(one_to_ten());
  EXPECT_EQ(d.count, 10u);
  EXPECT_DOUBLE_EQ(d.p50, 5.5);
  EXPECT_DOUBLE_EQ(d.p90, 9.1);
  EXPECT_DOUBLE_EQ(d.p95, 9.55);
  EXPECT_DOUBLE_EQ(d.p99, 9.91);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_NEAR(d.stddev, std::sqrt(8.25), 1e-12);
}

TEST(Stats, ArticleExampleStabilityBeatsMean) {
  // The article: mean 50 / sd 45 is worse than mean 75 / sd 12. The numbers only have to say so.
  const Distribution jittery = describe({5, 95, 5, 95});
  const Distribution steady = describe({63, 87, 63, 87});
  EXPECT_DOUBLE_EQ(jittery.mean, 50);
  EXPECT_DOUBLE_EQ(jittery.stddev, 45);
  EXPECT_DOUBLE_EQ(steady.mean, 75);
  EXPECT_DOUBLE_EQ(steady.stddev, 12);
}

// Reference values: the closed forms computed exactly (Python's fractions and math.comb).
TEST(Stats, WilsonIntervalOfAProportion) {
  const Interval half = wilson_interval(10, 20);
  EXPECT_NEAR(half.low, 0.2993, 1e-4);  // 10 of 20 could be anything from 30% to 70%
  EXPECT_NEAR(half.high, 0.7007, 1e-4);
  EXPECT_NEAR(wilson_interval(0, 10).low, 0, 1e-12);
  EXPECT_NEAR(wilson_interval(0, 10).high, 0.2775, 1e-4);
  EXPECT_NEAR(wilson_interval(2, 2).low, 0.3424, 1e-4);  // two of two samples: barely above a third
  EXPECT_EQ(wilson_interval(2, 2).high, 1);
  EXPECT_EQ(wilson_interval(0, 0).low, 0);  // no samples: no knowledge
  EXPECT_EQ(wilson_interval(0, 0).high, 1);
}

TEST(Stats, FisherExactTestOneSided) {
  EXPECT_NEAR(fisher_greater_p(3, 4, 1, 4), 17.0 / 70, 1e-12);  // Fisher's tea-tasting table
  EXPECT_NEAR(fisher_greater_p(12, 24, 1000, 4000), 0.0074079, 1e-6);
  EXPECT_NEAR(fisher_greater_p(1, 2, 700, 1400), 0.7501784, 1e-6);  // 1 of 2 samples against 50%: nothing
  EXPECT_LT(fisher_greater_p(46, 48, 0, 4000), 1e-100);
  EXPECT_EQ(fisher_greater_p(0, 5, 0, 5), 1);
  EXPECT_EQ(fisher_greater_p(0, 0, 3, 10), 1);                            // no samples in the first group
  EXPECT_EQ(fisher_greater_p(9, 5, 0, 5), fisher_greater_p(5, 5, 0, 5));  // counts past the total are clamped
}

}  // namespace
