// mem_idle: after SIGUSR1, map 400 KiB (below the memory probe's 1 MiB threshold), touch 100
// of its pages, print its tid, then stay alive 3 s: a recording that ends meanwhile must still
// get the open fault batch and small-call aggregate (flushed from user space at finish).
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "workload.hpp"

int main() {
  ld::wl::wait_for_go();
  const size_t len = 400u << 10;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1;
  volatile char* c = static_cast<char*>(p);
  for (size_t i = 0; i < 100; ++i) c[i * 4096] = 1;
  printf("tid=%ld\n", (long)syscall(SYS_gettid));
  fflush(stdout);
  sleep(3);
  munmap(p, len);
  return 0;
}
