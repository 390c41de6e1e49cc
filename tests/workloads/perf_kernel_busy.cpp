// perf_kernel_busy: thread "ld-kbusy" spends ~1 s in the kernel (read() of 1 MiB from
// /dev/zero: the kernel zeroes the buffer) while thread "ld-ubusy" spins in user space for
// ~1 s. Each thread is pinned to its own CPU when there are two. Prints "kernel <tid>",
// "user <tid>", then "kernel_cpu_ns <n>" and "user_cpu_ns <n>": the threads' CPU time, which
// is what a cpu-clock sampler sees (other load on the machine takes CPU away from them).
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "workload.hpp"

namespace {

constexpr uint64_t kRunNs = 1'000'000'000;

void pin(int cpu) {
  if (std::thread::hardware_concurrency() < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ULL + uint64_t(ts.tv_nsec);
}

uint64_t g_kernel_cpu = 0, g_user_cpu = 0;

void kernel_busy() {
  pthread_setname_np(pthread_self(), "ld-kbusy");
  pin(0);
  std::printf("kernel %d\n", gettid());
  std::fflush(stdout);
  int fd = open("/dev/zero", O_RDONLY);
  std::vector<char> buf(1 << 20);
  uint64_t start = ld::wl::mono_ns();
  while (ld::wl::mono_ns() - start < kRunNs)
    if (read(fd, buf.data(), buf.size()) < 0) break;
  close(fd);
  g_kernel_cpu = thread_cpu_ns();
}

void user_busy() {
  pthread_setname_np(pthread_self(), "ld-ubusy");
  pin(1);
  std::printf("user %d\n", gettid());
  std::fflush(stdout);
  volatile uint64_t n = 0;
  uint64_t start = ld::wl::mono_ns();
  // clock_gettime is a vDSO call: no syscall, stays in user mode.
  while (ld::wl::mono_ns() - start < kRunNs)
    for (int i = 0; i < 10000; ++i) n = n + 1;
  g_user_cpu = thread_cpu_ns();
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  std::thread k(kernel_busy);
  std::thread u(user_busy);
  k.join();
  u.join();
  std::printf("kernel_cpu_ns %llu\nuser_cpu_ns %llu\n", static_cast<unsigned long long>(g_kernel_cpu),
              static_cast<unsigned long long>(g_user_cpu));
  return 0;
}
