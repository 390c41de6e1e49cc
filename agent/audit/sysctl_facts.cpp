// sysctl.<dotted key> facts from /proc/sys. The keys are the ones the article recommends plus
// what tuned's latency-performance / network-latency profiles set; rules/host*.toml say why
// each matters for token latency.
#include <charconv>
#include <sstream>

#include "audit/fact_sink.hpp"
#include "audit/sysctl_values.hpp"

namespace ld::audit {
namespace {

constexpr const char* kSysctlKeys[] = {
    // connection set-up and TIME_WAIT churn (time_wait)
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_max_tw_buckets",
    "net.ipv4.ip_local_port_range",
    // streaming sockets (network)
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_fastopen",
    "net.core.busy_poll",
    "net.core.busy_read",
    // memory: swap, writeback bursts, NUMA reclaim (swap_reclaim, disk_io)
    "vm.swappiness",
    "vm.dirty_ratio",
    "vm.dirty_background_ratio",
    "vm.dirty_bytes",
    "vm.dirty_background_bytes",
    "vm.zone_reclaim_mode",
    "vm.stat_interval",
    // scheduler (cpu_contention)
    "kernel.sched_migration_cost_ns",
    "kernel.numa_balancing",
    "kernel.timer_migration",
    "kernel.sched_autogroup_enabled",
    // observability readiness
    "kernel.perf_event_paranoid",
    "kernel.unprivileged_bpf_disabled",
    "kernel.kptr_restrict",
};

}  // namespace

std::string sysctl_path(std::string_view key) {
  std::string path = "/proc/sys/";
  for (char c : key) path.push_back(c == '.' ? '/' : c);
  return path;
}

SysctlValue parse_sysctl_value(std::string_view text) {
  // Fields are tab-separated in /proc/sys (ip_local_port_range): one space in the fact.
  std::istringstream in{std::string(text)};
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  SysctlValue value;
  for (const auto& f : fields) value.text += (value.text.empty() ? "" : " ") + f;
  for (const auto& f : fields) {
    double number = 0;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), number);
    if (ec != std::errc() || end != f.data() + f.size()) {
      value.numbers.clear();
      break;
    }
    value.numbers.push_back(number);
  }
  return value;
}

void read_sysctl_facts(FactSink& sink) {
  for (const char* key : kSysctlKeys) {
    std::string fact = std::string("sysctl.") + key;
    std::string path = sysctl_path(key);
    // Since Linux 5.13 the migration cost is a debugfs knob (read below), not a sysctl.
    bool moved = std::string_view(key) == "kernel.sched_migration_cost_ns";
    auto text = moved ? sink.read_optional(fact, path) : sink.read(fact, path);
    if (!text) continue;
    SysctlValue value = parse_sysctl_value(*text);
    if (value.numbers.size() == 1) {
      sink.set(fact, value.numbers[0], path);
    } else {
      sink.set(fact, value.text, path);
      if (value.numbers.size() == 2) {  // ranges: ip_local_port_range
        sink.set(fact + ".low", value.numbers[0], path);
        sink.set(fact + ".high", value.numbers[1], path);
      }
    }
  }
  if (!sink.facts().has("sysctl.kernel.sched_migration_cost_ns")) {
    const std::string path = "/sys/kernel/debug/sched/migration_cost_ns";
    if (auto text = sink.read("host.sched_migration_cost_ns", path)) {
      SysctlValue value = parse_sysctl_value(*text);
      if (value.numbers.size() == 1) sink.set("host.sched_migration_cost_ns", value.numbers[0], path);
    }
  }
  if (auto text = sink.read("host.kernel_release", "/proc/sys/kernel/osrelease"))
    sink.set("host.kernel_release", first_line(*text), "/proc/sys/kernel/osrelease");
}

}  // namespace ld::audit
