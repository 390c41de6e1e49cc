// latency-doctor serve as deployed: a real Prometheus scraping it while the sample server runs
// under `latency-doctor bench` with an injected fault; OTLP to a receiver, decoded with the
// OTLP protobuf definitions; a restarted target found again; SIGKILL mid-run; dump.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/test_http_receiver.hpp"
#include "agent_util.hpp"
#include "trace/trace_file.hpp"

namespace fs = std::filesystem;
using namespace ld::test::agent;
using nlohmann::json;

namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// GET http://127.0.0.1:PORT/PATH; the body, "" on any failure.
std::string http_get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string data;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) data.append(buf, static_cast<size_t>(n));
  close(fd);
  auto body = data.find("\r\n\r\n");
  if (data.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
  std::string out = data.substr(body + 4);
  if (data.substr(0, body).find("chunked") != std::string::npos) {  // de-chunk
    std::string plain;
    size_t pos = 0;
    while (pos < out.size()) {
      size_t eol = out.find("\r\n", pos);
      if (eol == std::string::npos) break;
      size_t len = std::stoul(out.substr(pos, eol - pos), nullptr, 16);
      if (len == 0) break;
      plain += out.substr(eol + 2, len);
      pos = eol + 2 + len + 2;
    }
    out = plain;
  }
  return out;
}

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') out += static_cast<char>(c);
    else {
      char b[4];
      std::snprintf(b, sizeof(b), "%%%02X", c);
      out += b;
    }
  }
  return out;
}

// A metric's value in serve's own /metrics text (the first sample line starting with `series`).
double scrape_value(int port, const std::string& series) {
  std::string text = http_get(port, "/metrics");
  size_t at = 0;
  while ((at = text.find(series, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      size_t sp = text.find(' ', at + series.size());
      if (sp != std::string::npos && sp == at + series.size()) return std::stod(text.substr(sp + 1));
    }
    at += series.size();
  }
  return -1;
}

// Starts serve and waits for its "attached to pid" line.
std::unique_ptr<Child> start_serve(std::vector<std::string> args) {
  std::vector<std::string> argv{kAgent, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto serve = std::make_unique<Child>(argv);
  auto until = std::chrono::steady_clock::now() + 30s;
  while (serve->err().find("attached to pid") == std::string::npos && std::chrono::steady_clock::now() < until) {
    if (serve->wait(0ms)) break;
    std::this_thread::sleep_for(50ms);
  }
  return serve;
}

int run_bench(const std::string& url, int requests, int concurrency, int tokens) {
  Child bench({kAgent, "bench", "--url", url, "--requests", std::to_string(requests), "--concurrency",
               std::to_string(concurrency), "--max-tokens", std::to_string(tokens), "--quiet"});
  auto code = bench.wait(180s);
  EXPECT_EQ(code.value_or(-1), 0) << bench.err();
  // bench prints "requests N (M failed)"-style lines: take the completed count from its table.
  std::smatch m;
  std::string out = bench.out();
  if (std::regex_search(out, m, std::regex(R"(requests ok\s+(\d+))"))) return std::stoi(m[1]);
  return -1;
}

}  // namespace

TEST(Serve, RealPrometheusScrapesTtftCountAndTheInjectedCauseOnTop) {
  REQUIRE_BPF();
  if (access("/usr/bin/prometheus", X_OK) != 0)
    GTEST_SKIP() << "needs the Prometheus server (Debian package prometheus; scripts/setup.sh installs it)";
  Dir dir("prom");
  const std::string log = dir / "fault.log";
  Server server({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", log});
  ASSERT_GT(server.port, 0);
  const int metrics_port = free_port();
  auto serve = start_serve({"--pid", std::to_string(server.proc->pid()), "--metrics-addr",
                            "127.0.0.1:" + std::to_string(metrics_port), "--flight-dir", dir / "flight", "--socket",
                            dir / "serve.sock", "--window", "2s", "--read-interval", "1s"});
  ASSERT_NE(serve->err().find("attached to pid"), std::string::npos) << serve->err();

  const int prom_port = free_port();
  std::ofstream(dir / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                        << "scrape_configs:\n  - job_name: latency-doctor\n    static_configs:\n"
                                        << "      - targets: ['127.0.0.1:" << metrics_port << "']\n";
  Child prometheus({"/usr/bin/prometheus", "--config.file=" + dir / "prometheus.yml",
                    "--storage.tsdb.path=" + dir / "tsdb",
                    "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"});
  auto query = [&](const std::string& q) {
    return json::parse(http_get(prom_port, "/api/v1/query?query=" + url_encode(q)), nullptr, false);
  };
  // Prometheus is up and has scraped serve once.
  auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    json up = query("up{job=\"latency-doctor\"}");
    if (up.is_object() && up["status"] == "success" && !up["data"]["result"].empty() &&
        up["data"]["result"][0]["value"][1] == "1")
      break;
    std::this_thread::sleep_for(500ms);
  }

  const int requests = run_bench(server.url(), 6, 1, 30);
  ASSERT_EQ(requests, 6);

  // The TTFT histogram's count reaches what bench made, and the token-gap histogram's every gap
  // (30 tokens, 29 gaps a request), through scrape and storage. Waited for: a busy host delays
  // the windows (one waits while the last is analysed), it must not lose or add any.
  auto value_of = [&](const std::string& q) {
    json r = query(q);
    if (!r.is_object() || r["data"]["result"].empty()) return -1.0;
    return std::stod(r["data"]["result"][0]["value"][1].get<std::string>());
  };
  const std::string ttft_q = "sum(gen_ai_server_time_to_first_token_seconds_count)";
  const std::string gaps_q = "sum(gen_ai_server_time_per_output_token_seconds_count)";
  until = std::chrono::steady_clock::now() + 90s;
  while ((value_of(ttft_q) < requests || value_of(gaps_q) < requests * 29) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1s);
  std::this_thread::sleep_for(3s);  // one more window and scrape after the counts settled
  EXPECT_EQ(value_of(ttft_q), requests);
  EXPECT_EQ(value_of(gaps_q), requests * 29) << http_get(metrics_port, "/metrics");
  // Outlier time by cause: the injected cause is the largest.
  json by_cause = query("latency_doctor_outlier_seconds_total");
  ASSERT_TRUE(by_cause.is_object()) << "no answer from Prometheus";
  std::string top;
  double top_s = -1;
  for (const auto& series : by_cause["data"]["result"]) {
    double v = std::stod(series["value"][1].get<std::string>());
    if (v > top_s) {
      top_s = v;
      top = series["metric"]["cause"];
    }
  }
  // cpu_contention on top means the host starved the server (a busy host, or the test run at
  // idle priority): `attach` then blames it too.
  EXPECT_EQ(top, "disk_io") << by_cause.dump();
  EXPECT_GT(top_s, 0.3);

  // dump: the flight recorder's last minute, read back by `report` with every request.
  Child dump({kAgent, "dump", "--since", "2m", "-o", dir / "incident.ldtrace", "--socket", dir / "serve.sock"});
  ASSERT_EQ(dump.wait(60s).value_or(-1), 0) << dump.err();
  struct stat st {};
  ASSERT_EQ(stat((dir / "incident.ldtrace").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Child report({kAgent, "report", dir / "incident.ldtrace", "--format", "json"});
  ASSERT_EQ(report.wait(60s).value_or(-1), 0) << report.err();
  json rep = json::parse(report.out(), nullptr, false);
  EXPECT_EQ(rep["summary"]["requests"], requests);

  // SIGTERM: a clean stop, nothing left attached, the socket gone.
  const BpfIds ids = bpf_ids_of(serve->pid());
  EXPECT_GT(ids.progs.size(), 0u);
  EXPECT_GT(ids.links.size(), 0u);
  serve->signal(SIGTERM);
  EXPECT_EQ(serve->wait(30s).value_or(-1), 0) << serve->err();
  EXPECT_EQ(still_loaded_settled(ids), 0);
  EXPECT_FALSE(fs::exists(dir / "serve.sock"));
}

TEST(Serve, OtlpReceiverGetsDecodableMetricsAndOneSpanPerOutlier) {
  REQUIRE_BPF();
  if (access("/usr/bin/protoc", X_OK) != 0 || system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null") != 0)
    GTEST_SKIP() << "needs protoc and Python's protobuf (Debian protobuf-compiler, python3-protobuf) to decode OTLP";
  Dir dir("otlp");
  ld::test::HttpReceiver collector;
  Server server({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", dir / "fault.log"});
  const int metrics_port = free_port();
  auto serve = start_serve({"--pid", std::to_string(server.proc->pid()), "--metrics-addr",
                            "127.0.0.1:" + std::to_string(metrics_port), "--otlp-endpoint",
                            "http://127.0.0.1:" + std::to_string(collector.port()), "--flight-dir", dir / "flight",
                            "--socket", dir / "serve.sock", "--window", "2s", "--read-interval", "1s"});
  ASSERT_NE(serve->err().find("attached to pid"), std::string::npos) << serve->err();
  const int requests = run_bench(server.url(), 4, 1, 30);
  ASSERT_EQ(requests, 4);
  auto until = std::chrono::steady_clock::now() + 30s;
  while (scrape_value(metrics_port, "gen_ai_server_time_to_first_token_seconds_count") < requests &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(500ms);
  std::this_thread::sleep_for(3s);  // the window after: its OTLP push
  serve->signal(SIGTERM);
  EXPECT_EQ(serve->wait(30s).value_or(-1), 0) << serve->err();

  std::vector<std::string> args{"/usr/bin/python3", std::string(LD_SOURCE_DIR) + "/tests/integration/otlp_decode.py",
                                std::string(LD_SOURCE_DIR) + "/tests/integration/otlp"};
  int n = 0;
  double last_outliers_total = 0;
  for (const auto& r : collector.requests()) {
    std::string file = dir / ("body-" + std::to_string(n++) + ".json");
    std::ofstream(file) << r.body;
    if (r.path == "/v1/metrics") {
      args.push_back("metrics:" + file);
      // The last push's outlier counter: every outlier counted so far.
      json body = json::parse(r.body);
      double total = 0;
      for (const auto& m : body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"])
        if (m["name"] == "latency_doctor.outliers")
          for (const auto& p : m["sum"]["dataPoints"]) total += p["asDouble"].get<double>();
      last_outliers_total = total;
    } else if (r.path == "/v1/traces") {
      args.push_back("traces:" + file);
    } else {
      ADD_FAILURE() << "unexpected path " << r.path;
    }
  }
  ASSERT_GT(args.size(), 3u) << "the receiver got nothing";
  Child decode(args);
  auto code = decode.wait(120s);
  json summary = json::parse(decode.out(), nullptr, false);
  ASSERT_EQ(code.value_or(-1), 0) << decode.out() << decode.err();
  ASSERT_TRUE(summary.is_object());
  EXPECT_GT(summary["metric_requests"].get<int>(), 0);
  for (const char* name : {"gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token",
                           "latency_doctor.outlier.duration", "latency_doctor.agent_cpu", "latency_doctor.agent_rss"}) {
    bool found = false;
    for (const auto& m : summary["metrics"]) found = found || m == name;
    EXPECT_TRUE(found) << name;
  }
  int outlier_spans =
      summary["span_names"].value("slow first token", 0) + summary["span_names"].value("slow token gap", 0);
  EXPECT_GT(outlier_spans, 0);
  EXPECT_EQ(outlier_spans, static_cast<int>(last_outliers_total)) << summary.dump();
}

TEST(Serve, RestartedTargetIsFoundAgainAndExportingGoesOn) {
  REQUIRE_BPF();
  Dir dir("restart");
  const int port = free_port();
  const std::string port_s = std::to_string(port);
  auto first = std::make_unique<Server>(std::vector<std::string>{"--port", port_s, "--token-ms", "5"});
  // Server() passes --port 0 first; the later --port wins. Check it took ours.
  ASSERT_EQ(first->port, port);
  const int metrics_port = free_port();
  auto serve = start_serve({"--listen-port", port_s, "--metrics-addr", "127.0.0.1:" + std::to_string(metrics_port),
                            "--flight-dir", dir / "flight", "--socket", dir / "serve.sock", "--window", "2s",
                            "--read-interval", "1s"});
  ASSERT_NE(serve->err().find("attached to pid " + std::to_string(first->proc->pid())), std::string::npos)
      << serve->err();
  const std::string url = "http://127.0.0.1:" + port_s + "/v1/completions";
  ASSERT_EQ(run_bench(url, 3, 1, 10), 3);
  auto wait_count = [&](double want) {
    auto until = std::chrono::steady_clock::now() + 30s;
    double v = -1;
    while ((v = scrape_value(metrics_port, "gen_ai_server_time_to_first_token_seconds_count")) < want &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(300ms);
    return v;
  };
  EXPECT_EQ(wait_count(3), 3);

  // Kill and restart: a new pid on the same port.
  first->proc->signal(SIGKILL);
  first->proc->wait(10s);
  first.reset();
  Server second({"--port", port_s, "--token-ms", "5"});
  ASSERT_EQ(second.port, port);
  auto until = std::chrono::steady_clock::now() + 20s;
  const std::string found = "target pid " + std::to_string(second.proc->pid());
  while (serve->err().find(found) == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(200ms);
  ASSERT_NE(serve->err().find(found), std::string::npos) << serve->err();
  EXPECT_EQ(scrape_value(metrics_port, "latency_doctor_targets"), 1);
  ASSERT_EQ(run_bench(url, 4, 1, 10), 4);
  EXPECT_EQ(wait_count(7), 7) << serve->err();
  EXPECT_EQ(scrape_value(metrics_port, "latency_doctor_targets_discovered_total"), 2);
  serve->signal(SIGTERM);
  EXPECT_EQ(serve->wait(30s).value_or(-1), 0) << serve->err();
}

TEST(Serve, SigkillLeavesAFlightRecordingThatReadsBackAndNothingAttached) {
  REQUIRE_BPF();
  Dir dir("kill");
  Server server({"--token-ms", "5"});
  const int metrics_port = free_port();
  auto serve = start_serve({"--pid", std::to_string(server.proc->pid()), "--metrics-addr",
                            "127.0.0.1:" + std::to_string(metrics_port), "--flight-dir", dir / "flight", "--socket",
                            dir / "serve.sock", "--read-interval", "1s"});
  ASSERT_NE(serve->err().find("attached to pid"), std::string::npos) << serve->err();
  const BpfIds ids = bpf_ids_of(serve->pid());
  EXPECT_GT(ids.progs.size(), 0u);
  EXPECT_GT(ids.links.size(), 0u);
  EXPECT_EQ(still_loaded(ids), static_cast<int>(ids.progs.size() + ids.links.size()));
  ASSERT_EQ(run_bench(server.url(), 5, 1, 10), 5);
  std::this_thread::sleep_for(2500ms);  // past a flush (the read interval)
  serve->signal(SIGKILL);
  serve->wait(10s);
  // The kernel closed its fds: every program and link went with them.
  EXPECT_EQ(still_loaded_settled(ids), 0);
  // The segment has no trailer but reads back to its last chunk, with every request.
  std::vector<std::string> segments;
  for (const auto& e : fs::directory_iterator(dir / "flight"))
    if (e.path().extension() == ".ldtrace") segments.push_back(e.path().string());
  ASSERT_EQ(segments.size(), 1u);
  struct stat st {};
  stat(segments[0].c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  uint64_t records = 0;
  auto summary = ld::trace::read_trace(segments[0], [&](const ld_hdr&) { records++; });
  EXPECT_GT(records, 0u);
  EXPECT_EQ(summary.chunks_bad, 0u);
  EXPECT_TRUE(summary.trailer.is_null());
  Child report({kAgent, "report", segments[0], "--format", "json"});
  ASSERT_EQ(report.wait(60s).value_or(-1), 0) << report.err();
  json rep = json::parse(report.out(), nullptr, false);
  EXPECT_EQ(rep["summary"]["requests"], 5);
  // A new serve replaces the socket the killed one left.
  auto again = start_serve({"--pid", std::to_string(server.proc->pid()), "--metrics-addr", "off", "--flight-dir",
                            dir / "flight", "--socket", dir / "serve.sock"});
  EXPECT_NE(again->err().find("attached to pid"), std::string::npos) << again->err();
  // SIGHUP reads the rule files again; the daemon goes on.
  again->signal(SIGHUP);
  auto until_reload = std::chrono::steady_clock::now() + 20s;
  while (again->err().find("rules reloaded") == std::string::npos && std::chrono::steady_clock::now() < until_reload)
    std::this_thread::sleep_for(100ms);
  EXPECT_NE(again->err().find("rules reloaded"), std::string::npos) << again->err();
  EXPECT_FALSE(again->wait(0ms).has_value()) << "serve stopped on SIGHUP";
  again->signal(SIGINT);
  EXPECT_EQ(again->wait(30s).value_or(-1), 0) << again->err();
  // Only a --pid, and it is not alive: nothing to wait for, a runtime error.
  Child gone({kAgent, "serve", "--pid", "999999999", "--metrics-addr", "off", "--flight-dir", dir / "flight",
              "--socket", dir / "serve.sock"});
  EXPECT_EQ(gone.wait(30s).value_or(-1), 2) << gone.err();
  EXPECT_NE(gone.err().find("no process with pid 999999999"), std::string::npos) << gone.err();
}
