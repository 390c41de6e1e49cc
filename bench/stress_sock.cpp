// ld-bench-stress-sock: socket IO at a fixed rate, for the event-pipeline stress benchmark.
// Each writer thread sends 16-byte messages on its own AF_UNIX socketpair and a reader thread
// drains it: every send and every receive is one sock-probe event.
//   ld-bench-stress-sock RATE_EVENTS_PER_S SECONDS [PAIRS] [--wait]
// --wait: block until SIGUSR1 first (so the agent can attach before the clock starts).
// Prints the achieved event rate (sends + receives per second) at the end.
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

std::atomic<uint64_t> g_events{0};

void writer(int fd, double sends_per_s, uint64_t end_ns) {
  char msg[16] = "token-event-xx\n";
  const uint64_t start = now_ns();
  uint64_t sent = 0;
  while (true) {
    uint64_t now = now_ns();
    if (now >= end_ns) break;
    // Pace in batches: catch up to where the rate says we should be.
    uint64_t due = static_cast<uint64_t>((now - start) / 1e9 * sends_per_s);
    if (sent >= due) {
      timespec pause{0, 50000};
      nanosleep(&pause, nullptr);
      continue;
    }
    for (; sent < due && sent % 64 != 63; ++sent) {
      if (write(fd, msg, sizeof(msg)) != sizeof(msg)) return;
      g_events.fetch_add(1, std::memory_order_relaxed);
    }
    if (write(fd, msg, sizeof(msg)) != sizeof(msg)) return;
    g_events.fetch_add(1, std::memory_order_relaxed);
    ++sent;
  }
  shutdown(fd, SHUT_WR);
}

void reader(int fd) {
  char buf[16];
  // One message per read so reads count like sends (a real server reads requests, not bulk).
  while (read(fd, buf, sizeof(buf)) > 0) g_events.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s RATE_EVENTS_PER_S SECONDS [PAIRS]\n", argv[0]);
    return 1;
  }
  const double rate = atof(argv[1]);
  const double seconds = atof(argv[2]);
  const int pairs = argc > 3 ? atoi(argv[3]) : 1;
  if (argc > 4 && std::string(argv[4]) == "--wait") {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    int sig = 0;
    sigwait(&set, &sig);
  }
  const uint64_t start = now_ns();
  const uint64_t end = start + static_cast<uint64_t>(seconds * 1e9);
  std::vector<std::thread> threads;
  for (int i = 0; i < pairs; ++i) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    // sends + receives = events, so each pair sends rate / 2 / pairs.
    threads.emplace_back(writer, sv[0], rate / 2 / pairs, end);
    threads.emplace_back(reader, sv[1]);
  }
  for (auto& t : threads) t.join();
  const double elapsed = (now_ns() - start) / 1e9;
  printf("achieved %.0f events/s over %.1f s (%llu events)\n", g_events.load() / elapsed, elapsed,
         static_cast<unsigned long long>(g_events.load()));
  return 0;
}
