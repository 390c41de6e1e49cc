// mem_touch: the "KV cache allocated at request time" pattern. After SIGUSR1: mmap 256 MiB of
// anonymous memory, touch every page (one first-touch fault each: THP is disabled for the
// mapping so the count is deterministic), munmap. Prints its tid, the mapping and the times.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "workload.hpp"

int main() {
  ld::wl::wait_for_go();
  const size_t len = 256u << 20;
  const long page = sysconf(_SC_PAGESIZE);
  long tid = syscall(SYS_gettid);
  uint64_t t0 = ld::wl::mono_ns();
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint64_t t1 = ld::wl::mono_ns();
  if (p == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  madvise(p, len, MADV_NOHUGEPAGE);
  volatile char* c = static_cast<char*>(p);
  for (size_t off = 0; off < len; off += page) c[off] = 1;
  uint64_t t2 = ld::wl::mono_ns();
  munmap(p, len);
  uint64_t t3 = ld::wl::mono_ns();
  printf("tid=%ld addr=%p len=%zu pages=%zu mmap_ns=%llu touch_ns=%llu munmap_ns=%llu\n", tid, p, len, len / page,
         (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1), (unsigned long long)(t3 - t2));
  return 0;
}
