// The cgroup(s) of a process and their CPU-quota / memory state, read from /proc and the
// cgroup filesystems (v1 cpu / memory hierarchies, or the v2 unified tree). Pure parsing plus
// file reading under a root prefix ("" on a live host, a fixture directory in tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/files.hpp"

namespace ld::host {

// One line of /proc/PID/cgroup: "4:cpu,cpuacct:/a/b" (v1) or "0::/a/b" (v2).
struct CgroupMembership {
  int hierarchy = 0;
  std::vector<std::string> controllers;  // empty for v2 (and "name=systemd" style lines kept)
  std::string path;
};
std::vector<CgroupMembership> parse_proc_cgroup(std::string_view text);

// A cgroup filesystem mount from /proc/self/mountinfo.
struct CgroupMount {
  std::string root;         // the hierarchy path mounted there ("/" unless a bind/namespace)
  std::string mount_point;  // unescaped
  bool v2 = false;
  std::vector<std::string> controllers;  // v1: from the super options ("cpu", "cpuacct", ...)
};
std::vector<CgroupMount> parse_cgroup_mounts(std::string_view mountinfo);

// Directories (root-prefixed) holding the target's cpu and memory controller files.
struct CgroupDirs {
  std::string cpu;  // "" = no cpu controller reachable
  bool cpu_v2 = false;
  std::string memory;  // "" = no memory controller reachable
  bool memory_v2 = false;
  std::string cpuset;  // "" = no cpuset controller reachable (v2: not enabled for this cgroup)
  bool cpuset_v2 = false;
  bool operator==(const CgroupDirs&) const = default;
};
// Reads root/proc/PID/cgroup and root/proc/self/mountinfo (our mounts: we open the files).
// v1 hierarchies win over v2 (a controller is bound to one hierarchy only); a v2 directory
// counts for a controller only when its cgroup.controllers lists it. nullopt when the
// process's cgroup file cannot be read.
std::optional<CgroupDirs> find_cgroup_dirs(const std::string& root, int pid);
// The same from /proc/PID/cgroup's text already read (nullopt when it is empty): a sampler
// re-reads that small file often and the mount table only when the membership changed.
std::optional<CgroupDirs> find_cgroup_dirs_from(const std::string& root, std::string_view proc_cgroup);
// The same for a cgroup named by its path in the hierarchy ("/system.slice/x.service", as in
// /proc/PID/cgroup) or by its directory ("/sys/fs/cgroup/system.slice/x.service"); nullopt
// when no cgroup mount holds it.
std::optional<CgroupDirs> find_cgroup_dirs_of_path(const std::string& root, const std::string& path);

constexpr uint64_t kCgroupUnknown = ~0ULL;

struct CgroupCpu {
  uint64_t nr_periods = kCgroupUnknown;
  uint64_t nr_throttled = kCgroupUnknown;
  uint64_t throttled_ns = kCgroupUnknown;  // v1 throttled_time (ns) / v2 throttled_usec * 1000
  uint64_t quota_us = kCgroupUnknown;      // ~0 = no limit ("max" / -1)
  uint64_t period_us = kCgroupUnknown;
  bool quota_read = false;  // the quota file was read: quota_us ~0 then means "no limit"
};
CgroupCpu parse_cpu_stat(std::string_view text, CgroupCpu into = {});
// "max 100000" / "20000 100000" (v2 cpu.max) into quota_us / period_us.
void parse_cpu_max(std::string_view text, CgroupCpu& into);
// `read`: how the files are read (a probe's util::FileCache keeps them open).
CgroupCpu read_cgroup_cpu(const std::string& dir, bool v2, const util::FileReader& read = util::read_file);

struct CgroupMemory {
  uint64_t usage = kCgroupUnknown;        // bytes now
  uint64_t limit = kCgroupUnknown;        // bytes, ~0 = no limit
  uint64_t events_high = kCgroupUnknown;  // v2 memory.events high / v1 memory.failcnt
  uint64_t events_oom = kCgroupUnknown;   // oom_kill (v2 memory.events, v1 memory.oom_control)
  uint64_t swap_limit = kCgroupUnknown;   // bytes of swap allowed (v2 memory.swap.max; v1
                                          // memory.memsw.limit_in_bytes - limit), ~0 = no limit
  bool limit_read = false;                // the limit file was read: limit ~0 then means "no limit"
  bool swap_limit_read = false;           // same for swap_limit (absent without swap accounting)
};
CgroupMemory read_cgroup_memory(const std::string& dir, bool v2, const util::FileReader& read = util::read_file);
// The CPUs the cgroup may run on: v2 cpuset.cpus.effective, v1 cpuset.effective_cpus
// ("0-3,8"); "" when unreadable.
std::string read_cgroup_cpuset(const std::string& dir, bool v2);

// "key value" lines (cpu.stat, memory.events, memory.oom_control): value of key.
std::optional<uint64_t> parse_keyed_value(std::string_view text, std::string_view key);

}  // namespace ld::host
