// Shared by the probe workloads: wait for SIGUSR1 (the recorder is attached), then work.
#pragma once

#include <signal.h>
#include <stdio.h>
#include <time.h>

#include <cstdint>

namespace ld::wl {

// Blocks until SIGUSR1 arrives. Call first thing in main().
inline void wait_for_go() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
}

inline uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

}  // namespace ld::wl
