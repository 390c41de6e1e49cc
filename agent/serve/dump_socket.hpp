// The local socket between `serve` and `dump`: a Unix stream socket, mode 0600 (root's only,
// and the peer's uid is checked again), one request a connection:
//   client: {"since_ms": N}\n
//   server: {"ok": true, "bytes": B, "records": R, "segments": S, "warnings": [...]}\n + B bytes
//           (an .ldtrace) | {"ok": false, "error": "..."}\n
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ld::serve {

struct DumpAnswer {
  std::string error;  // "" = ok
  int fd = -1;        // the trace to send (the server closes it)
  uint64_t records = 0;
  uint64_t segments = 0;
  std::vector<std::string> warnings;
};

class DumpServer {
 public:
  using Handler = std::function<DumpAnswer(uint64_t since_ms)>;
  // Binds `path` (0600; its directory is made 0700 when missing). A live server on the path is
  // an error; a stale socket file is replaced. Throws std::runtime_error with a one-line reason.
  DumpServer(const std::string& path, Handler handler);
  ~DumpServer();  // stops the thread, removes the socket file
  DumpServer(const DumpServer&) = delete;
  DumpServer& operator=(const DumpServer&) = delete;
  const std::string& path() const { return path_; }

 private:
  void run();
  void serve_one(int fd);
  std::string path_;
  Handler handler_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd
  std::thread thread_;
};

struct DumpReceived {
  uint64_t bytes = 0;
  uint64_t records = 0;
  uint64_t segments = 0;
  std::vector<std::string> warnings;
};

// Asks the serve on `socket_path` for the last `since_ms` and writes the trace to `out_fd`.
// Throws std::runtime_error with a one-line reason (no serve there, refused, cut short).
DumpReceived request_dump(const std::string& socket_path, uint64_t since_ms, int out_fd);

}  // namespace ld::serve
