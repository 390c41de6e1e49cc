// cgroup.* and limits.* facts of the audited service (--pid or --cgroup), and cgroup.version
// of the host. The cgroup files are found by host/cgroup (v1 and v2).
#include <charconv>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "audit/cpu_list.hpp"
#include "audit/fact_sink.hpp"
#include "host/cgroup.hpp"
#include "util/time.hpp"

namespace ld::audit {
namespace {

using host::kCgroupUnknown;

// A real (root-prefixed) path as the host sees it.
std::string host_path(const HostTree& tree, const std::string& real) {
  return real.substr(std::min(tree.prefix().size(), real.size()));
}

std::string parent_dir(const std::string& dir) { return dir.substr(0, dir.rfind('/')); }

// Host-level: which cgroup version holds the cpu/memory controllers.
void read_host_cgroup_version(FactSink& sink) {
  const HostTree& tree = sink.tree();
  auto mounts = host::parse_cgroup_mounts(tree.read("/proc/self/mountinfo").text);
  bool v1 = false, v2 = false;
  for (const auto& m : mounts) {
    for (const auto& c : m.controllers) v1 = v1 || c == "cpu" || c == "memory";
    v2 = v2 || m.v2;
  }
  if (v1 || v2) return sink.set("cgroup.version", v1 ? 1 : 2, "/proc/self/mountinfo");
  // An image tree has no mount table: the layout of /sys/fs/cgroup says it.
  if (tree.exists("/sys/fs/cgroup/cgroup.controllers")) return sink.set("cgroup.version", 2, "/sys/fs/cgroup");
  if (tree.is_dir("/sys/fs/cgroup/memory") || tree.is_dir("/sys/fs/cgroup/cpu"))
    return sink.set("cgroup.version", 1, "/sys/fs/cgroup");
  sink.unknown("cgroup.version", "/proc/self/mountinfo", "no cgroup mount found");
}

// The tightest CPU quota of the cgroup and its ancestors (a slice or pod quota limits the
// service as much as its own).
void read_cpu_quota(FactSink& sink, const std::string& dir, bool v2) {
  const HostTree& tree = sink.tree();
  double tightest = std::numeric_limits<double>::infinity();
  std::string tightest_at;
  bool any_read = false;
  for (std::string d = dir; d.size() > tree.prefix().size() && tree.is_dir(d.substr(tree.prefix().size()));
       d = parent_dir(d)) {
    host::CgroupCpu cpu = host::read_cgroup_cpu(d, v2);
    if (!cpu.quota_read) break;  // above the controller's root
    any_read = true;
    if (d == dir) {  // throttling of the service's own cgroup: evidence that the quota bites
      if (cpu.nr_periods != kCgroupUnknown)
        sink.set("cgroup.nr_periods", cpu.nr_periods, host_path(tree, d) + "/cpu.stat");
      if (cpu.nr_throttled != kCgroupUnknown)
        sink.set("cgroup.nr_throttled", cpu.nr_throttled, host_path(tree, d) + "/cpu.stat");
      if (cpu.throttled_ns != kCgroupUnknown)
        sink.set("cgroup.throttled_ms", util::ns_to_ms(cpu.throttled_ns), host_path(tree, d) + "/cpu.stat");
    }
    if (cpu.quota_us == kCgroupUnknown || cpu.period_us == kCgroupUnknown || cpu.period_us == 0) continue;
    double cpus = double(cpu.quota_us) / double(cpu.period_us);
    if (cpus < tightest) {
      tightest = cpus;
      tightest_at = host_path(tree, d) + (v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
    }
  }
  std::string own = host_path(tree, dir) + (v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  if (!any_read) return sink.unknown("cgroup.cpu_quota_cpus", own, "unreadable or malformed");
  bool limited = tightest_at.size() > 0;
  sink.set("cgroup.cpu_limited", limited, limited ? tightest_at : own);
  if (limited) sink.set("cgroup.cpu_quota_cpus", tightest, tightest_at);
}

void read_memory_limits(FactSink& sink, const std::string& dir, bool v2) {
  const HostTree& tree = sink.tree();
  host::CgroupMemory mem = host::read_cgroup_memory(dir, v2);
  std::string where = host_path(tree, dir);
  const char* limit_name = v2 ? "/memory.max" : "/memory.limit_in_bytes";
  std::string limit_file = where + limit_name;
  if (mem.limit_read) {
    // An ancestor's limit (a slice, a pod) binds the service as much as its own.
    uint64_t tightest = mem.limit;
    for (std::string d = parent_dir(dir); d.size() > tree.prefix().size(); d = parent_dir(d)) {
      host::CgroupMemory above = host::read_cgroup_memory(d, v2);
      if (!above.limit_read) break;  // above the controller's root
      if (above.limit < tightest) {
        tightest = above.limit;
        limit_file = host_path(tree, d) + limit_name;
      }
    }
    sink.set("cgroup.mem_limited", tightest != kCgroupUnknown, limit_file);
    if (tightest != kCgroupUnknown) sink.set("cgroup.mem_limit_bytes", tightest, limit_file);
  } else {
    sink.unknown("cgroup.mem_limit_bytes", limit_file, "unreadable or malformed");
  }
  std::string swap_file = where + (v2 ? "/memory.swap.max" : "/memory.memsw.limit_in_bytes");
  if (mem.swap_limit_read) {
    sink.set("cgroup.swap_limited", mem.swap_limit != kCgroupUnknown, swap_file);
    if (mem.swap_limit != kCgroupUnknown) sink.set("cgroup.swap_limit_bytes", mem.swap_limit, swap_file);
  } else {
    sink.unknown("cgroup.swap_limit_bytes", swap_file, "not readable (no swap accounting?)");
  }
  if (mem.usage != kCgroupUnknown) sink.set("cgroup.mem_usage_bytes", mem.usage, where);
  if (mem.events_oom != kCgroupUnknown) sink.set("cgroup.oom_kills", mem.events_oom, where);
}

void set_cpu_list(FactSink& sink, const std::string& text, const std::string& source) {
  auto cpus = parse_cpu_list(text);
  if (!cpus) return sink.unknown("cgroup.cpuset_cpus", source, "malformed: " + text);
  sink.set("cgroup.cpuset_cpus", text, source);
  sink.set("cgroup.cpuset_count", cpus->size(), source);
}

// The value after "Key:" in /proc/PID/status.
std::string status_field(std::string_view status, std::string_view key) {
  auto pos = status.find(std::string(key) + ":");
  if (pos == std::string_view::npos) return "";
  return first_line(status.substr(pos + key.size() + 1));
}

void read_cpuset(FactSink& sink, const host::CgroupDirs& dirs, int pid) {
  const HostTree& tree = sink.tree();
  if (!dirs.cpuset.empty()) {
    std::string cpus = host::read_cgroup_cpuset(dirs.cpuset, dirs.cpuset_v2);
    if (!cpus.empty()) return set_cpu_list(sink, cpus, host_path(tree, dirs.cpuset));
  }
  // No cpuset controller for this cgroup: the process's affinity is what it may use.
  if (pid > 0) {
    std::string path = fmt::format("/proc/{}/status", pid);
    if (auto status = sink.read("cgroup.cpuset_cpus", path)) {
      std::string allowed = status_field(*status, "Cpus_allowed_list");
      if (!allowed.empty()) return set_cpu_list(sink, allowed, path);
      sink.unknown("cgroup.cpuset_cpus", path, "no Cpus_allowed_list line");
    }
    return;
  }
  sink.unknown("cgroup.cpuset_cpus", "/sys/fs/cgroup", "no cpuset controller for this cgroup");
}

std::optional<double> limit_number(std::string_view s) {
  if (s == "unlimited") return double(std::numeric_limits<uint64_t>::max());
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "Max open files            1024                 524288               files"
void read_nofile(FactSink& sink, int pid) {
  std::string path = fmt::format("/proc/{}/limits", pid);
  auto text = sink.read("limits.nofile_soft", path);
  if (!text) return;
  auto pos = text->find("Max open files");
  if (pos == std::string::npos) return sink.unknown("limits.nofile_soft", path, "no 'Max open files' line");
  std::istringstream line(first_line(std::string_view(*text).substr(pos + 14)));
  std::string soft, hard;
  line >> soft >> hard;
  auto s = limit_number(soft), h = limit_number(hard);
  if (!s || !h) return sink.unknown("limits.nofile_soft", path, "malformed 'Max open files' line");
  sink.set("limits.pid", pid, path);
  sink.set("limits.nofile_soft", *s, path);
  sink.set("limits.nofile_hard", *h, path);
}

// The first process of a cgroup (for its limits), 0 when empty or unreadable.
int first_process(const std::string& real_dir) {
  std::string text = HostTree("").read(real_dir + "/cgroup.procs").text;
  int pid = 0;
  std::from_chars(text.data(), text.data() + text.size(), pid);
  return pid;
}

// The cgroup path of a process as /proc/PID/cgroup names it (v2 line, else the cpu line).
std::string cgroup_path_of(const HostTree& tree, int pid) {
  auto lines = host::parse_proc_cgroup(tree.read(fmt::format("/proc/{}/cgroup", pid)).text);
  for (const auto& m : lines)
    for (const auto& c : m.controllers)
      if (c == "cpu") return m.path;
  for (const auto& m : lines)
    if (m.hierarchy == 0) return m.path;
  return "";
}

}  // namespace

void read_target_facts(FactSink& sink, const AuditTarget& target) {
  const HostTree& tree = sink.tree();
  HostAudit& audit = sink.audit();
  std::optional<host::CgroupDirs> dirs;
  int pid = target.pid;
  if (pid > 0) {
    if (!tree.is_dir(fmt::format("/proc/{}", pid)))
      throw std::runtime_error(fmt::format("--pid {}: no such process under {}/proc", pid, tree.display_root()));
    audit.target_comm = first_line(tree.read(fmt::format("/proc/{}/comm", pid)).text);
    audit.target_cgroup = cgroup_path_of(tree, pid);
    dirs = host::find_cgroup_dirs(tree.prefix(), pid);
    if (!dirs) sink.unknown("cgroup.*", fmt::format("/proc/{}/cgroup", pid), "unreadable");
  } else if (!target.cgroup.empty()) {
    dirs = host::find_cgroup_dirs_of_path(tree.prefix(), target.cgroup);
    if (!dirs)
      throw std::runtime_error(
          fmt::format("--cgroup {}: no such cgroup under the cgroup mounts of {}", target.cgroup, tree.display_root()));
    audit.target_cgroup = target.cgroup;
    const std::string& any_dir = !dirs->cpu.empty() ? dirs->cpu : dirs->memory;
    if (!any_dir.empty()) pid = first_process(any_dir);
  }
  audit.target_pid = pid;

  if (dirs && (!dirs->cpu.empty() || !dirs->memory.empty())) {
    bool v2 = dirs->cpu.empty() ? dirs->memory_v2 : dirs->cpu_v2;
    sink.set("cgroup.version", v2 ? 2 : 1, "/proc/self/mountinfo");
  } else {
    read_host_cgroup_version(sink);
  }
  if (!dirs) return;
  if (!audit.target_cgroup.empty()) sink.set("cgroup.path", audit.target_cgroup, "");
  // Host paths of the controller directories, for the verify commands of rules.
  if (!dirs->cpu.empty()) sink.set("cgroup.cpu_dir", host_path(tree, dirs->cpu), "/proc/self/mountinfo");
  if (!dirs->memory.empty()) sink.set("cgroup.memory_dir", host_path(tree, dirs->memory), "/proc/self/mountinfo");
  if (!dirs->cpu.empty()) read_cpu_quota(sink, dirs->cpu, dirs->cpu_v2);
  else sink.unknown("cgroup.cpu_quota_cpus", "/sys/fs/cgroup", "no cpu controller for this cgroup");
  if (!dirs->memory.empty()) read_memory_limits(sink, dirs->memory, dirs->memory_v2);
  else sink.unknown("cgroup.mem_limit_bytes", "/sys/fs/cgroup", "no memory controller for this cgroup");
  read_cpuset(sink, *dirs, pid);
  if (pid > 0) read_nofile(sink, pid);
  else sink.unknown("limits.nofile_soft", target.cgroup + "/cgroup.procs", "no process in the cgroup");
}

}  // namespace ld::audit
