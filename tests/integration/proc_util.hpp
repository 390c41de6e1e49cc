// Child processes for the root tier: start a program, capture its output, wait with a
// deadline, and always kill it on scope exit so a failing test leaves nothing running.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ld::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CapEff of every thread of process `pid`: {tid, mask}. Capabilities are per thread.
inline std::vector<std::pair<std::string, uint64_t>> thread_capabilities(int pid) {
  std::vector<std::pair<std::string, uint64_t>> caps;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream status(task.path() / "status");
    std::string line;
    uint64_t effective = ~0ULL;  // unread: counts as everything kept
    while (std::getline(status, line))
      if (line.rfind("CapEff:", 0) == 0) effective = std::stoull(line.substr(7), nullptr, 16);
    caps.emplace_back(task.path().filename().string(), effective);
  }
  return caps;
}

// The first process whose command line (arguments joined by spaces) contains `needle`; 0 if none.
inline int find_process(const std::string& needle) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != getpid()) return std::stoi(name);
  }
  return 0;
}

class Child {
 public:
  // Runs argv with stdout/stderr redirected to files under /tmp.
  explicit Child(std::vector<std::string> argv) {
    static int counter = 0;
    std::string base = "/tmp/ld-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    out_path_ = base + ".out";
    err_path_ = base + ".err";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);  // its own group, so that grandchildren die with it
      int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(out, 1);
      dup2(err, 2);
      int devnull = open("/dev/null", O_RDONLY);
      dup2(devnull, 0);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) kill(-pid_, SIGKILL);  // the whole group: launchers leave grandchildren
    if (pid_ > 0 && !status_) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
    unlink(out_path_.c_str());
    unlink(err_path_.c_str());
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int pid() const { return pid_; }
  void signal(int sig) { kill(pid_, sig); }

  // Exit code (128+signal when killed), or nullopt when still running at the deadline.
  std::optional<int> wait(std::chrono::milliseconds deadline) {
    auto until = std::chrono::steady_clock::now() + deadline;
    while (!status_) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() > until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }

  // Waits until stdout contains `needle` (e.g. "listening on"); false at the deadline.
  bool wait_for_output(const std::string& needle, std::chrono::milliseconds deadline) const {
    auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      if (out().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_, err_path_;
};

}  // namespace ld::test
