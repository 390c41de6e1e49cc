#include "host/cgroup.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::host {
namespace {

std::string slurp(const std::string& path) { return util::read_file(path); }

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? s.size() - start : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

std::optional<uint64_t> to_u64(std::string_view s) {
  s = trim(s);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// mountinfo escapes ' ', '\t', '\n' and '\\' as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() &&
        std::all_of(s.begin() + i + 1, s.begin() + i + 4, [](char c) { return c >= '0' && c <= '7'; })) {
      out.push_back(char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool has(const std::vector<std::string>& v, std::string_view x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The directory of cgroup `path` under `mount`, or "" when the mount does not show it (a
// bind mount of another subtree).
std::string dir_under(const std::string& root, const CgroupMount& mount, const std::string& path) {
  std::string rel;
  if (mount.root == "/") {
    rel = path;
  } else if (path == mount.root || path.rfind(mount.root + "/", 0) == 0) {
    rel = path.substr(mount.root.size());
  } else {
    return "";
  }
  if (rel == "/") rel.clear();
  std::string dir = root + mount.mount_point + rel;
  return exists(dir) ? dir : "";
}

// v1: the hierarchy whose line names `controller`; v2: the unified tree if it enables it.
std::string find_controller(const std::string& root, const std::vector<CgroupMembership>& member,
                            const std::vector<CgroupMount>& mounts, std::string_view controller, bool& v2) {
  for (const auto& m : member) {
    if (m.hierarchy == 0 || !has(m.controllers, controller)) continue;
    for (const auto& mount : mounts)
      if (!mount.v2 && has(mount.controllers, controller))
        if (auto dir = dir_under(root, mount, m.path); !dir.empty()) {
          v2 = false;
          return dir;
        }
  }
  for (const auto& m : member) {
    if (m.hierarchy != 0) continue;
    for (const auto& mount : mounts) {
      if (!mount.v2) continue;
      auto dir = dir_under(root, mount, m.path);
      if (dir.empty()) continue;
      std::string text = slurp(dir + "/cgroup.controllers");
      auto enabled = split(trim(text), ' ');
      if (std::find(enabled.begin(), enabled.end(), controller) != enabled.end()) {
        v2 = true;
        return dir;
      }
    }
  }
  return "";
}

// Page-counter "unlimited" in v1 is PAGE_COUNTER_MAX * PAGE_SIZE (9223372036854771712 on
// x86-64 with 4 KiB pages): anything that large is no limit.
uint64_t limit_or_unknown(std::optional<uint64_t> v) {
  if (!v || *v >= (1ULL << 62)) return kCgroupUnknown;
  return *v;
}

// A limit file's content is a number or "max" (v2): anything else is unreadable or garbage.
bool is_limit(std::string_view text) {
  text = trim(text);
  return text == "max" || to_u64(text).has_value();
}

}  // namespace

std::vector<CgroupMembership> parse_proc_cgroup(std::string_view text) {
  std::vector<CgroupMembership> out;
  for (auto line : split(text, '\n')) {
    line = trim(line);
    auto c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    auto id = to_u64(line.substr(0, c1));
    if (!id) continue;
    CgroupMembership m;
    m.hierarchy = int(*id);
    auto ctl = line.substr(c1 + 1, c2 - c1 - 1);
    if (!ctl.empty())
      for (auto c : split(ctl, ',')) m.controllers.emplace_back(c);
    m.path = std::string(line.substr(c2 + 1));
    if (m.path.empty()) continue;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<CgroupMount> parse_cgroup_mounts(std::string_view mountinfo) {
  std::vector<CgroupMount> out;
  for (auto line : split(mountinfo, '\n')) {
    std::vector<std::string_view> f;
    for (auto x : split(trim(line), ' '))
      if (!x.empty()) f.push_back(x);
    // id parent maj:min root mount_point opts [optional...] - fstype source super_opts
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 6 || dash == f.end() || f.end() - dash < 4) continue;
    std::string_view fstype = dash[1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m;
    m.root = unescape_octal(f[3]);
    m.mount_point = unescape_octal(f[4]);
    m.v2 = fstype == "cgroup2";
    if (!m.v2)
      for (auto o : split(dash[3], ','))
        if (o != "rw" && o != "ro") m.controllers.emplace_back(o);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

CgroupDirs dirs_of(const std::string& root, const std::vector<CgroupMembership>& member,
                   const std::vector<CgroupMount>& mounts) {
  CgroupDirs dirs;
  dirs.cpu = find_controller(root, member, mounts, "cpu", dirs.cpu_v2);
  dirs.memory = find_controller(root, member, mounts, "memory", dirs.memory_v2);
  dirs.cpuset = find_controller(root, member, mounts, "cpuset", dirs.cpuset_v2);
  return dirs;
}

}  // namespace

std::optional<CgroupDirs> find_cgroup_dirs(const std::string& root, int pid) {
  return find_cgroup_dirs_from(root, slurp(root + "/proc/" + std::to_string(pid) + "/cgroup"));
}

std::optional<CgroupDirs> find_cgroup_dirs_from(const std::string& root, std::string_view proc_cgroup) {
  if (proc_cgroup.empty()) return std::nullopt;
  return dirs_of(root, parse_proc_cgroup(proc_cgroup), parse_cgroup_mounts(slurp(root + "/proc/self/mountinfo")));
}

std::optional<CgroupDirs> find_cgroup_dirs_of_path(const std::string& root, const std::string& path) {
  auto mounts = parse_cgroup_mounts(slurp(root + "/proc/self/mountinfo"));
  // A directory under a mount point names its cgroup by the rest of the path.
  std::string cgroup_path = path;
  for (const auto& mount : mounts) {
    const std::string& mp = mount.mount_point;
    if (path.size() > mp.size() && path.rfind(mp, 0) == 0 && path[mp.size()] == '/') {
      cgroup_path = (mount.root == "/" ? "" : mount.root) + path.substr(mp.size());
      break;
    }
  }
  // Membership lines as /proc/PID/cgroup would show them for a process of that cgroup.
  std::vector<CgroupMembership> member{{0, {}, cgroup_path}};
  int hierarchy = 1;
  for (const auto& mount : mounts)
    if (!mount.v2) member.push_back({hierarchy++, mount.controllers, cgroup_path});
  CgroupDirs dirs = dirs_of(root, member, mounts);
  bool found = false;
  for (const auto& mount : mounts) found = found || !dir_under(root, mount, cgroup_path).empty();
  if (!found) return std::nullopt;
  return dirs;
}

std::optional<uint64_t> parse_keyed_value(std::string_view text, std::string_view key) {
  for (auto line : split(text, '\n')) {
    line = trim(line);
    auto sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != key) continue;
    return to_u64(line.substr(sp + 1));
  }
  return std::nullopt;
}

CgroupCpu parse_cpu_stat(std::string_view text, CgroupCpu into) {
  if (auto v = parse_keyed_value(text, "nr_periods")) into.nr_periods = *v;
  if (auto v = parse_keyed_value(text, "nr_throttled")) into.nr_throttled = *v;
  if (auto v = parse_keyed_value(text, "throttled_time")) into.throttled_ns = *v;                        // v1: ns
  else if (auto u = parse_keyed_value(text, "throttled_usec")) into.throttled_ns = *u * util::kNsPerUs;  // v2
  return into;
}

void parse_cpu_max(std::string_view text, CgroupCpu& into) {
  auto f = split(trim(text), ' ');
  if (f.size() != 2) return;
  into.quota_us = f[0] == "max" ? kCgroupUnknown : to_u64(f[0]).value_or(kCgroupUnknown);
  into.period_us = to_u64(f[1]).value_or(kCgroupUnknown);
}

CgroupCpu read_cgroup_cpu(const std::string& dir, bool v2, const util::FileReader& read) {
  CgroupCpu cpu = parse_cpu_stat(read(dir + "/cpu.stat"));
  if (v2) {
    std::string max = read(dir + "/cpu.max");
    parse_cpu_max(max, cpu);
    cpu.quota_read = cpu.period_us != kCgroupUnknown;
    return cpu;
  }
  // v1: cfs_quota_us is -1 when unlimited.
  std::string quota_text = read(dir + "/cpu.cfs_quota_us");
  auto quota = trim(quota_text);
  if (!quota.empty() && quota[0] != '-') cpu.quota_us = to_u64(quota).value_or(kCgroupUnknown);
  cpu.period_us = to_u64(read(dir + "/cpu.cfs_period_us")).value_or(kCgroupUnknown);
  cpu.quota_read = !quota.empty() && (quota[0] == '-' || cpu.quota_us != kCgroupUnknown);
  return cpu;
}

CgroupMemory read_cgroup_memory(const std::string& dir, bool v2, const util::FileReader& read) {
  CgroupMemory mem;
  if (dir.empty()) return mem;
  if (v2) {
    mem.usage = to_u64(read(dir + "/memory.current")).value_or(kCgroupUnknown);
    std::string max = read(dir + "/memory.max");
    mem.limit = limit_or_unknown(to_u64(max));  // "max" -> unknown
    mem.limit_read = is_limit(max);
    std::string swap_max = read(dir + "/memory.swap.max");
    mem.swap_limit = limit_or_unknown(to_u64(swap_max));
    mem.swap_limit_read = is_limit(swap_max);
    std::string events = read(dir + "/memory.events");
    mem.events_high = parse_keyed_value(events, "high").value_or(kCgroupUnknown);
    mem.events_oom = parse_keyed_value(events, "oom_kill").value_or(kCgroupUnknown);
    return mem;
  }
  mem.usage = to_u64(read(dir + "/memory.usage_in_bytes")).value_or(kCgroupUnknown);
  std::string limit = read(dir + "/memory.limit_in_bytes");
  mem.limit = limit_or_unknown(to_u64(limit));
  mem.limit_read = is_limit(limit);
  // v1 limits memory+swap together: the swap allowance is the difference.
  std::string memsw = read(dir + "/memory.memsw.limit_in_bytes");
  if (is_limit(memsw) && mem.limit_read) {
    uint64_t both = limit_or_unknown(to_u64(memsw));
    mem.swap_limit_read = true;
    if (both != kCgroupUnknown && mem.limit != kCgroupUnknown) mem.swap_limit = both > mem.limit ? both - mem.limit : 0;
  }
  mem.events_high = to_u64(read(dir + "/memory.failcnt")).value_or(kCgroupUnknown);
  mem.events_oom = parse_keyed_value(read(dir + "/memory.oom_control"), "oom_kill").value_or(kCgroupUnknown);
  return mem;
}

std::string read_cgroup_cpuset(const std::string& dir, bool v2) {
  if (dir.empty()) return "";
  std::string text = slurp(dir + (v2 ? "/cpuset.cpus.effective" : "/cpuset.effective_cpus"));
  if (text.empty() && !v2) text = slurp(dir + "/cpuset.cpus");
  return std::string(trim(text));
}

}  // namespace ld::host
