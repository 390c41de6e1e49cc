// Tests for the bench client: SSE parsing, statistics, the loopback guard, the token log, and
// end-to-end runs against a freshly started ld-sample-server in every --wire mode.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/bench.hpp"

namespace fs = std::filesystem;
using namespace ld::bench;

namespace {

std::vector<SseEvent> parse_all(const std::vector<std::string>& pieces) {
  std::vector<SseEvent> out;
  SseParser p([&](const SseEvent& e) { out.push_back(e); });
  uint64_t t = 1;
  for (const auto& piece : pieces) p.feed(piece, t++);
  return out;
}

std::vector<std::string> datas(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.data);
  return out;
}

// LF and CRLF events, a comment, a multi-line event, a named event, [DONE].
const std::string kStream =
    ": ping\n\n"
    "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
    "data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"
    ": keep-alive comment\r\n"
    "event: message\r\n"
    "data: line1\r\n"
    "data: line2\n"
    "\n"
    "data:no-space\r\rdata: [DONE]\n\n";
const std::vector<std::string> kExpected = {"{\"choices\":[{\"text\":\"a\"}]}", "{\"choices\":[{\"text\":\"b\"}]}",
                                            "line1\nline2", "no-space", "[DONE]"};

}  // namespace

// ------------------------------------------------------------------------------------ SseParser

TEST(SseParser, WholeStream) { EXPECT_EQ(datas(parse_all({kStream})), kExpected); }

TEST(SseParser, EverySplitPositionGivesSameEvents) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    auto got = datas(parse_all({kStream.substr(0, cut), kStream.substr(cut)}));
    EXPECT_EQ(got, kExpected) << "split at byte " << cut;
  }
}

TEST(SseParser, EveryTwoSplitPositionsGiveSameEvents) {
  for (size_t a = 0; a <= kStream.size(); ++a)
    for (size_t b = a; b <= kStream.size(); ++b) {
      auto got = datas(parse_all({kStream.substr(0, a), kStream.substr(a, b - a), kStream.substr(b)}));
      ASSERT_EQ(got, kExpected) << "split at bytes " << a << "," << b;
    }
}

TEST(SseParser, ByteAtATime) {
  std::vector<std::string> bytes;
  for (char c : kStream) bytes.emplace_back(1, c);
  EXPECT_EQ(datas(parse_all(bytes)), kExpected);
}

TEST(SseParser, TimestampIsWhenTheBlankLineArrives) {
  // Event 1 completes in the second feed (t=2); event 2 in the fourth (t=4).
  auto ev = parse_all({"data: one\n", "\ndata: tw", "o\r\n", "\r\n"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "one");
  EXPECT_EQ(ev[0].t_ns, 2u);
  EXPECT_EQ(ev[1].data, "two");
  EXPECT_EQ(ev[1].t_ns, 4u);
}

TEST(SseParser, SeveralEventsInOneFeedShareItsTime) {
  auto ev = parse_all({"data: a\n\ndata: b\n\ndata: c\n\n"});
  ASSERT_EQ(ev.size(), 3u);
  for (const auto& e : ev) EXPECT_EQ(e.t_ns, 1u);
}

TEST(SseParser, CommentsAndDataLessEventsAreNotDispatched) {
  EXPECT_TRUE(parse_all({": ping\n\n:\n\nevent: x\n\nid: 3\n\nretry: 10\n\n"}).empty());
}

TEST(SseParser, EmptyDataLineIsAnEvent) {
  auto ev = parse_all({"data\n\ndata:\n\n"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "");
  EXPECT_EQ(ev[1].data, "");
}

TEST(SseParser, EventFieldAndBom) {
  auto ev = parse_all({"\xEF\xBB",
                       "\xBF"
                       "event: delta\ndata: x\n\ndata: y\n\n"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].event, "delta");
  EXPECT_EQ(ev[0].data, "x");
  EXPECT_EQ(ev[1].event, "");  // the event type resets after dispatch
}

TEST(SseParser, UnterminatedEventIsNotDispatched) { EXPECT_TRUE(parse_all({"data: partial\n"}).empty()); }

// ------------------------------------------------------------------------------------ tokens

TEST(TokenEvents, DoneIsNotAToken) {
  EXPECT_FALSE(is_token_event("[DONE]"));
  EXPECT_TRUE(is_token_event("{\"choices\":[{\"index\":0,\"text\":\"tok\"}]}"));
  EXPECT_TRUE(is_token_event("not json at all"));
}

TEST(TokenEvents, UsageOnlyEventIsNotAToken) {
  const std::string usage = R"({"id":"c","choices":[],"usage":{"prompt_tokens":64,"completion_tokens":8}})";
  EXPECT_FALSE(is_token_event(usage));
  EXPECT_EQ(usage_prompt_tokens(usage), 64);
  EXPECT_FALSE(is_token_event(R"({"usage":{"prompt_tokens":1}})"));
  // A token that also carries usage (some servers put it on the last token) still counts.
  EXPECT_TRUE(is_token_event(R"({"choices":[{"text":"x"}],"usage":{"prompt_tokens":1}})"));
  EXPECT_TRUE(is_token_event(R"({"choices":[{"delta":{"content":"x"}}],"usage":{}})"));
  EXPECT_EQ(usage_prompt_tokens(R"({"choices":[{"text":"usage"}]})"), std::nullopt);
}

// ------------------------------------------------------------------------------------ stats

TEST(BenchStats, SummarizePoolsGapsAndSkipsFailures) {
  const uint64_t ms = 1000000;
  BenchResult r;
  BenchRequestResult a;
  a.start_mono_ns = 0;
  a.token_mono_ns = {10 * ms, 12 * ms, 16 * ms};  // gaps 2, 4
  a.first_token_mono_ns = 10 * ms;
  BenchRequestResult b;
  b.start_mono_ns = 100 * ms;
  b.token_mono_ns = {120 * ms, 126 * ms};  // gap 6
  b.first_token_mono_ns = 120 * ms;
  BenchRequestResult failed;
  failed.start_mono_ns = 200 * ms;
  failed.token_mono_ns = {201 * ms, 500 * ms};
  failed.first_token_mono_ns = 201 * ms;
  failed.error = "Timeout was reached";
  r.requests = {a, b, failed};
  summarize(r);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.tokens, 7u);
  EXPECT_DOUBLE_EQ(r.ttft_p50_ms, 15);  // TTFTs 10 and 20
  EXPECT_DOUBLE_EQ(r.ttft_p90_ms, 19);
  EXPECT_DOUBLE_EQ(r.tpot_median_ms, 4);  // gaps 2, 4, 6
  EXPECT_DOUBLE_EQ(r.tpot_stddev_ms, std::sqrt(8.0 / 3.0));
  std::string s = format_bench_summary(r);
  EXPECT_NE(s.find("TTFT P50 (ms)"), std::string::npos) << s;
  EXPECT_NE(s.find("15.00"), std::string::npos) << s;
  EXPECT_NE(s.find("Timeout was reached"), std::string::npos) << s;
}

TEST(BenchStats, SummaryOfNothingSaysNA) {
  BenchResult r;
  summarize(r);
  EXPECT_NE(format_bench_summary(r).find("n/a"), std::string::npos);
}

// ------------------------------------------------------------------------------------ URL guard

TEST(BenchUrl, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "[::1]", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h :
       {"10.0.0.1", "128.0.0.1", "example.com", "localhost.example.com", "[::2]", "0.0.0.0", "", "127.0.0.1.nip.io"})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(BenchUrl, CheckUrl) {
  EXPECT_NO_THROW(check_url("http://127.0.0.1:8000/v1/completions", false));
  EXPECT_NO_THROW(check_url("http://localhost/v1/completions", false));
  EXPECT_NO_THROW(check_url("http://[::1]:8080/v1/chat/completions", false));
  EXPECT_THROW(check_url("http://10.1.2.3:8000/v1/completions", false), std::invalid_argument);
  EXPECT_THROW(check_url("https://api.openai.com/v1/completions", false), std::invalid_argument);
  EXPECT_NO_THROW(check_url("https://api.openai.com/v1/completions", true));
  EXPECT_THROW(check_url("ftp://127.0.0.1/x", false), std::invalid_argument);
  EXPECT_THROW(check_url("not a url", false), std::invalid_argument);
  try {
    check_url("http://192.168.1.5/v1/completions", false);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--allow-remote"), std::string::npos) << e.what();
  }
}

TEST(BenchUrl, RunBenchRefusesRemoteBeforeSendingAnything) {
  BenchOptions o;
  o.url = "http://198.51.100.7:8000/v1/completions";  // TEST-NET-2: never contacted
  EXPECT_THROW(run_bench(o), std::invalid_argument);
}

TEST(BenchOptionsCheck, BadOptionsThrow) {
  BenchOptions o;
  o.url = "http://127.0.0.1:1/v1/completions";
  o.concurrency = 0;
  EXPECT_THROW(run_bench(o), std::invalid_argument);
  o.concurrency = 1;
  o.timeout_s = 0;
  EXPECT_THROW(run_bench(o), std::invalid_argument);
}

// ------------------------------------------------------------------------------------ token log

namespace {
fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / (name + "." + std::to_string(getpid()) + "." +
                                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}
}  // namespace

TEST(BenchTokenLog, FormatAndMode) {
  auto path = temp_path("ld-bench-log");
  { std::ofstream(path) << "old content\n"; }
  fs::permissions(path, fs::perms::all);
  BenchRequestResult r;
  r.id = "req-1";
  r.start_mono_ns = 100;
  r.token_mono_ns = {150, 160};
  r.end_mono_ns = 170;
  r.prompt_tokens = 12;
  write_token_log(path, {r});
  auto lines = read_jsonl(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], nlohmann::json::parse(R"({"request":"req-1","event":"start","t_ns":100,
                                               "clock":"monotonic","input_tokens":12})"));
  EXPECT_EQ(lines[1], nlohmann::json::parse(R"({"request":"req-1","event":"token","t_ns":150,"clock":"monotonic"})"));
  EXPECT_EQ(lines[3]["event"], "end");
  EXPECT_EQ(lines[3]["t_ns"], 170);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  fs::remove(path);
}

TEST(BenchTokenLog, UnwritablePathThrowsBeforeLoad) {
  BenchOptions o;
  o.url = "http://127.0.0.1:1/v1/completions";
  o.tokens_out = "/nonexistent-dir/tokens.jsonl";
  EXPECT_THROW(run_bench(o), std::runtime_error);
}

// ------------------------------------------------------------------------------------ live server

namespace {

std::optional<fs::path> find_sample_server() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("LD_SAMPLE_SERVER")) candidates.emplace_back(env);
#ifdef LD_BUILD_DIR
  candidates.push_back(fs::path(LD_BUILD_DIR) / "ld-sample-server");
#endif
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(self.parent_path() / "ld-sample-server");
    candidates.push_back(self.parent_path().parent_path() / "ld-sample-server");
  }
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c;
  return std::nullopt;
}

// A sample server child process on an ephemeral port; always killed by the destructor.
class SampleServer {
 public:
  explicit SampleServer(const fs::path& exe, std::vector<std::string> args) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_t parent = getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) exec_child(exe, args, out[1], parent);
    ::close(out[1]);
    port_ = read_port(out[0]);
    ::close(out[0]);
    if (port_ == 0) {
      stop();
      throw std::runtime_error("ld-sample-server did not report a port");
    }
  }
  ~SampleServer() { stop(); }
  SampleServer(const SampleServer&) = delete;
  SampleServer& operator=(const SampleServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/v1/completions") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  // SIGTERM, then SIGKILL if it does not exit promptly. Returns the wait status.
  int stop() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
    pid_ = -1;
    return status_;
  }

 private:
  [[noreturn]] static void exec_child(const fs::path& exe, const std::vector<std::string>& args, int out_fd,
                                      pid_t parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test binary
    if (getppid() != parent) _exit(127);
    ::dup2(out_fd, STDOUT_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    _exit(127);
  }

  // Reads "listening on 127.0.0.1:PORT" (10 s budget). 0 on failure.
  static int read_port(int fd) {
    std::string buf;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (buf.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char tmp[256];
      ssize_t n = ::read(fd, tmp, sizeof tmp);
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
    }
    const std::string prefix = "listening on 127.0.0.1:";
    if (buf.rfind(prefix, 0) != 0) return 0;
    return std::atoi(buf.c_str() + prefix.size());
  }

  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = 0;
};

// One raw exchange on a fresh TCP connection: sends `request`, reads until the server closes
// (or 3 s pass).
std::string raw_exchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return {};
  }
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char tmp[4096];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) break;
    out.append(tmp, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

#define REQUIRE_SAMPLE_SERVER(var)                                                       \
  auto var = find_sample_server();                                                       \
  if (!var)                                                                              \
  GTEST_SKIP() << "ld-sample-server not found next to the test binary or in its parent " \
                  "directory (build the ld-sample-server target, or set LD_SAMPLE_SERVER)"

void expect_clean_run(const BenchResult& r, int requests, int tokens) {
  ASSERT_EQ(r.requests.size(), static_cast<size_t>(requests));
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.tokens, static_cast<uint64_t>(requests * tokens));
  for (const auto& q : r.requests) {
    EXPECT_EQ(q.error, "") << q.id;
    EXPECT_EQ(q.http_status, 200) << q.id;
    EXPECT_EQ(q.token_mono_ns.size(), static_cast<size_t>(tokens)) << q.id;
    EXPECT_GT(q.first_token_mono_ns, q.start_mono_ns) << q.id;  // TTFT > 0
    EXPECT_GE(q.end_mono_ns, q.token_mono_ns.back()) << q.id;
  }
  EXPECT_GT(r.ttft_p50_ms, 0);
  EXPECT_GT(r.tpot_median_ms, 0);
}

}  // namespace

class BenchLive : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(BenchLive, FourRequestsConcurrencyTwo) {
  REQUIRE_SAMPLE_SERVER(exe);
  std::vector<std::string> args = {"--port", "0", "--token-ms", "5", "--tokens", "8"};
  for (const auto& a : GetParam()) args.push_back(a);
  SampleServer server(*exe, args);
  BenchOptions o;
  o.url = server.url();
  o.requests = 4;
  o.concurrency = 2;
  o.max_tokens = 8;
  o.timeout_s = 30;
  std::vector<std::string> progress;
  BenchResult r = run_bench(o, [&](const std::string& s) { progress.push_back(s); });
  expect_clean_run(r, 4, 8);
  EXPECT_EQ(progress.size(), 4u);
  EXPECT_EQ(WEXITSTATUS(server.stop()), 0);  // SIGTERM is a clean exit
}

INSTANTIATE_TEST_SUITE_P(WireModes, BenchLive,
                         ::testing::Values(std::vector<std::string>{"--wire", "openai"},
                                           std::vector<std::string>{"--wire", "llamacpp"},
                                           std::vector<std::string>{"--wire", "uvicorn"},
                                           std::vector<std::string>{"--wire", "rust"},
                                           std::vector<std::string>{"--wire", "llamacpp", "--close-after-stream"},
                                           std::vector<std::string>{"--wire", "openai", "--plain"},
                                           std::vector<std::string>{"--wire", "rust", "--plain"}),
                         [](const auto& info) {
                           std::string name;
                           for (const auto& a : info.param)
                             for (char c : a)
                               if (std::isalnum(static_cast<unsigned char>(c))) name += c;
                           return name;
                         });

TEST(BenchLiveExtra, ChatEndpointMaxTokensAndTokenLog) {
  REQUIRE_SAMPLE_SERVER(exe);
  SampleServer server(*exe, {"--token-ms", "2", "--tokens", "50", "--wire", "llamacpp"});
  auto path = temp_path("ld-bench-live-log");
  BenchOptions o;
  o.url = server.url("/v1/chat/completions");
  o.requests = 3;
  o.concurrency = 3;
  o.max_tokens = 5;  // overrides the server's --tokens 50
  o.prompt_bytes = 1000;
  o.tokens_out = path;
  BenchResult r = run_bench(o);
  expect_clean_run(r, 3, 5);
  auto lines = read_jsonl(path);
  ASSERT_EQ(lines.size(), 3u * (1 + 5 + 1));
  EXPECT_EQ(lines[0]["event"], "start");
  EXPECT_EQ(lines[0]["clock"], "monotonic");
  EXPECT_TRUE(lines[0].contains("input_tokens"));  // from the llama.cpp-style usage event
  EXPECT_EQ(lines[6]["event"], "end");
  fs::remove(path);
}

TEST(BenchLiveExtra, PromptMixSendsTheSizesInTurn) {
  REQUIRE_SAMPLE_SERVER(exe);
  SampleServer server(*exe, {"--token-ms", "1", "--tokens", "3", "--wire", "llamacpp"});
  BenchOptions o;
  o.url = server.url("/v1/completions");
  o.requests = 4;
  o.concurrency = 1;
  o.max_tokens = 3;
  o.prompt_mix = {100, 3000};
  BenchResult r = run_bench(o);
  expect_clean_run(r, 4, 3);
  // The llama.cpp-style usage event counts the request body: requests 1 and 3 carried the long prompt.
  ASSERT_TRUE(r.requests[0].prompt_tokens && r.requests[1].prompt_tokens);
  EXPECT_EQ(r.requests[0].prompt_tokens, r.requests[2].prompt_tokens);
  EXPECT_EQ(r.requests[1].prompt_tokens, r.requests[3].prompt_tokens);
  EXPECT_GE(*r.requests[1].prompt_tokens - *r.requests[0].prompt_tokens, 700);  // bytes / 4
  o.prompt_mix.assign(1025, 10);
  EXPECT_THROW(run_bench(o), std::invalid_argument);
}

TEST(BenchLiveExtra, HttpErrorsAndRefusedConnectionsAreRecorded) {
  REQUIRE_SAMPLE_SERVER(exe);
  int closed_port;
  {
    SampleServer server(*exe, {"--token-ms", "1"});
    closed_port = server.port();
    BenchOptions o;
    o.url = server.url("/v1/nope");
    o.requests = 2;
    BenchResult r = run_bench(o);
    EXPECT_EQ(r.failed, 2);
    EXPECT_EQ(r.requests[0].http_status, 404);
    EXPECT_NE(r.requests[0].error.find("HTTP 404"), std::string::npos) << r.requests[0].error;
  }
  BenchOptions o;  // the server is gone: connection refused, not an exception
  o.url = "http://127.0.0.1:" + std::to_string(closed_port) + "/v1/completions";
  o.requests = 2;
  BenchResult r = run_bench(o);
  EXPECT_EQ(r.failed, 2);
  EXPECT_FALSE(r.requests[1].error.empty());
  EXPECT_NE(format_bench_summary(r).find("requests failed"), std::string::npos);
}

TEST(SampleServerLive, HealthKeepAliveAndMalformedRequests) {
  REQUIRE_SAMPLE_SERVER(exe);
  SampleServer server(*exe, {"--token-ms", "1", "--tokens", "2"});
  // Two requests on one connection: keep-alive answers both.
  std::string two = raw_exchange(server.port(),
                                 "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                                 "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(two.find("HTTP/1.1 200"), 0u) << two;
  EXPECT_NE(two.find("HTTP/1.1 200", 5), std::string::npos) << two;
  EXPECT_EQ(two.substr(two.size() - 2), "ok");

  for (const std::string& bad : {std::string("garbage\r\n\r\n"),
                                 std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: "
                                             "zz\r\n\r\n"),
                                 std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: "
                                             "9\r\n\r\n{\"max_tok"),
                                 std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: "
                                             "17\r\n\r\n{\"max_tokens\":-1}"),
                                 std::string("POST /v1/completions HTTP/1.1\r\nContent-Length: "
                                             "200\r\n\r\n") +
                                     std::string(100, '[') + std::string(100, ']'),
                                 std::string(70000, 'A')}) {
    std::string reply = raw_exchange(server.port(), bad);
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << bad.substr(0, 80) << " -> " << reply;
  }
  // Still alive and serving after all that.
  std::string ok = raw_exchange(server.port(), "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
}

// ------------------------------------------------------------------------------------ GPU targets

namespace {

// The stand-in CUDA runtime (tests/workloads/fake_cuda, target ld_fake_cudart).
std::optional<fs::path> find_fake_cudart() {
#ifdef LD_BUILD_DIR
  const fs::path p = fs::path(LD_BUILD_DIR) / "fake_cuda" / "libcudart.so.12";
  if (::access(p.c_str(), R_OK) == 0) return p;
#endif
  return std::nullopt;
}

#define REQUIRE_FAKE_CUDA(var)                                                  \
  auto var = find_fake_cudart();                                                \
  if (!var)                                                                     \
  GTEST_SKIP() << "fake_cuda/libcudart.so.12 not found in the build directory " \
                  "(build the ld_fake_cudart target)"

// One request alone (no other stream in its steps), `tokens` long: the gaps between its tokens, ms.
std::vector<double> lone_request_gaps(const std::string& url, int tokens) {
  BenchOptions o;
  o.url = url;
  o.requests = 1;
  o.max_tokens = tokens;
  o.timeout_s = 30;
  BenchResult r = run_bench(o);
  expect_clean_run(r, 1, tokens);
  std::vector<double> gaps;
  const auto& t = r.requests.at(0).token_mono_ns;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(static_cast<double>(t[i] - t[i - 1]) / 1e6);
  return gaps;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// With one stream, step k makes token k (from 1): a fault every 4th step lengthens the gaps that
// end at tokens 4, 8 and 12, gaps 2, 6 and 10 from 0. The simulated GPU's timeline and the burnt
// CPU both take at least their length in wall time, but a gap is measured at the client: the
// token before it may arrive late (its connection thread preempted), which moves time from the
// slow gap to the one before. So a slow gap needs half the fault, and with the gap before it
// (two steps) the whole fault; the typical gap stays under a quarter of it.
void expect_every_fourth_step_slower(const std::vector<double>& gaps, double fault_ms) {
  std::string all;
  for (double g : gaps) all += std::to_string(static_cast<int>(std::lround(g))) + " ";
  ASSERT_EQ(gaps.size(), 11u) << all;
  for (size_t i : {2u, 6u, 10u}) {
    EXPECT_GE(gaps[i], fault_ms / 2) << "gap " << i << " of " << all;
    EXPECT_GE(gaps[i - 1] + gaps[i], fault_ms) << "gaps " << i - 1 << "-" << i << " of " << all;
  }
  EXPECT_LT(median_of(gaps), fault_ms / 4) << all;
}

}  // namespace

TEST(SampleServerGpu, BatchStepsRunOnTheStandInGpu) {
  REQUIRE_SAMPLE_SERVER(exe);
  REQUIRE_FAKE_CUDA(cudart);
  SampleServer server(*exe, {"--engine", "batch", "--gpu-lib", cudart->string(), "--gpu-cpu-ms", "1", "--gpu-kernels",
                             "4", "--gpu-kernel-us", "1000", "--prefill-ms-per-kb", "4"});
  BenchOptions o;
  o.url = server.url();
  o.requests = 4;
  o.concurrency = 2;
  o.max_tokens = 8;
  o.timeout_s = 30;
  BenchResult r = run_bench(o);
  expect_clean_run(r, 4, 8);
  // A step is 1 ms of CPU and 4 ms of kernels; the kernels alone are wall time on the simulated
  // GPU whatever the host's load, so they bound the typical gap from below.
  EXPECT_GE(r.tpot_median_ms, 4.0);
  EXPECT_EQ(WEXITSTATUS(server.stop()), 0);
}

TEST(SampleServerGpu, GpuSlowAndHostStallSlowEveryNthStep) {
  REQUIRE_SAMPLE_SERVER(exe);
  REQUIRE_FAKE_CUDA(cudart);
  for (const char* fault : {"gpu_slow", "host_stall"}) {
    SCOPED_TRACE(fault);
    SampleServer server(
        *exe, {"--engine", "batch", "--gpu-lib", cudart->string(), "--gpu-cpu-ms", "0.5", "--gpu-kernels", "4",
               "--gpu-kernel-us", "1000", "--fault", fault, "--fault-every", "4", "--fault-ms", "60"});
    expect_every_fourth_step_slower(lone_request_gaps(server.url(), 12), 60);
  }
}

TEST(SampleServerGpu, GpuOptionsNeedTheBatchEngineAndALibrary) {
  REQUIRE_SAMPLE_SERVER(exe);
  const std::string server = exe->string();
  EXPECT_NE(std::system((server + " --gpu-lib /nonexistent >/dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((server + " --engine batch --fault gpu_slow >/dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((server + " --engine batch --gpu-lib /nonexistent/libcudart.so.12 >/dev/null 2>&1").c_str()),
            0);
}

TEST(PyGpuServerLive, ForwardsOnTheStandInGpuAndSlowForwards) {
  REQUIRE_FAKE_CUDA(cudart);
  if (std::system("/usr/bin/python3 -c 'import fastapi, uvicorn' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks fastapi or uvicorn (python3-fastapi, python3-uvicorn)";
  const std::string script = std::string(LD_TEST_DATA_DIR) + "/../target/py_gpu_server.py";
  SampleServer server("/usr/bin/python3", {script, "--cuda-lib", cudart->string(), "--layers", "8", "--layer-python-us",
                                           "50", "--kernel-us", "500", "--gpu-slow-every", "4", "--gpu-slow-ms", "60"});
  expect_every_fourth_step_slower(lone_request_gaps(server.url(), 12), 60);
  BenchOptions o;
  o.url = server.url("/v1/chat/completions");
  o.requests = 4;
  o.concurrency = 2;
  o.max_tokens = 5;
  o.timeout_s = 30;
  expect_clean_run(run_bench(o), 4, 5);
}

// The agent runs as root beside a production server: it must not carry the HTTP client's
// libraries (libcurl and its TLS, Kerberos, LDAP dependencies), which `bench` loads itself.
TEST(BenchLibcurl, AgentBinaryDoesNotLinkLibcurl) {
  const std::string cmd = std::string("readelf -d ") + LD_BUILD_DIR + "/latency-doctor 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string needed;
  char line[512];
  while (fgets(line, sizeof line, pipe))
    if (std::strstr(line, "(NEEDED)")) needed += line;
  pclose(pipe);
  ASSERT_NE(needed.find("libc.so.6"), std::string::npos) << "readelf gave no NEEDED list:\n" << needed;
  EXPECT_EQ(needed.find("libcurl"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libgnutls"), std::string::npos) << needed;
}

// Every request carries X-Request-Id (its id in the token log), and the log's start
// line has the client's local port, which the server sees as the peer port: what joins the log
// to the server's requests exactly. A one-shot server in the test checks both from the other end.
TEST(BenchLiveExtra, SendsItsRequestIdAndLogsItsPort) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  std::string head;
  int peer_port = 0;
  std::thread server([&] {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return;
    sockaddr_in peer{};
    socklen_t plen = sizeof peer;
    const int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_CLOEXEC);
    if (fd < 0) return;
    peer_port = ntohs(peer.sin_port);
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos) {
      pollfd q{fd, POLLIN, 0};
      if (::poll(&q, 1, 5000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    head = in.substr(0, in.find("\r\n\r\n"));
    const std::string reply =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n";
    ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    while (::recv(fd, buf, sizeof buf, 0) > 0) {
    }
    ::close(fd);
  });
  auto path = temp_path("ld-bench-id-log");
  BenchOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/completions";
  o.requests = 1;
  o.max_tokens = 2;
  o.timeout_s = 20;
  o.tokens_out = path;
  BenchResult r = run_bench(o);
  server.join();
  ::close(lfd);
  EXPECT_EQ(r.failed, 0) << r.requests[0].error;
  EXPECT_NE(head.find("\r\nX-Request-Id: req-1"), std::string::npos) << head;
  auto lines = read_jsonl(path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["event"], "start");
  EXPECT_GT(peer_port, 0);
  EXPECT_EQ(lines[0].value("local_port", 0), peer_port);
  fs::remove(path);
}
