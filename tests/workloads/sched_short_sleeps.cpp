// sched_short_sleeps: thread "ld-napper" sleeps 200 us 2000 times (off CPU well below the
// sched probe's 1 ms threshold: summed, not itemised). Prints "napper <tid>",
// "sleeps <n>", "slept_ns <wall time inside usleep, summed>" and the kernel's count of the
// thread's voluntary / involuntary context switches ("nvcsw", "nivcsw").
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "workload.hpp"

namespace {

constexpr int kSleeps = 2000;

void napper() {
  pthread_setname_np(pthread_self(), "ld-napper");
  uint64_t slept = 0;
  for (int i = 0; i < kSleeps; ++i) {
    uint64_t t0 = ld::wl::mono_ns();
    usleep(200);
    slept += ld::wl::mono_ns() - t0;
  }
  // The kernel's own count of this thread's context switches: voluntary = it blocked,
  // involuntary = it was preempted while runnable.
  unsigned long long nvcsw = 0, nivcsw = 0;
  if (FILE* f = std::fopen("/proc/thread-self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      std::sscanf(line, "voluntary_ctxt_switches: %llu", &nvcsw);
      std::sscanf(line, "nonvoluntary_ctxt_switches: %llu", &nivcsw);
    }
    std::fclose(f);
  }
  std::printf("napper %d\nsleeps %d\nslept_ns %llu\nnvcsw %llu\nnivcsw %llu\n", gettid(), kSleeps,
              static_cast<unsigned long long>(slept), nvcsw, nivcsw);
  std::fflush(stdout);
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  std::thread t(napper);
  t.join();
  return 0;
}
