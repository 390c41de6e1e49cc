// trace.* facts: what latency-doctor can and cannot trace on this host. Read from files only
// (tracefs, the kernel config, /proc/self/status): ld_core loads no BPF.
#include <cerrno>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "audit/fact_sink.hpp"

namespace ld::audit {
namespace {

// "CONFIG_X=y" -> {"CONFIG_X", "y"}; "# CONFIG_X is not set" -> {"CONFIG_X", "n"}.
struct KernelConfig {
  std::string source;  // host path; "" when no config was readable
  std::map<std::string, std::string, std::less<>> values;

  // "y", "m", "n" (explicitly not set) or "" (not mentioned, or no config at all: unknown,
  // since an abbreviated or foreign config may leave options out).
  std::string get(std::string_view key) const {
    auto it = values.find(key);
    return it == values.end() ? "" : it->second;
  }
  std::optional<bool> enabled(std::string_view key) const {
    std::string v = get(key);
    if (v.empty()) return std::nullopt;
    return v == "y" || v == "m";
  }
};

KernelConfig parse_kernel_config(std::string_view text, std::string source) {
  KernelConfig config;
  config.source = std::move(source);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    if (line.rfind("CONFIG_", 0) == 0) {
      auto eq = line.find('=');
      if (eq != std::string_view::npos)
        config.values[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    } else if (line.rfind("# CONFIG_", 0) == 0 && line.size() > 13 && line.substr(line.size() - 11) == " is not set") {
      config.values[std::string(line.substr(2, line.size() - 13))] = "n";
    }
  }
  return config;
}

KernelConfig read_kernel_config(FactSink& sink) {
  const HostTree& tree = sink.tree();
  FileText gz = tree.read_gzip("/proc/config.gz");
  if (gz.ok) return parse_kernel_config(gz.text, "/proc/config.gz");
  std::string boot;
  const rules::FactValue* release = sink.facts().get("host.kernel_release");
  if (release && std::holds_alternative<std::string>(*release))
    boot = "/boot/config-" + std::get<std::string>(*release);
  if (!boot.empty()) {
    FileText text = tree.read(boot);
    if (text.ok) return parse_kernel_config(text.text, boot);
  }
  sink.unknown("trace.kernel_config", boot.empty() ? "/proc/config.gz" : "/proc/config.gz, " + boot,
               gz.missing ? "no such file" : gz.error);
  return {};
}

std::string tracefs_dir(const HostTree& tree) {
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
    if (tree.is_dir(std::string(dir) + "/events")) return dir;
  return "";
}

class Readiness {
 public:
  Readiness(FactSink& sink)
      : sink_(sink),
        tree_(sink.tree()),
        tracefs_(tracefs_dir(tree_)),
        // tracefs is root-only (0700): an unprivileged audit cannot look inside.
        tracefs_hidden_(tracefs_.empty() && tree_.stat_error("/sys/kernel/tracing/events") == EACCES) {
    config_ = read_kernel_config(sink);
    if (!config_.source.empty()) sink_.set("trace.kernel_config", config_.source, config_.source);
  }

  void run() {
    btf();
    capabilities();
    tracepoints();
    probe_kind("trace.uprobes", "uprobes", "uprobe_events", {"CONFIG_UPROBES", "CONFIG_UPROBE_EVENTS"},
               "user-space probes: the gil probe (Python GIL waits)");
    probe_kind("trace.kprobes", "kprobes", "kprobe_events", {"CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS"},
               "not needed: latency-doctor uses tracepoints");
    fentry();
    perf_events();
    sysctl_knobs();
    probes();
  }

 private:
  void add(const std::string& fact, const std::string& name, std::optional<bool> available, std::string detail,
           const std::string& source) {
    if (available) sink_.set(fact, *available, source);
    else sink_.unknown(fact, source, detail);
    sink_.audit().tracing.push_back({name, available, std::move(detail)});
  }

  std::string config_says(std::string_view key) const {
    std::string v = config_.get(key);
    return v == "n" ? fmt::format("{} is not set in {}", key, config_.source)
                    : fmt::format("{}={} in {}", key, v, config_.source);
  }

  void btf() {
    const std::string path = "/sys/kernel/btf/vmlinux";
    if (tree_.exists(path)) return add("trace.btf", "BTF", true, "kernel type info for CO-RE probes: " + path, path);
    if (!tree_.is_dir("/sys/kernel"))
      return add("trace.btf", "BTF", std::nullopt, "no /sys/kernel under this root", path);
    add("trace.btf", "BTF", false,
        "no " + path + ": the probes cannot load (a kernel built with CONFIG_DEBUG_INFO_BTF=y is needed)", path);
  }

  // Only the live host's process has meaningful capabilities; a tree's are someone else's.
  void capabilities() {
    if (!tree_.live()) {
      sink_.audit().tracing.push_back(
          {"CAP_BPF/CAP_PERFMON", std::nullopt, "not checked under --root: they belong to whoever runs the agent"});
      return;
    }
    auto status = sink_.read("trace.cap_bpf", "/proc/self/status");
    if (!status) return;
    auto pos = status->find("CapEff:");
    if (pos == std::string::npos) return sink_.unknown("trace.cap_bpf", "/proc/self/status", "no CapEff line");
    std::string hex = first_line(std::string_view(*status).substr(pos + 7));
    uint64_t caps = 0;
    auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), caps, 16);
    if (ec != std::errc() || end != hex.data() + hex.size())
      return sink_.unknown("trace.cap_bpf", "/proc/self/status", "malformed CapEff: " + hex);
    auto has = [&](int bit) { return (caps >> bit) & 1; };
    constexpr int kCapSysAdmin = 21, kCapPerfmon = 38, kCapBpf = 39;
    bool bpf = has(kCapBpf) || has(kCapSysAdmin), perfmon = has(kCapPerfmon) || has(kCapSysAdmin);
    sink_.set("trace.cap_sys_admin", bool(has(kCapSysAdmin)), "/proc/self/status");
    add("trace.cap_bpf", "CAP_BPF", bpf, bpf ? "this process may load BPF programs" : "run as root or grant CAP_BPF",
        "/proc/self/status");
    add("trace.cap_perfmon", "CAP_PERFMON", perfmon,
        perfmon ? "this process may attach tracepoints and perf events" : "run as root or grant CAP_PERFMON",
        "/proc/self/status");
  }

  void tracepoints() {
    std::string source = tracefs_.empty() ? "/sys/kernel/tracing" : tracefs_ + "/events/syscalls";
    if (!tracefs_.empty()) {
      bool syscalls = tree_.is_dir(tracefs_ + "/events/syscalls");
      sink_.set("trace.tracefs", true, tracefs_);
      return add("trace.tracepoints", "tracepoints", syscalls,
                 syscalls ? "syscall, sched, sock, block... tracepoints: the token timeline and most evidence"
                          : "tracefs has no syscalls events (CONFIG_FTRACE_SYSCALLS): no token timeline",
                 source);
    }
    sink_.set("trace.tracefs", false, "/sys/kernel/tracing");
    auto syscalls = config_.enabled("CONFIG_FTRACE_SYSCALLS");
    if (!syscalls)
      return add("trace.tracepoints", "tracepoints", std::nullopt, "tracefs not mounted here and no kernel config",
                 source);
    std::string tracefs_state = tracefs_hidden_ ? "tracefs is not readable by this user (root can read it)"
                                                : "tracefs not mounted here (latency-doctor mounts it)";
    add("trace.tracepoints", "tracepoints", *syscalls,
        *syscalls ? tracefs_state + "; " + config_says("CONFIG_FTRACE_SYSCALLS")
                  : config_says("CONFIG_FTRACE_SYSCALLS"),
        config_.source);
  }

  // config_keys: the option and the ones it depends on, outermost first (CONFIG_KPROBES before
  // CONFIG_KPROBE_EVENTS): the first one that is off is the reason.
  void probe_kind(const std::string& fact, const std::string& name, const std::string& file,
                  const std::vector<std::string>& config_keys, const std::string& use) {
    if (!tracefs_.empty() && tree_.exists(tracefs_ + "/" + file))
      return add(fact, name, true, use, tracefs_ + "/" + file);
    std::optional<bool> all_on = config_keys.empty() ? std::nullopt : std::optional<bool>(true);
    for (const auto& key : config_keys) {
      auto on = config_.enabled(key);
      if (on && !*on) return add(fact, name, false, config_says(key), config_.source);
      if (!on) all_on.reset();
    }
    if (all_on) return add(fact, name, true, use, config_.source);
    if (!tracefs_.empty())  // tracefs is there and offers no such events file
      return add(fact, name, false, "no " + tracefs_ + "/" + file, tracefs_ + "/" + file);
    add(fact, name, std::nullopt, "no tracefs and no kernel config to tell", "/sys/kernel/tracing/" + file);
  }

  // fentry/fexit need BPF trampolines: a JIT, direct ftrace calls and BTF, and a kernel that
  // lets function tracing patch its functions.
  void fentry() {
    const std::string use = "BPF trampolines (fentry/fexit): not needed by latency-doctor";
    if (!tracefs_.empty()) {
      std::string functions = tracefs_ + "/available_filter_functions";
      FileText f = tree_.read(functions, 1);
      if (!f.ok && f.error_number == EPERM)
        return add("trace.fentry", "fentry", false,
                   "function tracing is blocked on this kernel (" + functions + ": " + f.error + ")", functions);
    }
    for (const char* key : {"CONFIG_BPF_JIT", "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "CONFIG_DEBUG_INFO_BTF"}) {
      auto on = config_.enabled(key);
      if (!on) return add("trace.fentry", "fentry", std::nullopt, "no kernel config to tell", "/proc/config.gz");
      if (!*on) return add("trace.fentry", "fentry", false, config_says(key), config_.source);
    }
    // The config allows trampolines; whether the kernel lets them patch functions shows in
    // tracefs only.
    if (tracefs_hidden_)
      return add("trace.fentry", "fentry", std::nullopt,
                 "the kernel config allows it; whether function tracing is permitted needs root to check",
                 "/sys/kernel/tracing/available_filter_functions");
    add("trace.fentry", "fentry", true, use, config_.source);
  }

  void perf_events() {
    const std::string path = "/proc/sys/kernel/perf_event_paranoid";
    FileText f = tree_.read(path, 64);
    if (f.ok) return add("trace.perf_events", "perf events", true, "on-CPU samples: the perf probe", path);
    if (f.missing && tree_.is_dir("/proc/sys/kernel"))
      return add("trace.perf_events", "perf events", false, "no " + path + " (CONFIG_PERF_EVENTS off)", path);
    add("trace.perf_events", "perf events", std::nullopt, f.error, path);
  }

  void sysctl_knobs() {
    struct Knob {
      const char* fact;
      const char* sysctl;
      const char* meaning;
    };
    const Knob knobs[] = {
        {"trace.perf_event_paranoid", "sysctl.kernel.perf_event_paranoid",
         "perf events need CAP_PERFMON (or root) above -1; root is not affected"},
        {"trace.unprivileged_bpf_disabled", "sysctl.kernel.unprivileged_bpf_disabled",
         "1/2 = BPF only with CAP_BPF: expected, latency-doctor runs privileged"},
        {"trace.kptr_restrict", "sysctl.kernel.kptr_restrict",
         "2 hides kernel addresses even from root: kernel stacks in the evidence stay unsymbolised"},
    };
    for (const auto& k : knobs) {
      const auto* v = sink_.facts().get(k.sysctl);
      if (!v) continue;  // already listed as unknown by the sysctl reader
      const double* n = std::get_if<double>(v);
      if (!n) continue;
      sink_.set(k.fact, *n, sink_.audit().sources[k.sysctl]);
      bool ok = std::string(k.fact) != "trace.kptr_restrict" || *n < 2;
      sink_.audit().tracing.push_back({fmt::format("{} = {}", std::string(k.sysctl).substr(14), *n), ok, k.meaning});
    }
  }

  // Per probe: what it needs (mirrors agent/probes/registry.cpp and the BPF programs).
  void probes() {
    struct Need {
      const char* probe;
      const char* gives;
      std::vector<const char*> events;  // tracefs events it cannot do without
      bool uprobes = false, perf = false, cpufreq = false;
    };
    const Need needs[] = {
        {"sock", "the token timeline (SSE sends)", {"syscalls/sys_exit_write", "syscalls/sys_exit_sendto"}},
        {"sched", "run-queue waits, wakers, migrations", {"sched/sched_switch", "sched/sched_waking"}},
        {"perf", "on-CPU samples with kernel stacks", {}, false, true},
        {"memory", "mmap/page-fault time (kv_alloc)", {"syscalls/sys_enter_mmap"}},
        {"disk", "fsync and block IO (disk_io)", {"syscalls/sys_enter_fsync"}},
        {"gil", "Python GIL waits", {"syscalls/sys_enter_futex"}, true},
        {"futex", "lock waits", {"syscalls/sys_enter_futex"}},
        {"tcp", "TIME_WAIT churn, retransmits", {"sock/inet_sock_set_state", "tcp/tcp_retransmit_skb"}},
        {"cgroup", "CFS throttling, memory limits", {}},
        {"reclaim", "direct reclaim, compaction", {"vmscan/mm_vmscan_direct_reclaim_begin"}},
        {"cpufreq", "CPU frequency", {}, false, false, true},
    };
    const auto& f = sink_.facts();
    auto flag = [&](const char* name) -> std::optional<bool> {
      const auto* v = f.get(name);
      if (!v || !std::holds_alternative<bool>(*v)) return std::nullopt;
      return std::get<bool>(*v);
    };
    for (const auto& need : needs) {
      std::string fact = std::string("trace.probe.") + need.probe;
      std::vector<std::string> missing;
      bool unknown = false;
      auto require = [&](std::optional<bool> have, const std::string& what) {
        if (!have) unknown = true;
        else if (!*have) missing.push_back(what);
      };
      require(flag("trace.btf"), "BTF");
      if (tree_.live()) {
        require(flag("trace.cap_bpf"), "CAP_BPF");
        require(flag("trace.cap_perfmon"), "CAP_PERFMON");
      }
      for (const char* event : need.events) {
        if (tracefs_.empty()) require(flag("trace.tracepoints"), event);
        else require(tree_.is_dir(tracefs_ + "/events/" + event), event);
      }
      if (need.uprobes) require(flag("trace.uprobes"), "uprobes");
      if (need.perf) require(flag("trace.perf_events"), "perf events");
      if (need.cpufreq) require(flag("cpu.cpufreq"), "cpufreq (the host sets the frequency)");
      std::optional<bool> available;
      std::string detail = need.gives;
      if (!missing.empty()) {
        available = false;
        for (size_t i = 0; i < missing.size(); ++i) detail += (i == 0 ? ": needs " : ", ") + missing[i];
      } else if (!unknown) {
        available = true;
      } else {
        detail += ": some requirement is unknown here";
      }
      if (available) sink_.set(fact, *available, tracefs_.empty() ? "/sys/kernel" : tracefs_);
      sink_.audit().tracing.push_back({std::string("probe ") + need.probe, available, detail});
    }
  }

  FactSink& sink_;
  const HostTree& tree_;
  std::string tracefs_;
  bool tracefs_hidden_;
  KernelConfig config_;
};

}  // namespace

void read_trace_facts(FactSink& sink) { Readiness(sink).run(); }

}  // namespace ld::audit
