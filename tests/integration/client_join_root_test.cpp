// Root tier: client and server side by side with the real agent. `bench` drives the
// sample server, directly and through a proxy that buffers (a small one in this test, and nginx
// gzipping the stream where nginx is installed: apt-get install nginx-light); the agent
// records with --client the bench's token log, and the joined report must put the extra client
// time outside the server and raise the proxy-buffering finding. Directly, client and server
// TTFT must agree to within 5 ms at the median.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent_util.hpp"
#include "proc_util.hpp"

using namespace std::chrono_literals;
using namespace ld::test::agent;
using nlohmann::json;

namespace {

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int listen_on_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A reverse proxy that buffers responses the way a proxy with response buffering does: requests
// pass at once, response bytes are held until `flush_bytes` have gathered or the response ends
// (the chunked terminator) or the upstream closes. One upstream connection per client connection.
class BufferingProxy {
 public:
  BufferingProxy(int upstream_port, size_t flush_bytes) : upstream_(upstream_port), flush_bytes_(flush_bytes) {
    listen_fd_ = listen_on_loopback(port_);
    if (listen_fd_ >= 0) acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~BufferingProxy() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    std::lock_guard lock(mu_);
    for (auto& t : workers_) t.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  int port() const { return listen_fd_ >= 0 ? port_ : 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/completions"; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      std::lock_guard lock(mu_);
      workers_.emplace_back([this, client] { serve(client); });
    }
  }

  void serve(int client) {
    const int upstream = connect_loopback(upstream_);
    std::string held;
    char buf[16384];
    while (!stop_ && upstream >= 0) {
      pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
      if (::poll(p, 2, 100) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0 || !write_all(upstream, buf, static_cast<size_t>(n))) break;
      }
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(upstream, buf, sizeof buf, 0);
        if (n <= 0) break;
        held.append(buf, static_cast<size_t>(n));
        const bool response_ended = held.size() >= 5 && held.compare(held.size() - 5, 5, "0\r\n\r\n") == 0;
        if (held.size() >= flush_bytes_ || response_ended) {
          if (!write_all(client, held.data(), held.size())) break;
          held.clear();
        }
      }
    }
    if (!held.empty()) write_all(client, held.data(), held.size());
    if (upstream >= 0) ::close(upstream);
    ::close(client);
  }

  int upstream_;
  size_t flush_bytes_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
};

constexpr const char* kNginx = "/usr/sbin/nginx";

// nginx (Debian's nginx-light) as a reverse proxy to 127.0.0.1:upstream_port on a free loopback
// port, one process (no master), its files in a scratch directory. `listen_extra`: after the
// listen address ("ssl http2"); `location_extra`: more directives for the proxied location.
class Nginx {
 public:
  Nginx(int upstream_port, const std::string& listen_extra, const std::string& location_extra,
        const std::string& server_extra = "") {
    const int probe = listen_on_loopback(port_);  // a free port for nginx
    if (probe < 0) return;
    ::close(probe);
    char dir_template[] = "/tmp/ld-nginx-XXXXXX";
    if (!mkdtemp(dir_template)) return;
    dir_ = dir_template;
    std::ofstream(dir_ + "/nginx.conf") << fmt::format(
        "daemon off; master_process off; worker_processes 1; pid {0}/nginx.pid; error_log {0}/error.log;\n"
        "events {{ worker_connections 64; }}\n"
        "http {{ access_log off; client_body_temp_path {0}/body; proxy_temp_path {0}/proxy;\n"
        "  fastcgi_temp_path {0}/fcgi; uwsgi_temp_path {0}/uwsgi; scgi_temp_path {0}/scgi;\n"
        "  upstream llm {{ server 127.0.0.1:{1}; keepalive 4; }}\n"
        "  server {{ listen 127.0.0.1:{2} {3}; {4}\n"
        "    location / {{ proxy_pass http://llm; proxy_http_version 1.1; proxy_set_header Connection \"\";\n"
        "      {5} }} }} }}\n",
        dir_, upstream_port, port_, listen_extra, server_extra, location_extra);
    proc_ = std::make_unique<ld::test::Child>(
        std::vector<std::string>{kNginx, "-p", dir_, "-c", dir_ + "/nginx.conf", "-e", dir_ + "/error.log"});
    for (int i = 0; i < 100 && !up_; ++i) {
      const int fd = connect_loopback(port_);
      if (fd >= 0) {
        ::close(fd);
        up_ = true;
      } else {
        std::this_thread::sleep_for(50ms);
      }
    }
  }
  ~Nginx() {
    stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  bool up() const { return up_; }
  std::string why() const {
    return "nginx did not start: " + (proc_ ? proc_->err() : std::string()) + ld::test::read_file(dir_ + "/error.log");
  }
  int pid() const { return proc_ ? proc_->pid() : 0; }
  std::string dir() const { return dir_; }
  std::string url(const std::string& scheme) const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + "/v1/completions";
  }
  void stop() {
    if (!proc_) return;
    proc_->signal(SIGTERM);
    proc_->wait(10s);
    proc_.reset();
  }

 private:
  int port_ = 0;
  std::string dir_;
  std::unique_ptr<ld::test::Child> proc_;
  bool up_ = false;
};

struct Joined {
  json report;
  json join;  // report["client_join"]
};

// Attaches to the server with --client LOG, drives `requests` through `url` with bench writing
// LOG, and returns the joined report. `compressed`: bench accepts gzip like the OpenAI SDKs.
Joined run_joined(const Server& server, const std::string& url, int requests, const std::string& name,
                  bool compressed = false) {
  const std::string log = fmt::format("/tmp/ld-client-join-{}-{}.jsonl", name, getpid());
  unlink(log.c_str());
  Joined out;
  out.report = run_and_report(server.proc->pid(), "60s",
                              [&] {
                                ld::bench::BenchOptions o;
                                o.url = url;
                                o.requests = requests;
                                o.concurrency = 2;
                                o.max_tokens = 20;
                                o.tokens_out = log;
                                o.compressed = compressed;
                                auto result = ld::bench::run_bench(o);
                                EXPECT_EQ(result.failed, 0);
                              },
                              {"--client", log});
  struct stat st {};
  EXPECT_EQ(stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "bench's token log must be private";
  unlink(log.c_str());
  out.join = out.report.value("client_join", json::object());
  return out;
}

bool has_finding(const json& report, const std::string& rule) {
  for (const auto& f : report.value("findings", json::array()))
    if (f.value("rule", "") == rule) return true;
  return false;
}

double p50(const json& join, const char* key) { return join.at(key).at("p50").get<double>(); }

void expect_outside_the_server(const Joined& j, int requests) {
  const json& c = j.join;
  ASSERT_FALSE(c.empty()) << j.report.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], requests) << c.dump(1).substr(0, 3000);
  EXPECT_EQ(c["method"], "time");  // the server's peer was the proxy
  // The client waited for the whole response; the server sent its first token long before.
  EXPECT_GT(p50(c, "client_ttft_ms"), p50(c, "server_ttft_ms") + 100) << c.dump(1).substr(0, 3000);
  EXPECT_GT(p50(c, "after_server_ms"), 100);
  EXPECT_LT(p50(c, "before_server_ms"), 20);
  EXPECT_GT(c["outside_ttft_share"].get<double>(), 0.5);
  EXPECT_GT(c["bunched_share"].get<double>(), 0.5);
  // client TTFT = before + server + after, for every request.
  for (const auto& r : c["requests"])
    EXPECT_NEAR(
        r["client_ttft_ms"].get<double>(),
        r["before_server_ms"].get<double>() + r["server_ttft_ms"].get<double>() + r["after_server_ms"].get<double>(),
        0.01);
  EXPECT_TRUE(has_finding(j.report, "proxy-buffering")) << j.report["findings"].dump(1);
  // The server's own report blames nothing on the proxy: its times are its own.
  EXPECT_LT(j.report["summary"]["ttft_ms"]["p50"].get<double>(), p50(c, "client_ttft_ms") - 100);
}

}  // namespace

TEST(ClientJoinRoot, DirectlyClientAndServerTtftAgreeWithin5ms) {
  REQUIRE_BPF();
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  const Joined j = run_joined(server, server.url(), 10, "direct");
  const json& c = j.join;
  ASSERT_FALSE(c.empty()) << j.report.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], 10);
  EXPECT_EQ(c["method"], "client_port");
  std::cout << "[ client-join ] direct: client TTFT p50 " << p50(c, "client_ttft_ms") << " ms, server "
            << p50(c, "server_ttft_ms") << " ms, outside p50 " << p50(c, "outside_ttft_ms") << " ms (before "
            << p50(c, "before_server_ms") << ", after " << p50(c, "after_server_ms") << "), lag p50 "
            << p50(c, "lag_ms") << " ms\n";
  EXPECT_LT(std::fabs(p50(c, "client_ttft_ms") - p50(c, "server_ttft_ms")), 5.0);
  EXPECT_LT(p50(c, "outside_ttft_ms"), 5.0);
  EXPECT_GE(p50(c, "outside_ttft_ms"), 0.0);
  EXPECT_FALSE(has_finding(j.report, "proxy-buffering"));
  EXPECT_FALSE(has_finding(j.report, "client-wait-outside-server"));
  // Both sides of every definition were measured.
  EXPECT_EQ(j.report["definitions"]["ttft_ms"]["server"]["n"], 10);
  EXPECT_EQ(j.report["definitions"]["ttft_ms"]["client"]["n"], 10);
  EXPECT_EQ(j.report["definitions"]["itl_per_chunk_ms"]["client"]["n"], 10 * 19);
}

// The same server with Nagle's algorithm left on (no TCP_NODELAY, as uvicorn --workers leaves
// it): a token written while the previous small write is unacknowledged returns at once but waits
// in the socket for the client's delayed ACK. The sock probe sees the bytes still queued when the
// send returns; the finding names it, and the client's log shows those tokens arrived late.
TEST(ClientJoinRoot, NagleHoldingTokenWritesIsNamed) {
  REQUIRE_BPF();
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30", "--nagle"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  const Joined j = run_joined(server, server.url(), 8, "nagle");
  const json& c = j.join;
  ASSERT_FALSE(c.empty()) << j.report.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], 8);
  const json& tcp = j.report["summary"]["tcp_token_sends"];
  std::cout << "[ client-join ] nagle: " << tcp.dump() << "; held tokens' lag p50 " << p50(c, "held_lag_ms")
            << " ms (n " << c["held_lag_ms"].value("n", 0) << "), the others' " << p50(c, "other_lag_ms") << " ms\n";
  EXPECT_EQ(tcp["read"], 8 * 20);
  EXPECT_EQ(tcp["nagle"], 8 * 20);
  EXPECT_EQ(tcp["nagle_requests"], 8);
  // Every response's first token follows its headers by the prefill, while the headers' ACK is
  // delayed: held in most requests (24 of 120 sends held over 6 requests on this host).
  EXPECT_GE(tcp["held"].get<int>(), 3);
  EXPECT_GT(p50(c, "held_lag_ms"), p50(c, "other_lag_ms") + 2.0) << c.dump(1).substr(0, 3000);
  ASSERT_TRUE(has_finding(j.report, "nagle-holds-token-writes")) << j.report["findings"].dump(1);
  for (const json& f : j.report["findings"]) {
    if (f["rule"] == "nagle-holds-token-writes") {
      EXPECT_EQ(f["severity"], "warn") << f.dump(1);
    }
  }
}

// With TCP_NODELAY (the sample server's default) no token send is held, and no Nagle finding.
TEST(ClientJoinRoot, NoNagleFindingWithTcpNodelay) {
  REQUIRE_BPF();
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  const Joined j = run_joined(server, server.url(), 6, "nodelay");
  const json& tcp = j.report["summary"]["tcp_token_sends"];
  EXPECT_EQ(tcp["read"], 6 * 20) << tcp.dump();
  EXPECT_EQ(tcp["nagle"], 0) << tcp.dump();
  EXPECT_EQ(tcp["held"], 0) << tcp.dump();
  EXPECT_FALSE(has_finding(j.report, "nagle-holds-token-writes"));
  EXPECT_FALSE(has_finding(j.report, "nagle-on-token-sockets"));
}

TEST(ClientJoinRoot, ABufferingProxyIsOutsideTheServer) {
  REQUIRE_BPF();
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  BufferingProxy proxy(server.port, 16384);  // a response of 20 tokens (~3 KB) is held whole
  ASSERT_GT(proxy.port(), 0);
  const Joined j = run_joined(server, proxy.url(), 8, "proxy");
  expect_outside_the_server(j, 8);
  std::cout << "[ client-join ] test proxy: client TTFT p50 " << p50(j.join, "client_ttft_ms") << " ms, server "
            << p50(j.join, "server_ttft_ms") << " ms, after the send p50 " << p50(j.join, "after_server_ms")
            << " ms, bunched " << j.join["bunched_share"] << "\n";
}

// nginx 1.22 with proxy_buffering on (its default) still passes small SSE writes on as they
// come; what holds a stream back in practice is compression: gzip on for text/event-stream and a
// client that accepts gzip (browsers, the OpenAI SDKs) get the whole response at its end.
TEST(ClientJoinRoot, NginxThatGzipsTheStream) {
  REQUIRE_BPF();
  if (access(kNginx, X_OK) != 0) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  Nginx proxy(server.port, "", "proxy_buffering on; gzip on; gzip_types text/event-stream; gzip_min_length 0;");
  ASSERT_TRUE(proxy.up()) << proxy.why();
  const Joined j = run_joined(server, proxy.url("http"), 8, "nginx", true);
  proxy.stop();
  expect_outside_the_server(j, 8);
  std::cout << "[ client-join ] nginx gzip on text/event-stream: client TTFT p50 " << p50(j.join, "client_ttft_ms")
            << " ms, server " << p50(j.join, "server_ttft_ms") << " ms, after the send p50 "
            << p50(j.join, "after_server_ms") << " ms, bunched " << j.join["bunched_share"] << "\n";
}

// A server that terminates TLS itself (uvicorn with a certificate, Python's ssl on OpenSSL 3):
namespace {

// The port a test target printed as "listening on 127.0.0.1:PORT".
std::string listening_port(const Child& server) {
  std::smatch m;
  const std::string out = server.out();
  return std::regex_search(out, m, std::regex(R"(listening on 127\.0\.0\.1:(\d+))")) ? m[1].str() : "";
}

// HTTP/2 streams joined to a client's token log: every request and token found, the token gaps'
// medians within 2 ms, and per request the client's TTFT less the server's split into what came
// before the server's read (under `max_before_ms` at the median) and after its first token's send
// (under 4 ms: a stream given another stream's HEADERS or messages is off by a token, 20 ms).
// Both are the client's: before the server's read, the connection's setup where the client
// opens one per request; after its send, 0.02-3.1 ms (the Python gRPC client's wake-up on two
// CPUs shared with the server and the agent).
void expect_streams_match_the_client(const json& report, int requests, int tokens, const std::string& what,
                                     double max_before_ms) {
  EXPECT_EQ(report["summary"]["requests"], requests) << report["summary"].dump(1);
  EXPECT_EQ(report["summary"]["tokens"], requests * tokens) << report["summary"].dump(1);
  const json& c = report.value("client_join", json::object());
  ASSERT_FALSE(c.empty()) << report.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], requests) << c.dump(1).substr(0, 3000);
  std::cout << "[ " << what << " ] client TTFT p50 " << p50(c, "client_ttft_ms") << " ms, server "
            << p50(c, "server_ttft_ms") << " ms, outside p50 " << p50(c, "outside_ttft_ms")
            << " ms (before the server's read " << p50(c, "before_server_ms") << " ms, after its send "
            << p50(c, "after_server_ms") << " ms); client gap p50 " << p50(c, "client_gap_ms") << " ms, server "
            << p50(c, "server_gap_ms") << " ms\n";
  EXPECT_LT(p50(c, "before_server_ms"), max_before_ms) << c.dump(1).substr(0, 3000);
  EXPECT_LT(p50(c, "after_server_ms"), 4.0) << c.dump(1).substr(0, 3000);
  EXPECT_GE(p50(c, "outside_ttft_ms"), 0.0);
  EXPECT_LT(std::fabs(p50(c, "client_gap_ms") - p50(c, "server_gap_ms")), 2.0) << c.dump(1).substr(0, 3000);
}

// Attaches to `pid` with --client LOG while bench drives `o`, writing LOG: the joined report.
json bench_joined(int pid, ld::bench::BenchOptions o, const std::string& log) {
  o.tokens_out = log;
  return run_and_report(pid, "60s", [&] { EXPECT_EQ(ld::bench::run_bench(o).failed, 0); }, {"--client", log});
}

// Attaches to `pid` with --client LOG while the client `argv` runs (and writes LOG): the joined
// report.
json client_joined(int pid, const std::vector<std::string>& argv, const std::string& log) {
  return run_and_report(pid, "60s",
                        [&] {
                          Child client(argv);
                          EXPECT_EQ(client.wait(60s).value_or(-1), 0) << client.err();
                        },
                        {"--client", log});
}

// A self-signed certificate for 127.0.0.1 (its own CA) and its key.
bool make_test_cert(const std::string& cert, const std::string& key) {
  const std::string make_cert = fmt::format(
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout {} -out {} -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
      key, cert);
  return system(make_cert.c_str()) == 0;
}

}  // namespace

// WebSocket (FastAPI on uvicorn with python3-wsproto): each client message a request, each text
// frame the server sends a token; the client's log joins by its port.
TEST(ClientJoinRoot, UvicornWebSocketShowsItsTokens) {
  REQUIRE_BPF();
  if (system("/usr/bin/python3 -c 'import fastapi, uvicorn, wsproto' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3-fastapi, python3-uvicorn and python3-wsproto are not installed "
                    "(scripts/setup.sh installs them)";
  ld::test::agent::Dir dir("ws");
  const std::string target = std::string(LD_SOURCE_DIR) + "/tests/target/";
  Child server(
      {"/usr/bin/python3", target + "fastapi_engine_server.py", "--port", "0", "--token-ms", "20", "--tokens", "15"});
  ASSERT_TRUE(server.wait_for_output("listening on", 20s)) << server.err();
  const std::string log = (dir.path / "client.jsonl").string();
  constexpr int kRequests = 6, kTokens = 15;
  const json report = client_joined(
      server.pid(),
      {"/usr/bin/python3", target + "ws_client.py", "--url", "ws://127.0.0.1:" + listening_port(server) + "/v1/ws",
       "--requests", std::to_string(kRequests), "--tokens", std::to_string(kTokens), "--log", log},
      log);
  expect_streams_match_the_client(report, kRequests, kTokens, "websocket", 2.0);
  const json& c = report.value("client_join", json::object());
  EXPECT_EQ(c.value("method", ""), "client_port");
  EXPECT_LT(std::fabs(p50(c, "client_ttft_ms") - p50(c, "server_ttft_ms")), 2.0) << c.dump(1).substr(0, 3000);
}

// the sock probe sees only ciphertext, the tls probe the plaintext's classes; joined, the
// server's requests and tokens must be the client's: the token gaps' medians within 2 ms, and
// per request the client's TTFT within 2 ms of the server's at the median.
TEST(ClientJoinRoot, UvicornServingTlsShowsItsTokens) {
  REQUIRE_BPF();
  if (system("/usr/bin/python3 -c 'import fastapi, uvicorn, ssl' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3-fastapi and python3-uvicorn are not installed (scripts/setup.sh installs them)";
  ld::test::agent::Dir dir("tls");
  const std::string cert = (dir.path / "cert.pem").string(), key = (dir.path / "key.pem").string();
  if (!make_test_cert(cert, key)) GTEST_SKIP() << "no openssl command to make a test certificate";
  Child server({"/usr/bin/python3", std::string(LD_SOURCE_DIR) + "/tests/target/fastapi_engine_server.py", "--port",
                "0", "--token-ms", "20", "--tokens", "15", "--ssl-certfile", cert, "--ssl-keyfile", key});
  ASSERT_TRUE(server.wait_for_output("listening on", 20s)) << server.err();
  const std::string port = listening_port(server);
  ASSERT_FALSE(port.empty()) << server.out();
  constexpr int kRequests = 6;
  ld::bench::BenchOptions o;
  o.url = fmt::format("https://127.0.0.1:{}/v1/completions", port);
  o.cacert = cert;
  o.requests = kRequests;
  o.concurrency = 1;
  o.max_tokens = 15;
  const json report = bench_joined(server.pid(), o, (dir.path / "client.jsonl").string());
  const json tls = [&] {
    for (const auto& p : report.value("probes", json::array()))
      if (p.value("name", "") == "tls") return p;
    return json::object();
  }();
  EXPECT_EQ(tls.value("status", ""), "attached") << tls.dump();
  EXPECT_NE(tls.value("reason", "").find("libssl.so"), std::string::npos) << tls.dump();
  EXPECT_EQ(report["summary"]["requests"], kRequests) << report["summary"].dump(1);
  EXPECT_EQ(report["summary"]["tokens"], kRequests * 15) << report["summary"].dump(1);
  const json& c = report.value("client_join", json::object());
  ASSERT_FALSE(c.empty()) << report.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], kRequests);
  std::cout << "[ tls ] client TTFT p50 " << p50(c, "client_ttft_ms") << " ms, server " << p50(c, "server_ttft_ms")
            << " ms, outside p50 " << p50(c, "outside_ttft_ms") << " ms (before the server's read "
            << p50(c, "before_server_ms") << " ms, after its send " << p50(c, "after_server_ms")
            << " ms); client gap p50 " << p50(c, "client_gap_ms") << " ms, server " << p50(c, "server_gap_ms")
            << " ms\n";
  // Per request, the client's TTFT less the server's: what the wire and the client added. A
  // request or token given to the wrong ciphertext is off by a token (20 ms); the rest is the
  // client's own wake-up on CPUs it shares with the server and the agent (0.2-1.5 ms after the
  // server's send here, as for the same server without TLS).
  EXPECT_LT(p50(c, "outside_ttft_ms"), 2.0) << c.dump(1).substr(0, 3000);
  EXPECT_LT(p50(c, "before_server_ms"), 2.0) << c.dump(1).substr(0, 3000);
  EXPECT_GE(p50(c, "outside_ttft_ms"), 0.0);
  EXPECT_LT(std::fabs(p50(c, "client_ttft_ms") - p50(c, "server_ttft_ms")), 5.0) << c.dump(1).substr(0, 3000);
  EXPECT_LT(std::fabs(p50(c, "client_gap_ms") - p50(c, "server_gap_ms")), 2.0) << c.dump(1).substr(0, 3000);
}

namespace {

// gRPC server-streaming (python3-grpcio: gRPC C-core): the streams of one channel, two at a time,
// are the requests; each message a token. With `tls`, over TLS (the tls probe's plaintext frames).
// With `direct`, the client is tests/target/h2_sse_client.py --grpc (python3-h2 on the socket,
// no gRPC C-core threads between the read and the stamp): the client's TTFT must then be within
// 2 ms of the server's at the median, as the Python gRPC client's wake-up (1-2 ms after the
// server's send) does not always allow.
void grpc_streams_match_the_client(bool tls, bool direct = false) {
  if (system("/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3-grpcio is not installed (scripts/setup.sh installs it)";
  ld::test::agent::Dir dir(tls ? "grpcs" : "grpc");
  const std::string cert = (dir.path / "cert.pem").string(), key = (dir.path / "key.pem").string();
  if (tls && !make_test_cert(cert, key)) GTEST_SKIP() << "no openssl command to make a test certificate";
  const std::string target = std::string(LD_SOURCE_DIR) + "/tests/target/";
  std::vector<std::string> server_argv{
      "/usr/bin/python3", target + "grpc_stream_server.py", "--port", "0", "--token-ms", "20"};
  if (tls) server_argv.insert(server_argv.end(), {"--ssl-certfile", cert, "--ssl-keyfile", key});
  Child server(server_argv);
  ASSERT_TRUE(server.wait_for_output("listening on", 20s)) << server.err();
  const std::string log = (dir.path / "client.jsonl").string();
  constexpr int kRequests = 6, kTokens = 15;
  std::vector<std::string> client_argv{
      "/usr/bin/python3", target + "grpc_stream_client.py", "--port",        listening_port(server),
      "--requests",       std::to_string(kRequests),        "--concurrency", "2",
      "--tokens",         std::to_string(kTokens),          "--log",         log};
  if (direct)
    client_argv = {"/usr/bin/python3",
                   target + "h2_sse_client.py",
                   "--url",
                   fmt::format("{}://127.0.0.1:{}/", tls ? "https" : "http", listening_port(server)),
                   "--grpc",
                   "/ld.Engine/Generate",
                   "--requests",
                   std::to_string(kRequests),
                   "--concurrency",
                   "2",
                   "--tokens",
                   std::to_string(kTokens),
                   "--log",
                   log};
  if (tls) client_argv.insert(client_argv.end(), {"--cacert", cert});
  const json report = client_joined(server.pid(), client_argv, log);
  const std::string what = std::string(tls ? "grpc tls" : "grpc") + (direct ? ", direct h2 client" : "");
  expect_streams_match_the_client(report, kRequests, kTokens, what, 4.0);
  if (direct) {
    EXPECT_LT(p50(report["client_join"], "outside_ttft_ms"), 2.0) << report["client_join"].dump(1);
  }
}

}  // namespace

TEST(ClientJoinRoot, GrpcServerStreamingShowsItsTokens) {
  REQUIRE_BPF();
  grpc_streams_match_the_client(false);
}

TEST(ClientJoinRoot, GrpcOverTlsShowsItsTokens) {
  REQUIRE_BPF();
  grpc_streams_match_the_client(true);
}

TEST(ClientJoinRoot, GrpcOverTlsTtftWithin2msOfADirectClient) {
  REQUIRE_BPF();
  grpc_streams_match_the_client(true, true);
}

namespace {

std::string node_path() { return access("/usr/bin/node", X_OK) == 0 ? "/usr/bin/node" : "/usr/local/bin/node"; }

// SSE over HTTP/2 from the server `argv` starts (with `--CERT_FLAG cert --KEY_FLAG key` added
// for `tls`: h2 by ALPN, else h2c with prior knowledge), driven by bench --http2 (a connection
// per request), or with `one_session` by tests/target/h2_sse_client.py (python3-h2, every
// request a stream of one connection, as browsers and SDKs keep it): then nothing but the stream
// lies between the client's start and the server's read, and the TTFTs must agree within 2 ms
// at the median.
void h2_sse_streams_match_the_client(std::vector<std::string> argv, bool tls, const std::string& cert_flag,
                                     const std::string& key_flag, const std::string& what, bool one_session) {
  ld::test::agent::Dir dir("h2sse");
  const std::string cert = (dir.path / "cert.pem").string(), key = (dir.path / "key.pem").string();
  if (tls && !make_test_cert(cert, key)) GTEST_SKIP() << "no openssl command to make a test certificate";
  if (tls) argv.insert(argv.end(), {cert_flag, cert, key_flag, key});
  Child server(argv);
  ASSERT_TRUE(server.wait_for_output("listening on", 20s)) << server.err();
  constexpr int kRequests = 6;
  ld::bench::BenchOptions o;
  o.url = fmt::format("{}://127.0.0.1:{}/v1/completions", tls ? "https" : "http", listening_port(server));
  if (tls) o.cacert = cert;
  o.http2 = true;
  o.requests = kRequests;
  o.concurrency = 2;
  o.max_tokens = 15;
  const std::string log = (dir.path / "client.jsonl").string();
  if (one_session) {
    if (system("/usr/bin/python3 -c 'import h2' >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "Debian's python3-h2 is not installed (scripts/setup.sh installs it)";
    std::vector<std::string> client_argv{"/usr/bin/python3",
                                         std::string(LD_SOURCE_DIR) + "/tests/target/h2_sse_client.py",
                                         "--url",
                                         o.url,
                                         "--requests",
                                         std::to_string(kRequests),
                                         "--concurrency",
                                         "2",
                                         "--tokens",
                                         "15",
                                         "--log",
                                         log};
    if (tls) client_argv.insert(client_argv.end(), {"--cacert", cert});
    const json report = client_joined(server.pid(), client_argv, log);
    expect_streams_match_the_client(report, kRequests, 15, what + ", one session", 4.0);
    EXPECT_LT(p50(report["client_join"], "outside_ttft_ms"), 2.0) << report["client_join"].dump(1);
    return;
  }
  const json report = bench_joined(server.pid(), o, log);
  // bench --http2 opens a connection per request: before the server's read come the connect, the
  // accept, the SETTINGS exchange and over TLS a handshake (0.6-10.5 ms here; more while
  // the CPUs are busy), none of it the stream's.
  expect_streams_match_the_client(report, kRequests, 15, what, 20.0);
}

// FastAPI on hypercorn (python3-hypercorn).
void hypercorn_streams_match_the_client(bool tls, bool one_session = false) {
  if (system("/usr/bin/python3 -c 'import fastapi, hypercorn' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3-fastapi and python3-hypercorn are not installed (scripts/setup.sh installs them)";
  h2_sse_streams_match_the_client(
      {"/usr/bin/python3", std::string(LD_SOURCE_DIR) + "/tests/target/fastapi_engine_server.py", "--port", "0",
       "--token-ms", "20", "--tokens", "15", "--server", "hypercorn"},
      tls, "--ssl-certfile", "--ssl-keyfile", tls ? "h2 tls sse" : "h2 sse", one_session);
}

// Node's own http2 module; over TLS, the OpenSSL linked into the node executable.
void node_streams_match_the_client(bool tls, bool one_session = false) {
  const std::string node = node_path();
  if (access(node.c_str(), X_OK) != 0) GTEST_SKIP() << "Node.js is not installed (scripts/setup.sh installs nodejs)";
  h2_sse_streams_match_the_client(
      {node, std::string(LD_SOURCE_DIR) + "/tests/target/node_h2_server.js", "--port", "0", "--token-ms", "20"}, tls,
      "--cert", "--key", tls ? "node h2 tls" : "node h2c", one_session);
}

}  // namespace

TEST(ClientJoinRoot, HypercornHttp2SseShowsItsTokens) {
  REQUIRE_BPF();
  hypercorn_streams_match_the_client(false);
}

TEST(ClientJoinRoot, HypercornHttp2OverTlsShowsItsTokens) {
  REQUIRE_BPF();
  hypercorn_streams_match_the_client(true);
}

TEST(ClientJoinRoot, NodeHttp2SseShowsItsTokens) {
  REQUIRE_BPF();
  node_streams_match_the_client(false);
}

TEST(ClientJoinRoot, NodeHttp2OverTlsShowsItsTokens) {
  REQUIRE_BPF();
  node_streams_match_the_client(true);
}

TEST(ClientJoinRoot, HypercornHttp2OneSessionTtftWithin2ms) {
  REQUIRE_BPF();
  hypercorn_streams_match_the_client(false, true);
}

TEST(ClientJoinRoot, HypercornHttp2OverTlsOneSessionTtftWithin2ms) {
  REQUIRE_BPF();
  hypercorn_streams_match_the_client(true, true);
}

TEST(ClientJoinRoot, NodeHttp2OverTlsOneSessionTtftWithin2ms) {
  REQUIRE_BPF();
  node_streams_match_the_client(true, true);
}

// nginx terminating TLS and HTTP/2 in front of a plain HTTP/1.1 server, the agent on each side in
// turn, the client's log joined both times. On nginx it reads the TLS plaintext of nginx's own
// connection to the client (its upstream connection, where nginx is the client, is left out):
// the tokens as the client gets them. On the server it sees plain HTTP/1.1 from nginx: the
// tokens as the server made them, nginx's forwarding and the TLS outside it.
TEST(ClientJoinRoot, NginxTerminatingTlsSeenFromEitherSide) {
  REQUIRE_BPF();
  if (access(kNginx, X_OK) != 0) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";
  ld::test::agent::Dir dir("nginx-tls");
  const std::string cert = (dir.path / "cert.pem").string(), key = (dir.path / "key.pem").string();
  if (!make_test_cert(cert, key)) GTEST_SKIP() << "no openssl command to make a test certificate";
  Server server({"--token-ms", "10", "--tokens", "20", "--prefill-base-ms", "30"});
  ASSERT_GT(server.port, 0) << server.proc->err();
  Nginx proxy(server.port, "ssl http2", "proxy_buffering off;",
              fmt::format("ssl_certificate {}; ssl_certificate_key {};", cert, key));
  ASSERT_TRUE(proxy.up()) << proxy.why();
  constexpr int kRequests = 6;
  ld::bench::BenchOptions o;
  o.url = proxy.url("https");
  o.cacert = cert;
  o.http2 = true;
  o.requests = kRequests;
  o.concurrency = 2;
  o.max_tokens = 20;
  const json on_nginx = bench_joined(proxy.pid(), o, (dir.path / "nginx.jsonl").string());
  expect_streams_match_the_client(on_nginx, kRequests, 20, "nginx tls h2, agent on nginx", 20.0);
  const json on_server = bench_joined(server.proc->pid(), o, (dir.path / "server.jsonl").string());
  EXPECT_EQ(on_server["summary"]["requests"], kRequests) << on_server["summary"].dump(1);
  EXPECT_EQ(on_server["summary"]["tokens"], kRequests * 20) << on_server["summary"].dump(1);
  const json& c = on_server.value("client_join", json::object());
  ASSERT_FALSE(c.empty()) << on_server.dump(1).substr(0, 4000);
  EXPECT_EQ(c["matched"], kRequests) << c.dump(1).substr(0, 3000);
  std::cout << "[ nginx tls h2, agent on the server ] client TTFT p50 " << p50(c, "client_ttft_ms") << " ms, server "
            << p50(c, "server_ttft_ms") << " ms (before the server's read " << p50(c, "before_server_ms")
            << " ms, after its send " << p50(c, "after_server_ms") << " ms); client gap p50 " << p50(c, "client_gap_ms")
            << " ms, server " << p50(c, "server_gap_ms") << " ms\n";
  EXPECT_LT(std::fabs(p50(c, "client_gap_ms") - p50(c, "server_gap_ms")), 2.0) << c.dump(1).substr(0, 3000);
  // The server's TTFT is less than the client's by nginx's work on both legs and the TLS
  // handshake: that lies outside the server.
  EXPECT_LT(p50(c, "server_ttft_ms"), p50(c, "client_ttft_ms")) << c.dump(1).substr(0, 3000);
}
