// futex_contend: after SIGUSR1, a holder thread takes a pthread mutex for 20 ms, 10 times,
// while a waiter thread blocks on it each time. Prints &mutex, both tids and the waiter's own
// measurement of each wait.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "workload.hpp"

namespace {

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_held{-1};   // round the holder holds the mutex for
std::atomic<int> g_taken{-1};  // round the waiter got it in
std::atomic<long> g_holder_tid{0}, g_waiter_tid{0};
uint64_t g_wait_ns[10];

void sleep_ms(int ms) { usleep(ms * 1000); }

void* holder(void*) {
  g_holder_tid = syscall(SYS_gettid);
  for (int round = 0; round < 10; ++round) {
    pthread_mutex_lock(&g_mutex);
    g_held = round;
    sleep_ms(20);
    pthread_mutex_unlock(&g_mutex);
    while (g_taken.load() != round) sleep_ms(1);
  }
  return nullptr;
}

void* waiter(void*) {
  g_waiter_tid = syscall(SYS_gettid);
  for (int round = 0; round < 10; ++round) {
    while (g_held.load() != round) usleep(100);
    uint64_t t0 = ld::wl::mono_ns();
    pthread_mutex_lock(&g_mutex);
    g_wait_ns[round] = ld::wl::mono_ns() - t0;
    pthread_mutex_unlock(&g_mutex);
    g_taken = round;
  }
  return nullptr;
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  pthread_t h, w;
  pthread_create(&w, nullptr, waiter, nullptr);
  pthread_create(&h, nullptr, holder, nullptr);
  pthread_join(h, nullptr);
  pthread_join(w, nullptr);
  printf("mutex=%p holder_tid=%ld waiter_tid=%ld\n", static_cast<void*>(&g_mutex), g_holder_tid.load(),
         g_waiter_tid.load());
  for (int i = 0; i < 10; ++i) printf("wait_ns=%llu\n", (unsigned long long)g_wait_ns[i]);
  return 0;
}
