#include "serve/dump_socket.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ld::serve {
namespace {

using nlohmann::json;

sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    throw std::runtime_error(
        fmt::format("--socket {}: empty or longer than {} bytes", path, sizeof(addr.sun_path) - 1));
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  return addr;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// One line (without the newline), at most 64 KiB, within timeout_ms; "" when none came.
std::string read_line(int fd, int timeout_ms, std::string* rest = nullptr) {
  std::string line;
  char buf[4096];
  while (line.find('\n') == std::string::npos && line.size() < 65536) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return "";
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  auto nl = line.find('\n');
  if (nl == std::string::npos) return "";
  if (rest) *rest = line.substr(nl + 1);
  return line.substr(0, nl);
}

}  // namespace

DumpServer::DumpServer(const std::string& path, Handler handler) : path_(path), handler_(std::move(handler)) {
  sockaddr_un addr = address_of(path);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec)
      throw std::runtime_error(fmt::format("--socket {}: cannot create {}: {}", path, dir.string(), ec.message()));
    chmod(dir.c_str(), 0700);
  }
  // A socket file left by a serve that was killed: replace it; one that answers: refuse.
  if (fs::exists(path, ec)) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) close(probe);
    if (live) throw std::runtime_error(fmt::format("--socket {}: another serve is running there", path));
    unlink(path.c_str());
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(fmt::format("--socket {}: {}", path, std::strerror(errno)));
  // 0600 from the start: no moment where another user could connect.
  mode_t old = umask(0177);
  int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  umask(old);
  if (rc != 0 || listen(listen_fd_, 4) != 0) {
    if (rc == 0) err = errno;
    close(listen_fd_);
    throw std::runtime_error(fmt::format("--socket {}: cannot listen: {}", path, std::strerror(err)));
  }
  chmod(path.c_str(), 0600);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

DumpServer::~DumpServer() {
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  unlink(path_.c_str());
}

void DumpServer::run() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve_one(fd);
    close(fd);
  }
}

void DumpServer::serve_one(int fd) {
  auto answer_error = [&](const std::string& error) {
    std::string line = json{{"ok", false}, {"error", error}}.dump() + "\n";
    write_all(fd, line.data(), line.size());
  };
  // The file mode already keeps others out; the peer's uid is checked as well (a socket
  // passed to another process, a directory with looser modes).
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != 0 && cred.uid != geteuid())) {
    answer_error("permission denied: only root or the daemon's user may dump");
    return;
  }
  json request = json::parse(read_line(fd, 5000), nullptr, false);
  if (!request.is_object() || !request.contains("since_ms") || !request["since_ms"].is_number_unsigned()) {
    answer_error("bad request: expected {\"since_ms\": N}");
    return;
  }
  DumpAnswer answer;
  try {
    answer = handler_(request["since_ms"].get<uint64_t>());
  } catch (const std::exception& e) {
    answer.error = e.what();
  }
  if (!answer.error.empty() || answer.fd < 0) {
    if (answer.fd >= 0) close(answer.fd);
    answer_error(answer.error.empty() ? "no trace" : answer.error);
    return;
  }
  struct stat st {};
  fstat(answer.fd, &st);
  std::string line = json{{"ok", true},
                          {"bytes", static_cast<uint64_t>(st.st_size)},
                          {"records", answer.records},
                          {"segments", answer.segments},
                          {"warnings", answer.warnings}}
                         .dump() +
                     "\n";
  if (write_all(fd, line.data(), line.size())) {
    off_t offset = 0;
    while (offset < st.st_size) {
      ssize_t n = sendfile(fd, answer.fd, &offset, static_cast<size_t>(st.st_size - offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
    }
  }
  close(answer.fd);
}

DumpReceived request_dump(const std::string& socket_path, uint64_t since_ms, int out_fd) {
  sockaddr_un addr = address_of(socket_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    if (err == ENOENT || err == ECONNREFUSED)
      throw std::runtime_error(
          fmt::format("no latency-doctor serve is listening on {} (start one, or give --socket)", socket_path));
    throw std::runtime_error(fmt::format("cannot connect to {}: {}", socket_path, std::strerror(err)));
  }
  std::string request = json{{"since_ms", since_ms}}.dump() + "\n";
  if (!write_all(fd, request.data(), request.size())) throw std::runtime_error("the serve closed the connection");
  std::string rest;
  // Cutting a long flight recording can take a while: up to 5 minutes.
  std::string line = read_line(fd, 300000, &rest);
  json answer = json::parse(line, nullptr, false);
  if (!answer.is_object()) throw std::runtime_error("no answer from the serve (it stopped, or timed out)");
  if (!answer.value("ok", false)) throw std::runtime_error(answer.value("error", std::string("refused")));
  DumpReceived got;
  got.bytes = answer.value("bytes", uint64_t{0});
  got.records = answer.value("records", uint64_t{0});
  got.segments = answer.value("segments", uint64_t{0});
  if (answer.contains("warnings") && answer["warnings"].is_array())
    for (const auto& w : answer["warnings"])
      if (w.is_string()) got.warnings.push_back(w.get<std::string>());
  uint64_t written = 0;
  auto put = [&](const char* data, size_t size) {
    while (size > 0) {
      ssize_t n = write(out_fd, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(fmt::format("writing the trace failed: {}", std::strerror(errno)));
      data += n;
      size -= static_cast<size_t>(n);
      written += static_cast<uint64_t>(n);
    }
  };
  put(rest.data(), std::min<size_t>(rest.size(), got.bytes));
  char buf[65536];
  while (written < got.bytes) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    put(buf, static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(n), got.bytes - written)));
  }
  if (written < got.bytes)
    throw std::runtime_error(fmt::format("the trace was cut short ({} of {} bytes)", written, got.bytes));
  return got;
}

}  // namespace ld::serve
