// The reading thread's class from the ring's fill rate (host/reader_class.hpp).
#include "host/reader_class.hpp"

#include <gtest/gtest.h>

using ld::host::ReaderClass;

namespace {

constexpr uint64_t kRing = 16u << 20;
constexpr uint64_t kSec = 1'000'000'000;

// Drains once a second for `seconds` at `bytes_per_s`, from *now on; returns the last class.
ReaderClass::Class run(ReaderClass& r, uint64_t& now, int seconds, uint64_t bytes_per_s) {
  ReaderClass::Class c = r.current();
  for (int i = 0; i < seconds; ++i) {
    now += kSec;
    c = r.after_drain(now, bytes_per_s);
  }
  return c;
}

}  // namespace

TEST(ReaderClass, StartsBatchAndIdlesAfterThreeQuietSeconds) {
  ReaderClass r(kRing);
  uint64_t now = 5 * kSec;
  EXPECT_EQ(r.after_drain(now, 0), ReaderClass::Class::batch);  // the first drain opens a window
  const uint64_t quiet = 80'000;  // the (a) bench load: ~1,300 records a second
  EXPECT_EQ(run(r, now, ReaderClass::kQuietWindows - 1, quiet), ReaderClass::Class::batch);
  EXPECT_EQ(run(r, now, 1, quiet), ReaderClass::Class::idle);
}

TEST(ReaderClass, ARateTheRingCannotHoldTenSecondsOfKeepsBatch) {
  ReaderClass r(kRing);
  uint64_t now = kSec;
  r.after_drain(now, 0);
  EXPECT_EQ(run(r, now, 10, r.idle_rate_limit() + 1), ReaderClass::Class::batch);
  // At the limit it idles: half the ring holds ten seconds.
  EXPECT_EQ(run(r, now, ReaderClass::kQuietWindows, r.idle_rate_limit()), ReaderClass::Class::idle);
}

TEST(ReaderClass, ADrainOfASixteenthOfTheRingLeavesIdleAtOnce) {
  ReaderClass r(kRing);
  uint64_t now = kSec;
  r.after_drain(now, 0);
  ASSERT_EQ(run(r, now, 5, 1000), ReaderClass::Class::idle);
  // Mid-window, a wake-up at the kernel side's 1/16 mark: no waiting for the window's end.
  now += kSec / 10;
  EXPECT_EQ(r.after_drain(now, kRing / 16), ReaderClass::Class::batch);
  // The burst's window is not a quiet one: three quiet seconds after it, not before.
  EXPECT_EQ(run(r, now, ReaderClass::kQuietWindows, 1000), ReaderClass::Class::batch);
  EXPECT_EQ(run(r, now, 1, 1000), ReaderClass::Class::idle);
}

TEST(ReaderClass, ManySmallDrainsAddUpWithinAWindow) {
  ReaderClass r(kRing);
  uint64_t now = kSec;
  r.after_drain(now, 0);
  ASSERT_EQ(run(r, now, 5, 0), ReaderClass::Class::idle);
  // 100 drains in 0.5 s, each small, together past the second's limit: batch before the window ends.
  const uint64_t piece = r.idle_rate_limit() / 50;
  ReaderClass::Class c = r.current();
  for (int i = 0; i < 100; ++i) {
    now += kSec / 200;
    c = r.after_drain(now, piece);
  }
  EXPECT_EQ(c, ReaderClass::Class::batch);
}

TEST(ReaderClass, AClockThatStepsBackDoesNotBreakTheWindow) {
  ReaderClass r(kRing);
  uint64_t now = 10 * kSec;
  r.after_drain(now, 0);
  EXPECT_EQ(r.after_drain(now - kSec, 100), ReaderClass::Class::batch);
  uint64_t later = now;
  EXPECT_EQ(run(r, later, 5, 100), ReaderClass::Class::idle);
}
