// A streaming (SSE) completion server for the frames root tests (tests/integration/frames_*):
// every token costs --token-ms of CPU in ld_wl::compute_token(), and every --slow-every-th token
// also runs ld_wl::slow_detokenize() for --slow-ms: the slow tokens ran extra code, and the
// report must name that function. Built with frame pointers (the pragma below) so that the
// perf probe's user stacks reach the callers; the function that burns the time is the
// interrupted one either way.
//   ld-wl-frames_server --port 0 [--token-ms 8] [--slow-ms 250] [--slow-every 15]
// Prints "listening on 127.0.0.1:PORT" when ready; serves until killed.
#pragma GCC optimize("no-omit-frame-pointer")

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace ld_wl {

struct Options {
  int port = 0;
  double token_ms = 8;
  double slow_ms = 250;
  int slow_every = 15;
  int tokens = 40;
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Busy arithmetic the compiler cannot drop: `ms` of this thread's CPU.
__attribute__((noinline)) uint64_t burn(double ms, uint64_t seed) {
  const double end = thread_cpu_ms() + ms;
  volatile uint64_t x = seed;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

// The per-token work of a model step.
__attribute__((noinline)) uint64_t compute_token(const Options& o, int i) { return burn(o.token_ms, i); }

// The extra work of a slow token: its own loop (no call out), so every sample in it names it.
__attribute__((noinline)) uint64_t slow_detokenize(const Options& o, int i) {
  const double end = thread_cpu_ms() + o.slow_ms;
  volatile uint64_t h = 1469598103934665603ULL ^ static_cast<uint64_t>(i);
  while (thread_cpu_ms() < end)
    for (int k = 0; k < 4000; ++k) h = (h ^ static_cast<uint64_t>(k)) * 1099511628211ULL;
  return h;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// One connection: read the request (headers and a Content-Length body), stream the tokens.
void serve(int fd, Options o) {
  std::string req;
  char buf[4096];
  size_t header_end = std::string::npos;
  while (header_end == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      close(fd);
      return;
    }
    req.append(buf, static_cast<size_t>(n));
    header_end = req.find("\r\n\r\n");
  }
  size_t length = 0;
  for (const char* key : {"Content-Length:", "content-length:"})
    if (auto at = req.find(key); at != std::string::npos)
      length = std::strtoul(req.c_str() + at + std::strlen(key), nullptr, 10);
  while (req.size() < header_end + 4 + length) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  int tokens = o.tokens;
  if (auto at = req.find("\"max_tokens\""); at != std::string::npos) {
    const auto colon = req.find(':', at);
    if (colon != std::string::npos) tokens = std::atoi(req.c_str() + colon + 1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (!send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")) {
    close(fd);
    return;
  }
  static uint64_t sink = 0;
  for (int i = 0; i < tokens; ++i) {
    sink += compute_token(o, i);
    if (o.slow_every > 0 && i > 0 && i % o.slow_every == 0) sink += slow_detokenize(o, i);
    char event[128];
    std::snprintf(event, sizeof(event), "data: {\"choices\":[{\"text\":\" tok%d\"}]}\n\n", i);
    if (!send_all(fd, event)) break;
  }
  send_all(fd, "data: [DONE]\n\n");
  close(fd);
}

}  // namespace ld_wl

int main(int argc, char** argv) {
  ld_wl::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port") o.port = std::atoi(v);
    else if (k == "--token-ms") o.token_ms = std::atof(v);
    else if (k == "--slow-ms") o.slow_ms = std::atof(v);
    else if (k == "--slow-every") o.slow_every = std::atoi(v);
    else if (k == "--tokens") o.tokens = std::atoi(v);
  }
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  if (bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(ls, 128) != 0) {
    std::perror("bind/listen");
    return 1;
  }
  socklen_t len = sizeof(addr);
  getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  for (;;) {
    const int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::thread(ld_wl::serve, fd, o).detach();
  }
}
