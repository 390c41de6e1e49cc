// What a wake-up costs a process in the kernel, by how much memory it has mapped.
//
//   cc -O2 -o /tmp/wake_cost bench/wake_cost.c
//   /tmp/wake_cost MIB KIND PERIODS_MS [SECONDS]
//     MIB         memory mapped and touched once before measuring (4 KiB pages)
//     KIND        anon | file | thp (anonymous, MADV_HUGEPAGE: 2 MiB mappings where THP allows)
//     PERIODS_MS  comma-separated sleep periods, e.g. 5,10,100,1000
//     SECONDS     time spent at each period (default 4)
//
// For each period it sleeps in epoll_wait (as the agent's reading thread does) and reads the
// thread's CPU clock around each wait: the CPU time charged inside a wait that blocked is the
// kernel's going to sleep and, mostly, its switching back in. The process touches nothing
// after a wake-up, so a cost that grows with MIB is paid for pages merely mapped.
// docs/performance.md ("The wake-up's kernel time") has the figures and what they led to.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static volatile char* map_memory(size_t bytes, const char* kind) {
  void* p;
  if (strcmp(kind, "file") == 0) {
    char path[] = "/tmp/wake_cost.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
      perror("file");
      exit(1);
    }
    unlink(path);
    for (size_t off = 0; off < bytes; off += 4096)  // real page-cache pages, not holes
      if (pwrite(fd, "x", 1, (off_t)off) != 1) {
        perror("pwrite");
        exit(1);
      }
    p = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  } else {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) madvise(p, bytes, strcmp(kind, "thp") == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  }
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  volatile char* mem = p;
  long sum = 0;
  for (size_t off = 0; off < bytes; off += 4096) {
    if (strcmp(kind, "file") == 0) sum += mem[off];
    else mem[off] = 1;
  }
  return sum == -1 ? NULL : mem;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MIB anon|file|thp PERIODS_MS [SECONDS]\n", argv[0]);
    return 2;
  }
  const size_t bytes = (size_t)atol(argv[1]) << 20;
  const double seconds = argc > 4 ? atof(argv[4]) : 4;
  if (bytes) map_memory(bytes, argv[2]);
  int ep = epoll_create1(0);
  printf("%s MiB %s: period_ms wakes cold_pct mean_us p50_us max_us cpu_us_per_s\n", argv[1], argv[2]);
  for (char* p = argv[3]; *p;) {
    long period_ms = strtol(p, &p, 10);
    if (*p == ',') p++;
    if (period_ms <= 0) continue;
    int wakes = (int)(seconds * 1000 / (double)period_ms);
    if (wakes < 5) wakes = 5;
    double* us = calloc((size_t)wakes, sizeof *us);
    double total = 0, max = 0;
    int cold = 0;
    for (int i = 0; i < wakes; i++) {
      struct epoll_event ev;
      uint64_t before = thread_cpu_ns();
      epoll_wait(ep, &ev, 1, (int)period_ms);
      us[i] = (double)(thread_cpu_ns() - before) / 1e3;
      total += us[i];
      if (us[i] > max) max = us[i];
      if (us[i] > 500) cold++;
    }
    for (int i = 1; i < wakes; i++)  // insertion sort: a few hundred values
      for (int j = i; j > 0 && us[j] < us[j - 1]; j--) {
        double t = us[j];
        us[j] = us[j - 1];
        us[j - 1] = t;
      }
    printf("%ld %d %.1f %.0f %.0f %.0f %.0f\n", period_ms, wakes, 100.0 * cold / wakes, total / wakes, us[wakes / 2],
           max, total / wakes * 1000 / (double)period_ms);
    fflush(stdout);
    free(us);
  }
  return 0;
}
