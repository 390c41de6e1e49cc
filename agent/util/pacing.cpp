#include "util/pacing.hpp"

#include <sched.h>
#include <time.h>

namespace ld::util {
namespace {

thread_local uint64_t stretch_began_ns = 0;

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

void pace_begin() { stretch_began_ns = monotonic_ns(); }

bool pace() {
  if (monotonic_ns() - stretch_began_ns < kPaceBudgetNs) return false;
  sched_yield();
  pace_begin();
  return true;
}

}  // namespace ld::util
