// bursty_hog: a noisy neighbour for the cpu_contention scenario. Pinned to --cpu, SCHED_FIFO
// (falls back to nice -20), it spins --burst-ms every --period-ms until killed: whatever else
// is pinned to that CPU waits runnable for the whole burst. Prints "fifo <0|1>".
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
}

double arg(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int cpu = static_cast<int>(arg(argc, argv, "--cpu", 0));
  const double burst_ms = arg(argc, argv, "--burst-ms", 400);
  const double period_ms = arg(argc, argv, "--period-ms", 2000);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
  sched_param param{};
  param.sched_priority = 10;
  const bool fifo = sched_setscheduler(0, SCHED_FIFO, &param) == 0;
  if (!fifo) setpriority(PRIO_PROCESS, 0, -20);
  std::printf("fifo %d\n", fifo ? 1 : 0);
  std::fflush(stdout);
  volatile uint64_t sink = 0;
  for (;;) {
    usleep(static_cast<useconds_t>((period_ms - burst_ms) * 1000));
    const uint64_t until = now_ns() + static_cast<uint64_t>(burst_ms * 1e6);
    while (now_ns() < until) sink = sink + 1;
  }
}
