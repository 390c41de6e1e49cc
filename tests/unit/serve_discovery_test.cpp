// serve's target discovery (host/discovery.hpp) on a fixture /proc tree.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "host/discovery.hpp"

namespace fs = std::filesystem;
using ld::host::Discovery;
using ld::host::DiscoveryRules;

namespace {

class FakeProc {
 public:
  FakeProc()
      : root_(fs::temp_directory_path() /
              ("ld-discovery-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(root_ / "proc");
  }
  ~FakeProc() { fs::remove_all(root_); }
  // One process: comm, exe link, cgroup line, state; optionally a listening socket on `port`.
  void add(int pid, const std::string& comm, const std::string& exe, const std::string& cgroup, char state = 'S',
           int port = 0, const std::string& netns = "net:[4026531840]") {
    fs::path p = root_ / "proc" / std::to_string(pid);
    fs::create_directories(p / "fd");
    write(p / "comm", comm + "\n");
    if (!exe.empty()) fs::create_symlink(exe, p / "exe");
    write(p / "cgroup", "0::" + cgroup + "\n");
    write(p / "stat", std::to_string(pid) + " (" + comm + ") " + state + " 1 1 1\n");
    fs::create_directories(p / "ns");
    fs::create_symlink(netns, p / "ns" / "net");
    fs::create_directories(p / "net");
    if (port) {
      char line[256];
      std::snprintf(line, sizeof(line),
                    "   0: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 %d 1 "
                    "0000000000000000 100 0 0 10 0\n",
                    port, 5000 + pid);
      listeners_ += line;
      fs::create_symlink("socket:[" + std::to_string(5000 + pid) + "]", p / "fd" / "3");
    }
    // One network namespace: every process shows the same socket table, as in /proc.
    for (const auto& entry : fs::directory_iterator(root_ / "proc")) {
      write(entry.path() / "net" / "tcp",
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
                listeners_);
      write(entry.path() / "net" / "tcp6", "");
    }
  }
  std::string root() const { return root_.string(); }

 private:
  static void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  fs::path root_;
  std::string listeners_;
  static inline int counter_ = 0;
};

std::vector<int> pids_of(const std::vector<ld::host::DiscoveredProcess>& found) {
  std::vector<int> out;
  for (const auto& p : found) out.push_back(p.pid);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(ServeDiscovery, CommAndExeRulesCombine) {
  FakeProc proc;
  proc.add(100, "vllm", "/usr/bin/python3.11", "/system.slice/llm.service");
  proc.add(101, "python3", "/usr/bin/python3.11", "/user.slice");
  proc.add(102, "bash", "/usr/bin/bash", "/user.slice");
  proc.add(103, "kworker/0:1", "", "/");  // a kernel thread: no exe
  DiscoveryRules rules;
  rules.exe = ld::host::compile_match("--match-exe", "python3");
  EXPECT_EQ(pids_of(Discovery(rules, proc.root()).scan(1)), (std::vector<int>{100, 101}));
  rules.comm = ld::host::compile_match("--match-comm", "^vllm$");
  EXPECT_EQ(pids_of(Discovery(rules, proc.root()).scan(1)), (std::vector<int>{100}));
  // Self is never a target.
  EXPECT_TRUE(Discovery(rules, proc.root()).scan(100).empty());
}

TEST(ServeDiscovery, ZombiesAndKernelThreadsAreNotTargets) {
  FakeProc proc;
  proc.add(200, "llama-server", "/opt/llama-server", "/", 'Z');
  proc.add(201, "llama-server", "", "/");
  DiscoveryRules rules;
  rules.comm = ld::host::compile_match("--match-comm", "llama");
  EXPECT_TRUE(Discovery(rules, proc.root()).scan(1).empty());
}

TEST(ServeDiscovery, CgroupRuleMatchesTheCgroupAndBelow) {
  FakeProc proc;
  proc.add(300, "tgi", "/usr/bin/text-generation-launcher", "/system.slice/llm.service");
  proc.add(301, "tgi-shard", "/usr/bin/text-generation-server", "/system.slice/llm.service/shard0");
  proc.add(302, "tgi", "/usr/bin/text-generation-launcher", "/system.slice/llm.service2");
  DiscoveryRules rules;
  rules.cgroup = "/sys/fs/cgroup/system.slice/llm.service/";
  EXPECT_EQ(pids_of(Discovery(rules, proc.root()).scan(1)), (std::vector<int>{300, 301}));
  EXPECT_TRUE(ld::host::cgroup_path_within("/a/b", "/"));
  EXPECT_TRUE(ld::host::cgroup_path_within("/a/b", "/a"));
  EXPECT_FALSE(ld::host::cgroup_path_within("/ab", "/a"));
}

TEST(ServeDiscovery, ListenPortRuleFindsTheHolderAndFollowsARestart) {
  FakeProc proc;
  proc.add(400, "server", "/usr/bin/server", "/", 'S', 8000);
  proc.add(401, "other", "/usr/bin/other", "/", 'S', 9000);
  proc.add(402, "client", "/usr/bin/client", "/");
  DiscoveryRules rules;
  rules.listen_port = 8000;
  Discovery discovery(rules, proc.root());
  EXPECT_EQ(pids_of(discovery.scan(1)), (std::vector<int>{400}));
  EXPECT_EQ(pids_of(discovery.scan(1)), (std::vector<int>{400}));  // cached answer, same result
  // The server restarts: a new pid holds a new listening socket on the port.
  fs::remove_all(proc.root() + "/proc/400");
  proc.add(410, "server", "/usr/bin/server", "/", 'S', 8000);
  EXPECT_EQ(pids_of(discovery.scan(1)), (std::vector<int>{410}));
}

TEST(ServeDiscovery, BadExpressionIsAUsageError) {
  EXPECT_THROW(ld::host::compile_match("--match-comm", "(unclosed"), std::invalid_argument);
  EXPECT_THROW(ld::host::compile_match("--match-comm", ""), std::invalid_argument);
}
