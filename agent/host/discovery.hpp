// Finding the server processes to trace on a node (serve --match-comm/--match-exe/--listen-port/
// --cgroup): a scan of /proc under a root prefix ("" on a live host, a fixture tree in tests).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace ld::host {

// What a process must match to be a target: every rule given (they combine with AND).
struct DiscoveryRules {
  std::optional<std::regex> comm;  // searched in /proc/PID/comm
  std::optional<std::regex> exe;   // searched in the /proc/PID/exe link
  int listen_port = 0;             // holds a listening TCP socket on this port (its namespace's)
  std::string cgroup;              // in this cgroup or below ("/system.slice/x.service" or
                                   // "/sys/fs/cgroup/system.slice/x.service")
  bool empty() const { return !comm && !exe && listen_port == 0 && cgroup.empty(); }
};

// Compiles a --match-comm/--match-exe expression (ECMAScript, searched anywhere in the text);
// throws std::invalid_argument naming `flag` when it does not compile.
std::regex compile_match(const std::string& flag, const std::string& expression);

// Whether a process in cgroup `process_path` (as in /proc/PID/cgroup) is in `wanted` or below;
// `wanted` may carry the cgroup2 mount point (/sys/fs/cgroup/...) or not.
bool cgroup_path_within(const std::string& process_path, const std::string& wanted);

struct DiscoveredProcess {
  int pid = 0;
  std::string comm;
  std::string exe;
  bool operator==(const DiscoveredProcess&) const = default;
};

class Discovery {
 public:
  explicit Discovery(DiscoveryRules rules, std::string root = "") : rules_(std::move(rules)), root_(std::move(root)) {}
  // Every live user process (not a kernel thread, not a zombie, not `self_pid`) that matches,
  // by pid. A scan lists /proc and looks only at processes it has not seen (and at every one
  // again each `kRecheckEvery` scans: a launcher that execs the server keeps its pid); the
  // listen-port rule reads each network namespace's socket table once a scan and looks through
  // a process's fds only when that namespace's listeners on the port changed.
  std::vector<DiscoveredProcess> scan(int self_pid);
  static constexpr unsigned kRecheckEvery = 8;
  const DiscoveryRules& rules() const { return rules_; }

 private:
  DiscoveryRules rules_;
  std::string root_;
  // Per network namespace: the listening inodes on the port at the last scan, and the pids
  // found holding one of them (those checked and not holding one: `checked`).
  struct PortState {
    std::set<uint64_t> inodes;
    std::set<int> holders;
    std::set<int> checked;
  };
  std::map<std::string, PortState> ports_;
  // The last answer per pid (nullopt: not a candidate) and the scans since a full look.
  std::map<int, std::optional<DiscoveredProcess>> seen_;
  unsigned scans_ = 0;
};

}  // namespace ld::host
