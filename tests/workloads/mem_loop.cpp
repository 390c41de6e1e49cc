// mem_loop: overhead benchmark for the memory probe. After SIGUSR1, for 1 s (or argv[1] ms):
// mmap 64 KiB, touch its first page, munmap. Prints iterations per second.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

int main(int argc, char** argv) {
  ld::wl::wait_for_go();
  uint64_t ms = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  uint64_t cpu0 = cpu_ns();
  uint64_t start = ld::wl::mono_ns(), end = start + ms * 1000000, now = start, n = 0;
  while (now < end) {
    for (int i = 0; i < 64; ++i, ++n) {
      void* p = mmap(nullptr, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return 1;
      static_cast<volatile char*>(p)[0] = 1;
      munmap(p, 64 << 10);
    }
    now = ld::wl::mono_ns();
  }
  printf("tid=%ld iterations=%llu per_s=%.0f cpu_ns_per=%.0f\n", (long)syscall(SYS_gettid), (unsigned long long)n,
         n * 1e9 / (now - start), double(cpu_ns() - cpu0) / n);
  return 0;
}
