#include "host/host_facts.hpp"

#include <dirent.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <map>
#include <sstream>

#include "util/time.hpp"

namespace ld::host {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return util::timespec_ns(ts);
}

// State and parent pid from /proc/PID/stat; the comm field may hold spaces and ')'.
bool parse_stat(const std::string& stat, char& state, int& ppid) {
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 > stat.size()) return false;
  std::istringstream rest(stat.substr(close + 2));
  return static_cast<bool>(rest >> state >> ppid);
}

bool read_stat(int pid, char& state, int& ppid) {
  return parse_stat(read_first_line("/proc/" + std::to_string(pid) + "/stat"), state, ppid);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

// Field 22 of /proc/PID/stat: start time in clock ticks after boot (CLOCK_BOOTTIME), turned
// into CLOCK_MONOTONIC (the BPF clock) by the current boottime - monotonic difference.
uint64_t process_start_mono_ns(int pid) {
  std::string stat = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  const long hz = sysconf(_SC_CLK_TCK);
  if (!start_ticks || hz <= 0) return 0;
  const uint64_t boot_ns = start_ticks * (util::kNsPerSec / static_cast<uint64_t>(hz));
  // Read monotonic first: without a suspend the two clocks are equal, and the later read of
  // boottime keeps the difference from going negative.
  const uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  const uint64_t boot = clock_ns(CLOCK_BOOTTIME);
  const uint64_t suspended = boot > mono ? boot - mono : 0;
  return boot_ns > suspended ? boot_ns - suspended : 0;
}

}  // namespace

std::optional<ProcessInfo> read_process(int pid) {
  if (!process_alive(pid, util::read_file)) return std::nullopt;
  ProcessInfo info;
  info.pid = pid;
  info.comm = read_first_line("/proc/" + std::to_string(pid) + "/comm");
  char buf[PATH_MAX];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof(buf) - 1);
  if (n > 0) info.exe.assign(buf, static_cast<size_t>(n));
  info.start_mono_ns = process_start_mono_ns(pid);
  return info;
}

bool process_alive(int pid, const util::FileReader& read) {
  char state = 0;
  int ppid = 0;
  return pid > 0 && parse_stat(read("/proc/" + std::to_string(pid) + "/stat"), state, ppid) && state != 'Z' &&
         state != 'X';
}

std::vector<int> descendants(int pid) {
  std::multimap<int, int> children_of;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* ent = readdir(dir)) {
      char* end = nullptr;
      long child = std::strtol(ent->d_name, &end, 10);
      char state = 0;
      int ppid = 0;
      if (*end == '\0' && child > 0 && read_stat(static_cast<int>(child), state, ppid) && state != 'Z')
        children_of.emplace(ppid, static_cast<int>(child));
    }
    closedir(dir);
  }
  std::vector<int> out;
  std::vector<int> todo{pid};
  while (!todo.empty()) {
    int parent = todo.back();
    todo.pop_back();
    auto [lo, hi] = children_of.equal_range(parent);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

uint64_t monotonic_now_ns() { return clock_ns(CLOCK_MONOTONIC); }
uint64_t realtime_now_ns() { return clock_ns(CLOCK_REALTIME); }

int64_t sample_realtime_minus_monotonic_ns() {
  // Bracket a realtime read between two monotonic reads; keep the tightest bracket.
  int64_t best_offset = 0;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 16; ++i) {
    uint64_t m1 = monotonic_now_ns();
    uint64_t r = realtime_now_ns();
    uint64_t m2 = monotonic_now_ns();
    if (m2 - m1 < best_width) {
      best_width = m2 - m1;
      best_offset = static_cast<int64_t>(r) - static_cast<int64_t>(m1 + (m2 - m1) / 2);
    }
  }
  return best_offset;
}

std::string kernel_release() {
  utsname uts{};
  uname(&uts);
  return uts.release;
}

nlohmann::json host_facts_json() {
  utsname uts{};
  uname(&uts);
  return {
      {"kernel", std::string(uts.release)},
      {"machine", std::string(uts.machine)},
      {"cpu_model", cpu_model()},
      {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
      {"btf", access("/sys/kernel/btf/vmlinux", R_OK) == 0},
  };
}

}  // namespace ld::host
