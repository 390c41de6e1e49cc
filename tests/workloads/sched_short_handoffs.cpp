// sched_short_handoffs: thread "ld-consumer" waits on a condition variable 1000 times for
// thread "ld-producer", which computes ~300 us before each hand-over (llama-server's HTTP
// thread and main loop at sub-millisecond TPOT). Every wait is under the sched probe's 1 ms
// itemising threshold, so it arrives summed, and the sums must name the producer as the waker.
// Prints "consumer <tid>", "producer <tid>", "handoffs <n>" and the consumer's voluntary
// context switches ("nvcsw": the waits that blocked).
#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "workload.hpp"

namespace {

constexpr int kHandoffs = 1000;

std::mutex mu;
std::condition_variable ready;
int produced = 0;
int consumer_tid = 0;

void spin_us(uint64_t us) {
  const uint64_t until = ld::wl::mono_ns() + us * 1000;
  while (ld::wl::mono_ns() < until) {
  }
}

void consumer() {
  pthread_setname_np(pthread_self(), "ld-consumer");
  consumer_tid = gettid();
  for (int taken = 0; taken < kHandoffs; ++taken) {
    std::unique_lock lock(mu);
    ready.wait(lock, [&] { return produced > taken; });
  }
  unsigned long long nvcsw = 0;
  if (FILE* f = std::fopen("/proc/thread-self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) std::sscanf(line, "voluntary_ctxt_switches: %llu", &nvcsw);
    std::fclose(f);
  }
  std::printf("consumer %d\nhandoffs %d\nnvcsw %llu\n", consumer_tid, kHandoffs, nvcsw);
}

void producer() {
  pthread_setname_np(pthread_self(), "ld-producer");
  std::printf("producer %d\n", gettid());
  for (int i = 0; i < kHandoffs; ++i) {
    spin_us(300);
    {
      std::lock_guard lock(mu);
      ++produced;
    }
    ready.notify_one();
  }
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  std::thread c(consumer), p(producer);
  p.join();
  c.join();
  std::fflush(stdout);
  return 0;
}
