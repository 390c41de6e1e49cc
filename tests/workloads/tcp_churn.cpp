// tcp_churn: a server on 127.0.0.1 that answers N one-request connections and closes each
// one FIRST, so TIME_WAIT lands on the server's port. The client is a thread of this process
// (default) or, with --client-process, a forked child (not a target: its context must not
// match, so server-side set-up is only seen through the listening-port map).
//   ld-wl-tcp_churn [--count N] [--listen-early] [--client-process] [--idle-ms N]
// --idle-ms N: no network at all, just N ms of sleep after SIGUSR1 (the probe's idle cost).
// --listen-early binds and listens before waiting for SIGUSR1 (a listener that predates the
// recording, found by the probe's /proc scan). Prints "port P" and "done N".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "workload.hpp"

namespace {

int make_listener(uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) || listen(fd, 256)) {
    perror("listen");
    return -1;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  printf("port %u\n", port);
  fflush(stdout);
  return fd;
}

// One request per connection: send, read the reply until the server's FIN, then close.
void client(uint16_t port, int count) {
  for (int i = 0; i < count; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))) {
      perror("connect");
      close(fd);
      continue;
    }
    (void)!write(fd, "GET /\n", 6);
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
  }
}

// Accepts, reads the request, answers and closes first: the server side goes to TIME_WAIT.
int serve(int listener, int count) {
  int served = 0;
  for (int i = 0; i < count; ++i) {
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) break;
    char buf[64];
    (void)!read(fd, buf, sizeof(buf));
    (void)!write(fd, "OK\n", 3);
    close(fd);
    served++;
  }
  return served;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 200;
  int idle_ms = -1;
  bool listen_early = false, client_process = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--listen-early")) listen_early = true;
    else if (!strcmp(argv[i], "--client-process")) client_process = true;
    else if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc) idle_ms = atoi(argv[++i]);
  }
  if (idle_ms >= 0) {
    ld::wl::wait_for_go();
    usleep(idle_ms * 1000);
    return 0;
  }
  uint16_t port = 0;
  int listener = listen_early ? make_listener(port) : -1;
  ld::wl::wait_for_go();
  if (!listen_early) listener = make_listener(port);
  if (listener < 0) return 1;

  int served = 0;
  if (client_process) {
    pid_t pid = fork();
    if (pid == 0) {
      client(port, count);
      _exit(0);
    }
    served = serve(listener, count);
    waitpid(pid, nullptr, 0);
  } else {
    std::thread c(client, port, count);
    served = serve(listener, count);
    c.join();
  }
  close(listener);
  printf("done %d\n", served);
  fflush(stdout);
  // Let the 250 ms counter sampler see the TIME_WAIT sockets while we still exist.
  usleep(400 * 1000);
  return served == count ? 0 : 1;
}
