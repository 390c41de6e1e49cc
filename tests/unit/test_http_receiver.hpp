// A minimal HTTP/1.1 receiver for tests: accepts POSTs on 127.0.0.1 (an ephemeral port), keeps
// each request's path, content type and body, answers a fixed status.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ld::test {

class HttpReceiver {
 public:
  struct Request {
    std::string path;
    std::string content_type;
    std::string body;
  };

  HttpReceiver() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~HttpReceiver() { stop(); }

  int port() const { return port_; }
  void set_status(int status) { status_ = status; }
  std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  void stop() {
    if (stopping_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }

 private:
  void run() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      handle(c);
      close(c);
    }
  }
  void handle(int c) {
    std::string data;
    char buf[65536];
    size_t header_end = std::string::npos, length = 0;
    while (true) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return;
      data.append(buf, static_cast<size_t>(n));
      if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
        std::string lower = data.substr(0, header_end);
        for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        auto cl = lower.find("content-length:");
        if (cl != std::string::npos) length = std::stoul(lower.substr(cl + 15));
      }
      if (header_end != std::string::npos && data.size() >= header_end + 4 + length) break;
    }
    Request r;
    auto sp1 = data.find(' ');
    r.path = data.substr(sp1 + 1, data.find(' ', sp1 + 1) - sp1 - 1);
    std::string headers = data.substr(0, header_end);
    auto ct = headers.find("Content-Type: ");
    if (ct != std::string::npos) r.content_type = headers.substr(ct + 14, headers.find("\r\n", ct) - ct - 14);
    r.body = data.substr(header_end + 4, length);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(std::move(r));
    }
    std::string answer = "HTTP/1.1 " + std::to_string(status_.load()) +
                         " X\r\nContent-Type: application/json\r\n"
                         "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> status_{200};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<Request> requests_;
  std::thread thread_;
};

}  // namespace ld::test
