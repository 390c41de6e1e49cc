// futex_pingpong: overhead benchmark for the futex probe. After SIGUSR1, two threads pass a
// token back and forth with FUTEX_WAIT/FUTEX_WAKE for 1 s (or argv[1] ms). Prints round trips
// per second. Every wait is far below the probe's 100 us threshold: this measures the cost of
// timing waits that are not emitted.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <ctime>

#include "workload.hpp"

namespace {
uint64_t cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}
}  // namespace

namespace {

std::atomic<int> g_turn{0};  // 0: ping's turn, 1: pong's turn
std::atomic<bool> g_stop{false};

void futex_wait(std::atomic<int>* addr, int val) {
  syscall(SYS_futex, reinterpret_cast<int*>(addr), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<int>* addr) {
  syscall(SYS_futex, reinterpret_cast<int*>(addr), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void* pong(void*) {
  while (!g_stop) {
    while (g_turn.load() != 1 && !g_stop) futex_wait(&g_turn, 0);
    g_turn = 0;
    futex_wake(&g_turn);
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  ld::wl::wait_for_go();
  uint64_t ms = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  pthread_t t;
  pthread_create(&t, nullptr, pong, nullptr);
  uint64_t cpu0 = cpu_ns();
  uint64_t start = ld::wl::mono_ns(), end = start + ms * 1000000, now = start, n = 0;
  while (now < end) {
    g_turn = 1;
    futex_wake(&g_turn);
    while (g_turn.load() != 0) futex_wait(&g_turn, 1);
    if (++n % 64 == 0) now = ld::wl::mono_ns();
  }
  g_stop = true;
  g_turn = 1;
  futex_wake(&g_turn);
  pthread_join(t, nullptr);
  printf("round_trips=%llu per_s=%.0f cpu_ns_per=%.0f\n", (unsigned long long)n, n * 1e9 / (now - start),
         double(cpu_ns() - cpu0) / n);
  return 0;
}
