// sched_cpu_hog: thread "ld-worker" spins on CPU 0; thread "ld-hog" (SCHED_FIFO, also pinned
// to CPU 0) runs 10 bursts of 20 ms with 30 ms sleeps between them, so the worker waits
// runnable for ~200 ms in ~20 ms pieces, each time preempted by the hog. The worker is
// SCHED_FIFO too, at a lower priority, so that only the hog preempts it.
// Prints "worker <tid>", "hog <tid>", "fifo <0|1>" (the hog's), "worker_fifo <0|1>",
// "burst <start_ns> <end_ns>" per burst (CLOCK_MONOTONIC, the BPF clock) and
// "burst_ns <measured total>".
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "workload.hpp"

namespace {

constexpr int kBursts = 10;
constexpr uint64_t kBurstNs = 20'000'000;
constexpr int kSleepUs = 30'000;

std::atomic<bool> g_stop{false};

void pin_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// SCHED_FIFO at `prio`; false when not allowed.
bool set_fifo(int prio) {
  sched_param param{};
  param.sched_priority = prio;
  return pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
}

void worker() {
  pthread_setname_np(pthread_self(), "ld-worker");
  pin_cpu0();
  // FIFO at the lowest priority: on a busy machine ordinary tasks (compilers...) would
  // otherwise preempt the worker too and blur what the hog did. Bounded: the worker spins
  // ~0.35 s, under the RT throttle, and the kernel's fair server still runs CFS tasks.
  bool fifo = set_fifo(1);
  std::printf("worker %d\nworker_fifo %d\n", gettid(), fifo ? 1 : 0);
  std::fflush(stdout);
  volatile uint64_t n = 0;
  while (!g_stop.load(std::memory_order_relaxed)) n = n + 1;
}

void hog() {
  pthread_setname_np(pthread_self(), "ld-hog");
  pin_cpu0();
  // Bounded: 10 x 20 ms of SCHED_FIFO, far below the RT throttle (950 ms/s).
  bool fifo = set_fifo(10);
  std::printf("hog %d\nfifo %d\n", gettid(), fifo ? 1 : 0);
  std::fflush(stdout);
  uint64_t total = 0;
  uint64_t bursts[kBursts][2] = {};
  for (int i = 0; i < kBursts; ++i) {
    usleep(kSleepUs);
    uint64_t start = ld::wl::mono_ns(), now = start;
    while (now - start < kBurstNs) now = ld::wl::mono_ns();
    total += now - start;
    bursts[i][0] = start;
    bursts[i][1] = now;
  }
  for (const auto& b : bursts)
    std::printf("burst %llu %llu\n", static_cast<unsigned long long>(b[0]), static_cast<unsigned long long>(b[1]));
  std::printf("burst_ns %llu\n", static_cast<unsigned long long>(total));
  std::fflush(stdout);
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  std::thread w(worker);
  usleep(20'000);
  std::thread h(hog);
  h.join();
  usleep(30'000);
  g_stop = true;
  w.join();
  return 0;
}
