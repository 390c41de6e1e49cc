// Root tier: the real agent, real BPF, against the sample target under load from `bench`.
// Skips (with the reason) where BPF cannot be used; a skip is never a pass.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent_util.hpp"
#include "bench/bench.hpp"
#include "proc_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;
using namespace ld::test::agent;
using nlohmann::json;

namespace {

TEST(RootAttach, MatchesBenchOnTheSampleTarget) {
  REQUIRE_BPF();
  Server server({"--prefill-base-ms", "200", "--token-ms", "40", "--tokens", "30"});
  ASSERT_GT(server.port, 0);
  ld::bench::BenchResult bench;
  json report = run_and_report(server.proc->pid(), "60s", [&] { bench = drive(server, 10, 2, 30); });
  ASSERT_FALSE(report.is_discarded());
  ASSERT_EQ(bench.failed, 0);

  EXPECT_EQ(report["summary"]["requests"], 10);
  EXPECT_EQ(report["summary"]["tokens"], bench.tokens);
  EXPECT_EQ(report["summary"]["tokens"], 300);

  // Server-side TTFT (request read -> first token sent) against client-side TTFT: matched by
  // rank, each within 15 ms; TPOT medians within 5 ms.
  std::vector<double> server_ttft;
  for (const auto& r : report["requests"]) server_ttft.push_back(r["ttft_ms"].get<double>());
  std::sort(server_ttft.begin(), server_ttft.end());
  auto client_ttft = sorted_ttfts_ms(bench);
  ASSERT_EQ(server_ttft.size(), client_ttft.size());
  for (size_t i = 0; i < server_ttft.size(); ++i) EXPECT_NEAR(server_ttft[i], client_ttft[i], 15.0) << "rank " << i;
  EXPECT_NEAR(report["summary"]["ttft_ms"]["p50"].get<double>(), bench.ttft_p50_ms, 15.0);
  EXPECT_NEAR(report["summary"]["tpot_ms"]["p50"].get<double>(), bench.tpot_median_ms, 5.0);

  json sock;
  for (const auto& p : report["probes"])
    if (p["name"] == "sock") sock = p;
  ASSERT_TRUE(sock.is_object()) << report["probes"].dump();
  EXPECT_EQ(sock["status"], "attached");
  EXPECT_EQ(sock["lost"], 0);
  EXPECT_GT(sock["events"].get<int>(), 300);
  for (const auto& p : report["probes"]) EXPECT_EQ(p["lost"], 0) << p.dump();

  // What the agent itself cost (the trailer's "agent"): measured, not left at zero.
  const json& agent = report["agent"];
  ASSERT_TRUE(agent.is_object()) << report.dump().substr(0, 400);
  EXPECT_GT(agent["attach_ms"].get<double>(), 0);
  EXPECT_GT(agent["attach_cpu_ms"].get<double>(), 0);    // the verifier runs in the agent's time
  EXPECT_GT(agent["recording_ms"].get<double>(), 1000);  // ten requests of 30 tokens at 40 ms
  EXPECT_GT(agent["cpu_ms"].get<double>(), 0);
  EXPECT_GE(agent["wakeups"].get<int>(), 1);
  EXPECT_GT(agent["peak_rss_mib"].get<double>(), 1);
}

// Real servers differ on the wire; the timeline must be right for each of them, through
// either way in of the sock probe: the socket layer's tracepoints (6.3+, the default here) and
// the syscall exits older kernels get (--sock-hook syscall-exits).
struct WireCase {
  std::vector<std::string> server_args;
  bool syscall_exits;
};

class RootWire : public ::testing::TestWithParam<WireCase> {};

TEST_P(RootWire, CountsEveryRequestAndToken) {
  REQUIRE_BPF();
  const WireCase& wire_case = GetParam();
  std::vector<std::string> args{"--token-ms", "5", "--tokens", "8", "--prefill-base-ms", "20"};
  for (const auto& a : wire_case.server_args) args.push_back(a);
  Server server(args);
  ASSERT_GT(server.port, 0);
  ld::bench::BenchResult bench;
  std::vector<std::string> hook;
  if (wire_case.syscall_exits) hook = {"--sock-hook", "syscall-exits"};
  json report = run_and_report(
      server.proc->pid(), "60s", [&] { bench = drive(server, 6, 2, 8); }, hook);
  ASSERT_FALSE(report.is_discarded());
  ASSERT_EQ(bench.failed, 0);
  EXPECT_EQ(bench.tokens, 6u * 8u);
  EXPECT_EQ(report["summary"]["requests"], 6);
  EXPECT_EQ(report["summary"]["tokens"], bench.tokens);
  EXPECT_NEAR(report["summary"]["ttft_ms"]["p50"].get<double>(), bench.ttft_p50_ms, 15.0);
  // Each wire's tokens leave through its own syscall (send() is sendto(2)); all of them counted.
  const std::map<std::string, std::string> token_syscall{
      {"openai", "sendto"}, {"llamacpp", "sendto"}, {"uvicorn", "write"}, {"rust", "writev"}, {"msg", "sendmsg"}};
  const auto& sa = wire_case.server_args;
  auto wire = std::find(sa.begin(), sa.end(), "--wire");
  const std::string expected = token_syscall.at(wire == sa.end() ? "openai" : *std::next(wire));
  EXPECT_EQ(report["summary"]["token_send_syscalls"][expected], bench.tokens) << report["summary"].dump();

  // The probes table says which way in was taken.
  std::string reason;
  for (const auto& p : report["probes"])
    if (p["name"] == "sock") reason = p.value("reason", "");
  // A kernel without the socket layer's tracepoints (before 6.3) takes the exits and says why.
  const bool socket_layer = !wire_case.syscall_exits && ld::test::kernel_has_typed_tracepoint("sock_send_length");
  const char* way = socket_layer ? "socket-layer tracepoints" : "read/write/readv/writev";
  EXPECT_EQ(reason.rfind(way, 0), 0u) << reason;
  if (!wire_case.syscall_exits && !socket_layer) {
    EXPECT_NE(reason.find("no socket-layer tracepoints: they came in Linux 6.3"), std::string::npos) << reason;
  }
}

std::vector<WireCase> wire_cases() {
  const std::vector<std::vector<std::string>> servers{
      {"--wire", "openai"},  {"--wire", "llamacpp", "--close-after-stream"},
      {"--wire", "uvicorn"}, {"--wire", "rust"},
      {"--wire", "msg"},     {"--plain"}};
  std::vector<WireCase> cases;
  for (bool exits : {false, true})
    for (const auto& s : servers) cases.push_back({s, exits});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Servers, RootWire, ::testing::ValuesIn(wire_cases()), [](const auto& info) {
  std::string name;
  for (const auto& a : info.param.server_args)
    for (char c : a)
      if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  return name + (info.param.syscall_exits ? "_SyscallExits" : "_SocketLayer");
});

TEST(RootAttach, TokenLogReplacesSocketSends) {
  REQUIRE_BPF();
  Server server({"--prefill-base-ms", "50", "--token-ms", "10", "--tokens", "7"});
  ASSERT_GT(server.port, 0);
  std::string log = "/tmp/ld-tokens-" + std::to_string(getpid()) + ".jsonl";
  ld::bench::BenchResult bench;
  json report = run_and_report(server.proc->pid(), "60s",
                               [&] {
                                 ld::bench::BenchOptions options;
                                 options.url = server.url();
                                 options.requests = 4;
                                 options.concurrency = 2;
                                 options.max_tokens = 7;
                                 options.tokens_out = log;
                                 bench = ld::bench::run_bench(options);
                               },
                               {"--tokens", "jsonl:" + log});
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["token_source"], "jsonl:" + log);
  EXPECT_EQ(report["summary"]["requests"], 4);
  EXPECT_EQ(report["summary"]["tokens"], 28);
  // The client's own times, so the report equals the bench's numbers.
  EXPECT_NEAR(report["summary"]["ttft_ms"]["p50"].get<double>(), bench.ttft_p50_ms, 0.01);
  EXPECT_NEAR(report["summary"]["tpot_ms"]["p50"].get<double>(), bench.tpot_median_ms, 0.01);
  unlink(log.c_str());
}

TEST(RootAttach, SeveralPidsAreOneReport) {
  REQUIRE_BPF();
  Server a({"--token-ms", "5", "--tokens", "4"});
  Server b({"--token-ms", "5", "--tokens", "6", "--wire", "rust"});
  ASSERT_GT(a.port, 0);
  ASSERT_GT(b.port, 0);
  json report = run_and_report(a.proc->pid(), "60s",
                               [&] {
                                 drive(a, 2, 1, 4);
                                 drive(b, 3, 1, 6);
                               },
                               {"--pid", std::to_string(b.proc->pid())});
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["summary"]["requests"], 5);
  EXPECT_EQ(report["summary"]["tokens"], 2 * 4 + 3 * 6);
  EXPECT_EQ(report["target"]["pids"].size(), 2u);
}

TEST(RootAttach, ChildrenForkedAfterAttachAreFollowed) {
  REQUIRE_BPF();
  // A launcher (like a supervisor or vLLM's API process) that starts the server only after
  // the agent is attached: only the in-kernel fork hook can add it.
  Child launcher({"/bin/sh", "-c", "sleep 2; " + kServer + " --port 0 --token-ms 5 --tokens 5 & wait"});
  auto agent = start_attach(launcher.pid(), {"--children", "--duration", "60s", "--format", "json"});
  ASSERT_TRUE(launcher.wait_for_output("listening on", 20s));
  std::smatch m;
  std::string out = launcher.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(listening on 127\.0\.0\.1:(\d+))")));
  drive("http://127.0.0.1:" + std::string(m[1]) + "/v1/completions", 3, 1, 5);
  agent->signal(SIGINT);
  ASSERT_EQ(agent->wait(20s).value_or(-1), 0) << agent->err();
  json report = json::parse(agent->out(), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["summary"]["requests"], 3);
  EXPECT_EQ(report["summary"]["tokens"], 15);
}

// The threads of `pid` that still hold a capability for loading or attaching (CAP_SYS_ADMIN,
// CAP_PERFMON, CAP_BPF), as " tid tid..."; and how many threads were looked at.
std::string attaching_threads(int pid, int* threads) {
  std::string held;
  *threads = 0;
  for (const auto& [tid, effective] : ld::test::thread_capabilities(pid)) {
    (*threads)++;
    const unsigned long long attach_caps = (1ULL << 21) | (1ULL << 38) | (1ULL << 39);
    if (effective & attach_caps) held += " " + tid;
    EXPECT_NE(effective & (1ULL << 2), 0u) << "CAP_DAC_READ_SEARCH (token logs, /proc) dropped by " << tid;
  }
  return held;
}

TEST(RootAttach, DropsLoadingPrivilegesOnceAttached) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5"});
  // Every probe but gil (which may attach later: below).
  auto agent = start_attach(server.proc->pid(), {"--duration", "5m", "--probes",
                                                 "sock,sched,perf,memory,disk,futex,tcp,cgroup,reclaim,cpufreq"});
  // Capabilities are per thread: every thread the agent still runs must have dropped them.
  // One reading thread; the cgroup sampler runs only under a CPU quota (its threads'
  // capabilities: CgroupProbe.QuotaSetDuringTheRunIsSampledEvery50ms).
  int threads = 0;
  EXPECT_EQ(attaching_threads(agent->pid(), &threads), "");
  EXPECT_GE(threads, 1);
  agent->signal(SIGINT);
  EXPECT_EQ(agent->wait(20s).value_or(-1), 0) << agent->err();
}

// The gil probe attaches its learning uprobe when it finds a Python, which needs CAP_SYS_ADMIN:
// kept while it looks at a new target's maps (a launcher may exec python later; 10 s), then
// dropped at the next tick.
TEST(RootAttach, KeepsAttachingPrivilegesOnlyWhileTheGilProbeMayAttach) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5"});
  auto agent = start_attach(server.proc->pid(), {"--duration", "5m", "--read-interval", "1s"});
  int threads = 0;
  EXPECT_NE(attaching_threads(agent->pid(), &threads), "") << "dropped before the GIL probe's search ended";
  auto until = std::chrono::steady_clock::now() + 25s;
  std::string held;
  while (!(held = attaching_threads(agent->pid(), &threads)).empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(200ms);
  EXPECT_EQ(held, "") << "still held 25 s after attach by" << held;
  agent->signal(SIGINT);
  EXPECT_EQ(agent->wait(20s).value_or(-1), 0) << agent->err();
}

TEST(RootAttach, SigintStillPrintsTheReportAndLeavesNothingLoaded) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5", "--tokens", "5"});
  ASSERT_GT(server.port, 0);
  int before = loaded_ld_programs();
  auto agent = start_attach(server.proc->pid(), {"--duration", "5m", "--format", "json"});
  EXPECT_GT(loaded_ld_programs(), before) << "probes should be loaded while attached";
  drive(server, 2, 1, 5);
  agent->signal(SIGINT);
  auto code = agent->wait(20s);
  ASSERT_TRUE(code.has_value()) << "attach did not stop on SIGINT";
  EXPECT_EQ(*code, 0) << agent->err();
  json report = json::parse(agent->out(), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << agent->out();
  EXPECT_EQ(report["schema"], "latency-doctor/report/v1");
  EXPECT_EQ(report["summary"]["requests"], 2);
  EXPECT_EQ(loaded_ld_programs_settled(before), before);
}

// SIGINT while the probes are still loading (on several threads): the attach completes, the
// recording stops at once with a report, and every program is gone afterwards.
TEST(RootAttach, SigintWhileLoadingStillReportsAndLeavesNothingLoaded) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5", "--tokens", "5"});
  ASSERT_GT(server.port, 0);
  int before = loaded_ld_programs();
  Child agent({kAgent, "attach", "--pid", std::to_string(server.proc->pid()), "--duration", "5m", "--format", "json"});
  // The first of our programs in the kernel: the agent is inside the loading, past installing
  // its signal handlers.
  auto until = std::chrono::steady_clock::now() + 20s;
  while (loaded_ld_programs() <= before && std::chrono::steady_clock::now() < until && !agent.wait(0ms))
    std::this_thread::sleep_for(5ms);
  bool mid_attach = agent.err().find("attached to pid") == std::string::npos;
  agent.signal(SIGINT);
  auto code = agent.wait(20s);
  ASSERT_TRUE(code.has_value()) << "attach did not stop on SIGINT";
  EXPECT_EQ(*code, 0) << agent.err();
  json report = json::parse(agent.out(), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << agent.out();
  EXPECT_EQ(report["schema"], "latency-doctor/report/v1");
  EXPECT_NE(agent.err().find("attached to pid"), std::string::npos) << agent.err();
  EXPECT_EQ(loaded_ld_programs_settled(before), before);
  if (!mid_attach) std::printf("note: the signal came after the attach had finished\n");
}

TEST(RootAttach, Sigkill_LeavesNothingLoaded) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5"});
  int before = loaded_ld_programs();
  auto agent = start_attach(server.proc->pid(), {"--duration", "5m"});
  EXPECT_GT(loaded_ld_programs(), before);
  agent->signal(SIGKILL);
  agent->wait(10s);
  EXPECT_EQ(loaded_ld_programs_settled(before), before);
}

TEST(RootAttach, TargetExitEndsTheTraceWithAReport) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5", "--tokens", "4"});
  // The exit ends the wait at once (the target's pidfd), not at the end of a read interval:
  // with one of 10 s the agent must be gone well before it.
  auto agent = start_attach(server.proc->pid(), {"--duration", "5m", "--format", "json", "--read-interval", "10s"});
  drive(server, 3, 1, 4);
  std::this_thread::sleep_for(500ms);  // past the first wake-up's reading, if any
  server.proc->signal(SIGKILL);
  auto code = agent->wait(8s);
  ASSERT_TRUE(code.has_value()) << "attach kept running after its target died";
  EXPECT_EQ(*code, 0);
  json report = json::parse(agent->out(), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["summary"]["requests"], 3);
  EXPECT_NE(agent->err().find("target exited"), std::string::npos) << agent->err();
}

TEST(RootAttach, RecordedTraceGivesTheSameReport) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5", "--tokens", "6", "--wire", "uvicorn"});
  std::string trace = "/tmp/ld-rt-" + std::to_string(getpid()) + ".ldtrace";
  json live = run_and_report(server.proc->pid(), "60s", [&] { drive(server, 4, 2, 6); }, {"--record", trace});
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Child report({kAgent, "report", trace, "--format", "json"});
  ASSERT_EQ(report.wait(30s).value_or(-1), 0) << report.err();
  json replay = json::parse(report.out(), nullptr, false);
  ASSERT_FALSE(replay.is_discarded());
  EXPECT_EQ(replay["summary"], live["summary"]);
  EXPECT_EQ(replay["requests"], live["requests"]);
  EXPECT_EQ(replay["window"], live["window"]);
  unlink(trace.c_str());
}

TEST(RootAttach, Kill9DuringRecordKeepsTheFlushedChunks) {
  REQUIRE_BPF();
  Server server({"--token-ms", "5", "--tokens", "5"});
  std::string trace = "/tmp/ld-k9-" + std::to_string(getpid()) + ".ldtrace";
  Child rec({kAgent, "record", "--pid", std::to_string(server.proc->pid()), "--duration", "5m", "--read-interval", "1s",
             "-o", trace});
  ASSERT_TRUE([&] {
    for (int i = 0; i < 500; ++i) {
      if (rec.err().find("attached to pid") != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }());
  drive(server, 3, 1, 5);
  std::this_thread::sleep_for(2500ms);  // the recorder flushes a chunk every read interval
  rec.signal(SIGKILL);
  rec.wait(10s);
  Child report({kAgent, "report", trace, "--format", "json"});
  ASSERT_EQ(report.wait(30s).value_or(-1), 0) << report.err();
  json replay = json::parse(report.out(), nullptr, false);
  ASSERT_FALSE(replay.is_discarded());
  EXPECT_EQ(replay["summary"]["requests"], 3);
  EXPECT_NE(report.err().find("no trailer"), std::string::npos) << report.err();
  unlink(trace.c_str());
}

// --read-interval sets how often the agent wakes in a steady state: on an idle target the
// wake-ups (the report's agent.wakeups, its voluntary context switches while recording) follow
// it, and a wake-up once the duration ends still writes the report.
TEST(RootAttach, ReadIntervalSetsHowOftenTheAgentWakes) {
  REQUIRE_BPF();
  auto wakeups_with = [](const std::string& interval) {
    Child idle({"/bin/sleep", "60"});
    auto agent = start_attach(idle.pid(), {"--duration", "3s", "--read-interval", interval, "--format", "json"});
    auto code = agent->wait(30s);
    EXPECT_EQ(code.value_or(-1), 0) << agent->err();
    json report = json::parse(agent->out(), nullptr, false);
    idle.signal(SIGKILL);
    if (report.is_discarded() || !report["agent"].is_object()) {
      ADD_FAILURE() << "no report with --read-interval " << interval << ": " << agent->err();
      return -1;
    }
    return report["agent"]["wakeups"].get<int>();
  };
  int often = wakeups_with("200ms");
  int seldom = wakeups_with("3s");
  ASSERT_GE(often, 0);
  ASSERT_GE(seldom, 0);
  // 3 s at 200 ms is ~15 wake-ups, at 3 s none but the end's; the stop's own switches are alike.
  EXPECT_GE(often, seldom + 8) << "200ms: " << often << ", 3s: " << seldom;
}

TEST(RootAttach, BadTargetsAndFlagsGiveOneLineErrors) {
  REQUIRE_BPF();
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  std::vector<Case> cases{
      {{"attach", "--pid", "0"}, 1, "not a process id"},
      {{"attach", "--pid", "999999999"}, 2, "no process with pid"},
      {{"attach", "--pid", "1", "--duration", "soon"}, 1, "--duration soon"},
      {{"attach", "--pid", "1", "--format", "pdf"}, 1, "--format pdf"},
      {{"attach", "--pid", "1", "--tokens", "csv:x"}, 1, "--tokens csv:x"},
      {{"attach", "--pid", "1", "--probes", "nope"}, 1, "unknown probe 'nope'"},
      {{"attach", "--pid", "1", "--read-interval", "20s"}, 1, "--read-interval 20s"},
      {{"attach", "--pid", "1", "--read-interval", "50ms"}, 1, "--read-interval 50ms"},
      {{"record", "--pid", "1", "-o", "/tmp/never-written", "--read-interval", "often"}, 1, "--read-interval often"},
      {{"attach", "--pid", "1", "-o", "/nonexistent-dir/r.json"}, 2, "cannot write /nonexistent-dir/r.json"},
      {{"attach"}, 1, "--pid"},
      {{"report", "/nonexistent.ldtrace"}, 2, "cannot read /nonexistent.ldtrace"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv{kAgent};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    Child agent(argv);
    auto code = agent.wait(20s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, c.code) << c.args.back() << ": " << agent.err();
    EXPECT_NE(agent.err().find(c.message), std::string::npos) << agent.err();
  }
}

TEST(RootAttach, OwnPidIsRefused) {
  REQUIRE_BPF();
  // `latency-doctor attach --pid $$` from a shell that execs it: the agent's own pid.
  Child agent({"/bin/sh", "-c", "exec " + kAgent + " attach --pid $$ --duration 1s"});
  EXPECT_EQ(agent.wait(20s).value_or(-1), 1);
  EXPECT_NE(agent.err().find("latency-doctor itself"), std::string::npos) << agent.err();
}

TEST(RootAttach, WithoutPrivilegeSaysWhatIsMissing) {
  REQUIRE_BPF();
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
  std::ifstream paranoid("/proc/sys/kernel/unprivileged_bpf_disabled");
  int disabled = 0;
  paranoid >> disabled;
  if (disabled == 0) GTEST_SKIP() << "unprivileged BPF is enabled on this host";
  Server server({"--token-ms", "5"});
  Child agent({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", kAgent,
               "attach", "--pid", std::to_string(server.proc->pid()), "--duration", "1s"});
  EXPECT_EQ(agent.wait(20s).value_or(-1), 2);
  EXPECT_NE(agent.err().find("permission denied"), std::string::npos) << agent.err();
  EXPECT_NE(agent.err().find("CAP_BPF"), std::string::npos) << agent.err();
}

}  // namespace
