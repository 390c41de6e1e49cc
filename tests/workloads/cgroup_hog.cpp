// cgroup_hog: one thread spinning on the CPU for a fixed wall time (default 1500 ms), to be
// throttled by a CFS quota. Prints "ran START_NS END_NS" (CLOCK_MONOTONIC).
//   ld-wl-cgroup_hog [--ms N]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "workload.hpp"

int main(int argc, char** argv) {
  uint64_t ms = 1500;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = strtoull(argv[++i], nullptr, 10);
  ld::wl::wait_for_go();
  uint64_t start = ld::wl::mono_ns(), end = start + ms * 1000000ULL;
  volatile uint64_t spins = 0;
  while (ld::wl::mono_ns() < end)
    for (int i = 0; i < 1000; ++i) spins = spins + 1;
  printf("ran %llu %llu\n", (unsigned long long)start, (unsigned long long)ld::wl::mono_ns());
  fflush(stdout);
  return 0;
}
