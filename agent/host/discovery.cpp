#include "host/discovery.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "host/cgroup.hpp"
#include "host/procnet.hpp"
#include "util/files.hpp"

namespace ld::host {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string read_link(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// "/a/b/" -> "/a/b"; "" -> "/".
std::string normalize_cgroup(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path.empty() ? "/" : path;
}

// State field of /proc/PID/stat (after the last ')'); 'Z' for a zombie, 0 when unreadable.
char process_state(const std::string& stat) {
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

// The inodes of sockets listening on `port` in the socket tables of `pid`'s namespace.
std::set<uint64_t> listening_inodes(const std::string& root, int pid, int port) {
  std::set<uint64_t> inodes;
  const std::string proc = root + "/proc/" + std::to_string(pid);
  for (const char* file : {"/net/tcp", "/net/tcp6"})
    for (const auto& s : parse_proc_net_tcp(util::read_file(proc + file)))
      if (s.state == 0x0A && s.local_port == port) inodes.insert(s.inode);
  return inodes;
}

bool holds_any(const std::string& root, int pid, const std::set<uint64_t>& inodes) {
  const std::string fd_dir = root + "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(fd_dir.c_str());
  if (!dir) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    if (auto inode = parse_socket_link(read_link(fd_dir + "/" + e->d_name)); inode && inodes.count(*inode)) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

std::regex compile_match(const std::string& flag, const std::string& expression) {
  if (expression.empty()) throw std::invalid_argument(fmt::format("{}: empty expression", flag));
  try {
    return std::regex(expression, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(
        fmt::format("{} '{}': not a valid regular expression ({})", flag, expression, e.what()));
  }
}

bool cgroup_path_within(const std::string& process_path, const std::string& wanted_in) {
  std::string wanted = normalize_cgroup(wanted_in);
  // The cgroup2 mount point is not part of the paths in /proc/PID/cgroup.
  for (const char* mount : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    std::string m = mount;
    if (wanted == m) {
      wanted = "/";
      break;
    }
    if (wanted.rfind(m + "/", 0) == 0) {
      wanted = wanted.substr(m.size());
      break;
    }
  }
  const std::string path = normalize_cgroup(process_path);
  if (wanted == "/") return true;
  return path == wanted || path.rfind(wanted + "/", 0) == 0;
}

std::vector<DiscoveredProcess> Discovery::scan(int self_pid) {
  std::vector<DiscoveredProcess> candidates;
  const std::string proc = root_ + "/proc";
  DIR* dir = opendir(proc.c_str());
  if (!dir) return {};
  const bool full = scans_++ % kRecheckEvery == 0;
  std::map<int, std::optional<DiscoveredProcess>> seen;
  while (dirent* e = readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == self_pid) continue;
    if (!full) {
      // Seen at the last scan and still listed: the same answer, without reading its files.
      if (auto it = seen_.find(pid); it != seen_.end()) {
        // A target that exited may linger as a zombie until it is reaped: its state only.
        if (it->second && process_state(util::read_file(proc + "/" + e->d_name + "/stat")) != 'Z') {
          candidates.push_back(*it->second);
          seen.emplace(pid, it->second);
        } else {
          seen.emplace(pid, std::nullopt);
        }
        continue;
      }
    }
    auto& answer = seen[pid];
    const std::string base = proc + "/" + e->d_name;
    DiscoveredProcess p{pid, "", ""};
    // Cheapest first: comm is one small read; the exe link and the cgroup file follow only for
    // processes still in the running.
    p.comm = trim(util::read_file(base + "/comm"));
    if (p.comm.empty()) continue;
    if (rules_.comm && !std::regex_search(p.comm, *rules_.comm)) continue;
    p.exe = read_link(base + "/exe");
    if (p.exe.empty()) continue;  // a kernel thread, or gone
    if (rules_.exe && !std::regex_search(p.exe, *rules_.exe)) continue;
    if (!rules_.cgroup.empty()) {
      bool in = false;
      for (const auto& m : parse_proc_cgroup(util::read_file(base + "/cgroup")))
        in = in || cgroup_path_within(m.path, rules_.cgroup);
      if (!in) continue;
    }
    if (process_state(util::read_file(base + "/stat")) == 'Z') continue;
    answer = p;
    candidates.push_back(std::move(p));
  }
  seen_ = std::move(seen);
  closedir(dir);
  if (rules_.listen_port == 0) return candidates;

  std::vector<DiscoveredProcess> out;
  std::map<std::string, PortState> next;
  for (auto& p : candidates) {
    std::string ns = net_namespace_of(root_, p.pid);
    auto [it, fresh] = next.try_emplace(ns);
    PortState& state = it->second;
    if (fresh) state.inodes = listening_inodes(root_, p.pid, rules_.listen_port);
    if (state.inodes.empty()) continue;
    // Same listeners as at the last scan: a pid already looked at keeps its answer.
    auto last = ports_.find(ns);
    bool same = last != ports_.end() && last->second.inodes == state.inodes;
    bool holder;
    if (same && last->second.holders.count(p.pid)) holder = true;
    else if (same && last->second.checked.count(p.pid)) holder = false;
    else holder = holds_any(root_, p.pid, state.inodes);
    (holder ? state.holders : state.checked).insert(p.pid);
    if (holder) out.push_back(std::move(p));
  }
  ports_ = std::move(next);
  return out;
}

}  // namespace ld::host
