// The agent and the sample target as root tests drive them: start, attach, load, report.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/bench.hpp"
#include "kernel_util.hpp"
#include "proc_util.hpp"

namespace ld::test::agent {

using ld::test::Child;

using namespace std::chrono_literals;
using nlohmann::json;

inline const std::string kAgent = std::string(LD_BUILD_DIR) + "/latency-doctor";
inline const std::string kServer = std::string(LD_BUILD_DIR) + "/ld-sample-server";

inline std::string skip_reason() { return ld::test::bpf_skip_reason(); }

#define REQUIRE_BPF()                                                \
  do {                                                               \
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

// Our programs are all named ld_*: count those loaded right now.
inline int loaded_ld_programs() {
  FILE* p = popen("bpftool prog list 2>/dev/null", "r");
  if (!p) return -1;
  char line[512];
  int count = 0;
  while (fgets(line, sizeof(line), p))
    if (std::regex_search(line, std::regex(R"(name ld_)"))) count++;
  pclose(p);
  return count;
}

// Programs are freed after an RCU grace period once their last fd closes, so the count can lag
// the agent's exit by a moment.
inline int loaded_ld_programs_settled(int expected) {
  int count = loaded_ld_programs();
  for (int i = 0; i < 100 && count != expected; ++i) {
    std::this_thread::sleep_for(100ms);
    count = loaded_ld_programs();
  }
  return count;
}

struct Server {
  std::unique_ptr<Child> proc;
  int port = 0;
  explicit Server(std::vector<std::string> extra) {
    std::vector<std::string> argv{kServer, "--port", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = std::make_unique<Child>(argv);
    if (!proc->wait_for_output("listening on", 10s)) return;
    std::smatch m;
    std::string out = proc->out();
    if (std::regex_search(out, m, std::regex(R"(listening on 127\.0\.0\.1:(\d+))"))) port = std::stoi(m[1]);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1/completions"; }
};

// Starts `attach` and waits until its probes are in the kernel.
inline std::unique_ptr<Child> start_attach(int pid, std::vector<std::string> extra) {
  std::vector<std::string> argv{kAgent, "attach", "--pid", std::to_string(pid)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto agent = std::make_unique<Child>(argv);
  auto until = std::chrono::steady_clock::now() + 20s;
  while (agent->err().find("attached to pid") == std::string::npos && std::chrono::steady_clock::now() < until) {
    if (agent->wait(0ms)) break;
    std::this_thread::sleep_for(20ms);
  }
  return agent;
}

inline ld::bench::BenchResult drive(const std::string& url, int requests, int concurrency, int tokens,
                                    size_t prompt_bytes = 256, const std::string& tokens_out = "") {
  ld::bench::BenchOptions options;
  options.url = url;
  options.requests = requests;
  options.concurrency = concurrency;
  options.max_tokens = tokens;
  options.prompt_bytes = prompt_bytes;
  options.tokens_out = tokens_out;
  return ld::bench::run_bench(options);
}

inline ld::bench::BenchResult drive(const Server& server, int requests, int concurrency, int tokens) {
  return drive(server.url(), requests, concurrency, tokens);
}

inline std::vector<double> sorted_ttfts_ms(const ld::bench::BenchResult& result) {
  std::vector<double> out;
  for (const auto& r : result.requests)
    if (r.first_token_mono_ns) out.push_back((r.first_token_mono_ns - r.start_mono_ns) / 1e6);
  std::sort(out.begin(), out.end());
  return out;
}

inline json run_and_report(int pid, const std::string& duration, const std::function<void()>& load,
                           std::vector<std::string> extra = {}) {
  std::string out = "/tmp/ld-report-" + std::to_string(getpid()) + ".json";
  std::vector<std::string> args{"--duration", duration, "--format", "json", "-o", out};
  args.insert(args.end(), extra.begin(), extra.end());
  auto agent = start_attach(pid, args);
  load();
  agent->signal(SIGINT);  // the load is done: stop now instead of waiting out the duration
  auto code = agent->wait(30s);
  EXPECT_TRUE(code.has_value());
  EXPECT_EQ(code.value_or(-1), 0) << agent->err();
  json report = json::parse(ld::test::read_file(out), nullptr, false);
  unlink(out.c_str());
  return report;
}

// A scratch directory for one test, removed after it.
struct Dir {
  std::filesystem::path path;
  explicit Dir(const std::string& name) : path("/tmp/ld-test-" + std::to_string(getpid()) + "-" + name) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& p) const { return (path / p).string(); }
};

// The BPF programs and links `pid` holds, by kernel id (/proc/PID/fdinfo: a program's fd shows
// prog_id, a link's link_id and its program's prog_id). Ids, not a count of `name ld_*`: other
// agents may run on the host meanwhile, and this bpftool does not list owning pids.
struct BpfIds {
  std::set<unsigned> progs, links;
};
inline BpfIds bpf_ids_of(int pid) {
  BpfIds ids;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(e.path());
    std::string key;
    unsigned value = 0;
    while (in >> key) {
      if (key == "prog_id:" && in >> value) ids.progs.insert(value);
      else if (key == "link_id:" && in >> value) ids.links.insert(value);
    }
  }
  return ids;
}
// How many of `ids` the kernel still has (bpftool prog/link show id N fails for a freed one).
inline int still_loaded(const BpfIds& ids) {
  int n = 0;
  for (unsigned id : ids.progs)
    n += system(("bpftool prog show id " + std::to_string(id) + " >/dev/null 2>&1").c_str()) == 0;
  for (unsigned id : ids.links)
    n += system(("bpftool link show id " + std::to_string(id) + " >/dev/null 2>&1").c_str()) == 0;
  return n;
}
// Programs are freed after an RCU grace period once their last fd closes: wait a little.
inline int still_loaded_settled(const BpfIds& ids) {
  int n = still_loaded(ids);
  for (int i = 0; i < 100 && n != 0; ++i) {
    std::this_thread::sleep_for(100ms);
    n = still_loaded(ids);
  }
  return n;
}

}  // namespace ld::test::agent
