// sched_wake: thread "ld-reader" blocks reading a pipe; thread "ld-writer" (same process)
// writes one byte every 50 ms, 5 times. The reader is off CPU ~50 ms per read, woken by the
// writer. Prints "reader <tid>" and "writer <tid>".
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "workload.hpp"

namespace {

constexpr int kRounds = 5;
constexpr int kGapMs = 50;

int g_pipe[2];

void reader() {
  pthread_setname_np(pthread_self(), "ld-reader");
  std::printf("reader %d\n", gettid());
  std::fflush(stdout);
  char c;
  for (int i = 0; i < kRounds; ++i)
    if (read(g_pipe[0], &c, 1) != 1) return;
}

void writer() {
  pthread_setname_np(pthread_self(), "ld-writer");
  std::printf("writer %d\n", gettid());
  std::fflush(stdout);
  for (int i = 0; i < kRounds; ++i) {
    usleep(kGapMs * 1000);
    if (write(g_pipe[1], "x", 1) != 1) return;
  }
}

}  // namespace

int main() {
  ld::wl::wait_for_go();
  if (pipe(g_pipe) != 0) return 1;
  std::thread r(reader);
  usleep(10 * 1000);  // the reader is blocked in read() before the first write
  std::thread w(writer);
  w.join();
  r.join();
  return 0;
}
