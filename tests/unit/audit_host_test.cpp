// Host facts read from prepared trees (tests/fixtures/audit/{bad,good,partial}): values and
// types, cgroup v1/v2 via --pid and --cgroup, tracing readiness, and unknowns for missing,
// unreadable and malformed files.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "audit/cpu_list.hpp"
#include "audit/host_audit.hpp"

using namespace ld::audit;
using ld::rules::FactSet;

namespace {

const std::string kFixtures = std::string(LD_TEST_FIXTURES_DIR) + "/audit";
const std::string kBad = kFixtures + "/bad";
const std::string kGood = kFixtures + "/good";
const std::string kPartial = kFixtures + "/partial";

double num(const FactSet& f, const std::string& name) {
  const auto* v = f.get(name);
  if (!v || !std::holds_alternative<double>(*v)) {
    ADD_FAILURE() << name << " is not a number fact";
    return -1;
  }
  return std::get<double>(*v);
}

std::string str(const FactSet& f, const std::string& name) {
  const auto* v = f.get(name);
  if (!v || !std::holds_alternative<std::string>(*v)) {
    ADD_FAILURE() << name << " is not a string fact";
    return "";
  }
  return std::get<std::string>(*v);
}

std::optional<bool> flag(const FactSet& f, const std::string& name) {
  const auto* v = f.get(name);
  if (!v || !std::holds_alternative<bool>(*v)) return std::nullopt;
  return std::get<bool>(*v);
}

const UnknownFact* unknown(const HostAudit& a, const std::string& fact) {
  for (const auto& u : a.unknown)
    if (u.fact == fact) return &u;
  return nullptr;
}

const TraceCapability* capability(const HostAudit& a, const std::string& name) {
  for (const auto& c : a.tracing)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

TEST(AuditHost, BadTreeSysctlsAndSystem) {
  HostAudit a = audit_host(kBad, {4242, ""});
  const FactSet& f = a.facts;
  EXPECT_EQ(a.root, kBad);
  EXPECT_EQ(num(f, "sysctl.net.core.somaxconn"), 128);
  EXPECT_EQ(num(f, "sysctl.vm.swappiness"), 60);
  EXPECT_EQ(num(f, "sysctl.kernel.sched_migration_cost_ns"), 500000);
  EXPECT_EQ(str(f, "sysctl.net.ipv4.ip_local_port_range"), "32768 60999");  // tab -> one space
  EXPECT_EQ(num(f, "sysctl.net.ipv4.ip_local_port_range.low"), 32768);
  EXPECT_EQ(num(f, "sysctl.net.ipv4.ip_local_port_range.high"), 60999);
  EXPECT_EQ(a.sources.at("sysctl.vm.swappiness"), "/proc/sys/vm/swappiness");
  EXPECT_FALSE(f.has("host.sched_migration_cost_ns"));  // the sysctl exists: debugfs not consulted
  EXPECT_EQ(str(f, "host.kernel_release"), "5.10.0-bad");

  EXPECT_EQ(num(f, "cpu.count"), 8);
  EXPECT_EQ(str(f, "cpu.model"), "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz");
  EXPECT_EQ(flag(f, "cpu.cpufreq"), true);
  EXPECT_EQ(str(f, "cpu.governor"), "ondemand,powersave");  // every distinct governor
  EXPECT_EQ(flag(f, "cpu.boost"), false);                   // intel_pstate/no_turbo = 1
  EXPECT_EQ(str(f, "cpu.idle_states"), "POLL,C1,C1E,C6");
  EXPECT_EQ(str(f, "cpu.idle_deepest"), "C6");
  EXPECT_DOUBLE_EQ(num(f, "cpu.idle_max_latency_ms"), 0.133);
  EXPECT_EQ(str(f, "mem.thp_enabled"), "always");
  EXPECT_EQ(str(f, "mem.thp_defrag"), "always");
  EXPECT_EQ(num(f, "mem.swap_total_bytes"), 8388604.0 * 1024);
  EXPECT_EQ(num(f, "numa.nodes"), 2);
  EXPECT_EQ(flag(f, "irq.irqbalance_running"), false);
}

TEST(AuditHost, BadTreeCgroupV2ViaPid) {
  HostAudit a = audit_host(kBad, {4242, ""});
  const FactSet& f = a.facts;
  EXPECT_EQ(a.target_pid, 4242);
  EXPECT_EQ(a.target_comm, "python3");
  EXPECT_EQ(a.target_cgroup, "/system.slice/llm.service");
  EXPECT_EQ(num(f, "cgroup.version"), 2);
  EXPECT_EQ(flag(f, "cgroup.cpu_limited"), true);
  EXPECT_EQ(num(f, "cgroup.cpu_quota_cpus"), 2);
  EXPECT_EQ(a.sources.at("cgroup.cpu_quota_cpus"), "/sys/fs/cgroup/system.slice/llm.service/cpu.max");
  EXPECT_EQ(num(f, "cgroup.nr_throttled"), 1200);
  EXPECT_EQ(num(f, "cgroup.throttled_ms"), 96000);
  // No cpuset controller in that cgroup: the process's affinity.
  EXPECT_EQ(str(f, "cgroup.cpuset_cpus"), "0-7");
  EXPECT_EQ(num(f, "cgroup.cpuset_count"), 8);
  EXPECT_EQ(a.sources.at("cgroup.cpuset_cpus"), "/proc/4242/status");
  EXPECT_EQ(num(f, "cgroup.mem_limit_bytes"), 8589934592.0);
  EXPECT_EQ(flag(f, "cgroup.swap_limited"), false);  // memory.swap.max = max
  EXPECT_FALSE(f.has("cgroup.swap_limit_bytes"));
  EXPECT_EQ(num(f, "limits.nofile_soft"), 1024);
  EXPECT_EQ(num(f, "limits.nofile_hard"), 4096);
}

TEST(AuditHost, CgroupByPathGivesTheSameFactsAsByPid) {
  HostAudit by_pid = audit_host(kBad, {4242, ""});
  for (std::string path : {"/system.slice/llm.service", "/sys/fs/cgroup/system.slice/llm.service"}) {
    HostAudit by_path = audit_host(kBad, {0, path});
    EXPECT_EQ(by_path.target_pid, 4242) << "first pid of cgroup.procs, for " << path;
    for (const char* name : {"cgroup.cpu_quota_cpus", "cgroup.mem_limit_bytes", "limits.nofile_soft", "cgroup.version"})
      EXPECT_EQ(num(by_path.facts, name), num(by_pid.facts, name)) << name << " via " << path;
  }
  EXPECT_THROW(audit_host(kBad, {0, "/no/such.service"}), std::runtime_error);
  EXPECT_THROW(audit_host(kBad, {999999, ""}), std::runtime_error);
}

TEST(AuditHost, BadTreeNginxAndTracing) {
  HostAudit a = audit_host(kBad, {});
  const FactSet& f = a.facts;
  EXPECT_EQ(flag(f, "nginx.found"), true);
  EXPECT_EQ(num(f, "nginx.proxied_blocks"), 1);
  EXPECT_EQ(str(f, "nginx.proxy_buffering"), "on");
  EXPECT_EQ(flag(f, "nginx.proxy_buffering.default"), true);
  EXPECT_EQ(str(f, "nginx.proxy_buffering.at"), "/etc/nginx/conf.d/llm.conf:5");
  EXPECT_EQ(num(f, "nginx.proxy_buffer_size_bytes"), 65536);
  EXPECT_EQ(num(f, "nginx.proxy_read_timeout_ms"), 30000);
  EXPECT_EQ(num(f, "nginx.keepalive_timeout_ms"), 75000);
  EXPECT_EQ(str(f, "nginx.keepalive_timeout.at"), "/etc/nginx/nginx.conf:8");

  EXPECT_EQ(flag(f, "trace.btf"), false);
  EXPECT_EQ(flag(f, "trace.kprobes"), false);  // CONFIG_KPROBE_EVENTS not set in /boot/config-*
  EXPECT_EQ(flag(f, "trace.uprobes"), true);
  EXPECT_EQ(flag(f, "trace.fentry"), false);
  EXPECT_EQ(str(f, "trace.kernel_config"), "/boot/config-5.10.0-bad");
  EXPECT_EQ(num(f, "trace.perf_event_paranoid"), 3);
  EXPECT_EQ(num(f, "trace.kptr_restrict"), 2);
  EXPECT_EQ(flag(f, "trace.probe.sock"), false);  // no BTF
  ASSERT_NE(capability(a, "probe sock"), nullptr);
  EXPECT_NE(capability(a, "probe sock")->detail.find("BTF"), std::string::npos);
  // Capabilities belong to the live host only.
  EXPECT_FALSE(f.has("trace.cap_bpf"));
  ASSERT_NE(capability(a, "CAP_BPF/CAP_PERFMON"), nullptr);
  EXPECT_FALSE(capability(a, "CAP_BPF/CAP_PERFMON")->available.has_value());
  // Without a target: no cgroup or limit facts, but the host's cgroup version.
  EXPECT_EQ(num(f, "cgroup.version"), 2);
  EXPECT_FALSE(f.has("cgroup.cpu_quota_cpus"));
  EXPECT_FALSE(f.has("limits.nofile_soft"));
}

TEST(AuditHost, GoodTreeCgroupV1AndReadiness) {
  HostAudit a = audit_host(kGood, {777, ""});
  const FactSet& f = a.facts;
  EXPECT_EQ(num(f, "cgroup.version"), 1);
  EXPECT_EQ(flag(f, "cgroup.cpu_limited"), false);
  EXPECT_FALSE(f.has("cgroup.cpu_quota_cpus"));
  EXPECT_EQ(str(f, "cgroup.cpuset_cpus"), "0-3");
  EXPECT_EQ(a.sources.at("cgroup.cpuset_cpus"), "/sys/fs/cgroup/cpuset/llm");
  EXPECT_EQ(flag(f, "cgroup.mem_limited"), false);  // the v1 "unlimited" page-counter maximum
  EXPECT_EQ(flag(f, "cgroup.swap_limited"), false);
  EXPECT_EQ(num(f, "limits.nofile_soft"), 1048576);
  EXPECT_EQ(str(f, "cpu.governor"), "performance");
  EXPECT_EQ(flag(f, "cpu.boost"), true);
  EXPECT_EQ(str(f, "cpu.idle_states"), "POLL,C1");  // C6 is disabled
  EXPECT_EQ(str(f, "cpu.model"), "AMD EPYC 9354 32-Core Processor");
  EXPECT_EQ(num(f, "mem.swap_total_bytes"), 0);
  EXPECT_EQ(num(f, "numa.nodes"), 1);
  EXPECT_EQ(flag(f, "irq.irqbalance_running"), true);
  EXPECT_EQ(str(f, "nginx.proxy_buffering"), "off");
  EXPECT_EQ(num(f, "nginx.proxy_read_timeout_ms"), 3600000);
  EXPECT_EQ(str(f, "nginx.proxy_http_version"), "1.1");
  EXPECT_EQ(str(f, "trace.kernel_config"), "/proc/config.gz");  // gunzipped
  for (const char* name : {"trace.btf", "trace.tracepoints", "trace.uprobes", "trace.kprobes", "trace.fentry",
                           "trace.probe.sock", "trace.probe.gil", "trace.probe.tcp", "trace.probe.cpufreq"})
    EXPECT_EQ(flag(f, name), true) << name;
  EXPECT_TRUE(a.warnings.empty()) << a.warnings.front();
}

TEST(AuditHost, PartialTreeListsUnknownsAndNeverThrows) {
  HostAudit a;
  ASSERT_NO_THROW(a = audit_host(kPartial, {31, ""}));
  const FactSet& f = a.facts;
  // Garbage is not a number; a directory where a file should be is unreadable.
  EXPECT_EQ(str(f, "sysctl.net.core.somaxconn"), "lots of them");
  EXPECT_FALSE(f.has("sysctl.vm.swappiness"));
  ASSERT_NE(unknown(a, "sysctl.vm.swappiness"), nullptr);
  EXPECT_EQ(unknown(a, "sysctl.vm.swappiness")->reason, "Is a directory");
  ASSERT_NE(unknown(a, "sysctl.vm.dirty_ratio"), nullptr);
  EXPECT_EQ(unknown(a, "sysctl.vm.dirty_ratio")->reason, "no such file");
  EXPECT_EQ(num(f, "sysctl.net.ipv4.ip_local_port_range"), 1024);  // one field: a number
  // A missing migration-cost sysctl is normal since 5.13: only its debugfs home is unknown.
  EXPECT_EQ(unknown(a, "sysctl.kernel.sched_migration_cost_ns"), nullptr);
  EXPECT_NE(unknown(a, "host.sched_migration_cost_ns"), nullptr);
  EXPECT_FALSE(f.has("cpu.count"));
  EXPECT_NE(unknown(a, "cpu.count"), nullptr);  // "0-" is malformed
  EXPECT_FALSE(f.has("cpu.governor"));
  EXPECT_NE(unknown(a, "cpu.governor"), nullptr);
  EXPECT_FALSE(f.has("mem.thp_enabled"));  // no [choice]
  EXPECT_NE(unknown(a, "mem.thp_enabled"), nullptr);
  EXPECT_FALSE(f.has("mem.swap_total_bytes"));
  EXPECT_FALSE(f.has("limits.nofile_soft"));
  EXPECT_NE(unknown(a, "limits.nofile_soft"), nullptr);
  EXPECT_FALSE(f.has("cgroup.cpuset_cpus"));   // "7-3" is malformed
  EXPECT_FALSE(f.has("trace.kernel_config"));  // /proc/config.gz is not gzip, no /boot
  EXPECT_NE(unknown(a, "trace.kernel_config"), nullptr);
  EXPECT_FALSE(f.has("trace.fentry"));
  EXPECT_EQ(flag(f, "nginx.valid"), false);
  EXPECT_FALSE(f.has("nginx.proxy_read_timeout_ms"));  // "forever" is not a time
  bool warned = std::any_of(a.warnings.begin(), a.warnings.end(), [](const std::string& w) {
    return w.find("proxy_read_timeout forever: not a valid value") != std::string::npos;
  });
  EXPECT_TRUE(warned);
}

TEST(AuditHost, EmptyRootIsAllUnknown) {
  std::string empty = testing::TempDir() + "/audit-empty-root";
  mkdir(empty.c_str(), 0700);
  HostAudit a = audit_host(empty, {});
  EXPECT_FALSE(a.facts.has("sysctl.net.core.somaxconn"));
  EXPECT_FALSE(a.facts.has("cpu.cpufreq"));  // no /sys at all: unknown, not "no cpufreq"
  EXPECT_NE(unknown(a, "cpu.cpufreq"), nullptr);
  EXPECT_EQ(flag(a.facts, "nginx.found"), false);
  EXPECT_GT(a.unknown.size(), 20u);
}

TEST(AuditHost, ExistingCgroupFixturesV1) {
  // tests/data/cgroup-v1 (the cgroup probe's fixture): a v1 service with a 0.2-CPU quota.
  HostAudit a = audit_host(std::string(LD_TEST_DATA_DIR) + "/cgroup-v1", {4242, ""});
  EXPECT_EQ(num(a.facts, "cgroup.version"), 1);
  EXPECT_DOUBLE_EQ(num(a.facts, "cgroup.cpu_quota_cpus"), 0.2);
  EXPECT_EQ(num(a.facts, "cgroup.mem_limit_bytes"), 104857600);
}

TEST(AuditHost, FactsJsonRoundTrip) {
  FactSet facts = read_host_facts(kBad, {4242, ""});
  nlohmann::json j = host_facts_to_json(facts);
  EXPECT_EQ(j["sysctl.net.core.somaxconn"], 128);
  EXPECT_TRUE(j["sysctl.net.core.somaxconn"].is_number_integer());
  EXPECT_EQ(j["cgroup.cpu_limited"], true);
  FactSet back = host_facts_from_json(j);
  EXPECT_EQ(back.all(), facts.all());
  EXPECT_TRUE(host_facts_from_json(nlohmann::json::array()).all().empty());
}

TEST(AuditCpuList, Parses) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("0-"));
  EXPECT_FALSE(parse_cpu_list("a"));
  EXPECT_FALSE(parse_cpu_list("0-99999999"));
}

TEST(AuditHost, AncestorLimitsBindTheService) {
  // A v2 service without limits of its own inside a slice that has them.
  namespace fs = std::filesystem;
  const fs::path root = fs::path(testing::TempDir()) / "audit-ancestor-limits";
  fs::remove_all(root);
  auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories((root / path.substr(1)).parent_path());
    std::ofstream(root / path.substr(1)) << text;
  };
  write("/proc/self/mountinfo", "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  write("/proc/50/cgroup", "0::/work.slice/svc\n");
  for (const std::string dir : {"/sys/fs/cgroup/work.slice", "/sys/fs/cgroup/work.slice/svc"})
    write(dir + "/cgroup.controllers", "cpu memory\n");
  write("/sys/fs/cgroup/work.slice/cpu.max", "150000 100000\n");
  write("/sys/fs/cgroup/work.slice/memory.max", "1073741824\n");
  write("/sys/fs/cgroup/work.slice/svc/cpu.max", "max 100000\n");
  write("/sys/fs/cgroup/work.slice/svc/memory.max", "max\n");
  HostAudit a = audit_host(root.string(), {50, ""});
  EXPECT_DOUBLE_EQ(num(a.facts, "cgroup.cpu_quota_cpus"), 1.5);
  EXPECT_EQ(a.sources.at("cgroup.cpu_quota_cpus"), "/sys/fs/cgroup/work.slice/cpu.max");
  EXPECT_EQ(num(a.facts, "cgroup.mem_limit_bytes"), 1073741824);
  EXPECT_EQ(a.sources.at("cgroup.mem_limit_bytes"), "/sys/fs/cgroup/work.slice/memory.max");
  fs::remove_all(root);
}

TEST(AuditHost, TracefsHiddenFromThisUserIsNotAbsent) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads through mode 000: only meaningful unprivileged";
  namespace fs = std::filesystem;
  const fs::path root = fs::path(testing::TempDir()) / "audit-hidden-tracefs";
  fs::remove_all(root);
  fs::create_directories(root / "sys/kernel/tracing/events/syscalls");
  fs::create_directories(root / "proc/sys/kernel");
  std::ofstream(root / "proc/sys/kernel/osrelease") << "6.1.0-x\n";
  fs::create_directories(root / "boot");
  std::ofstream(root / "boot/config-6.1.0-x") << "CONFIG_FTRACE_SYSCALLS=y\nCONFIG_BPF_JIT=y\nCONFIG_DYNAMIC_FTRACE_"
                                                 "WITH_DIRECT_CALLS=y\nCONFIG_DEBUG_INFO_BTF=y\n";
  fs::permissions(root / "sys/kernel/tracing", fs::perms::none);
  HostAudit a = audit_host(root.string(), {});
  fs::permissions(root / "sys/kernel/tracing", fs::perms::owner_all);
  fs::remove_all(root);
  EXPECT_EQ(flag(a.facts, "trace.tracepoints"), true);  // from the config
  ASSERT_NE(capability(a, "tracepoints"), nullptr);
  EXPECT_NE(capability(a, "tracepoints")->detail.find("not readable by this user"), std::string::npos);
  EXPECT_FALSE(a.facts.has("trace.fentry"));  // the config allows it, tracefs would tell: unknown
  EXPECT_NE(unknown(a, "trace.fentry"), nullptr);
}
