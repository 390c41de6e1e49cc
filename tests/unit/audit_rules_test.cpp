// The shipped host rules (rules/host_*.toml) on prepared trees: a badly tuned host yields the
// expected findings and sysctl file, a well-tuned one nothing above info, a partial one
// nothing from facts it could not read. The CLI's --fail-on exit codes on the same trees.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "../integration/proc_util.hpp"
#include "audit/audit.hpp"
#include "rules/engine.hpp"

using namespace ld::audit;
using ld::model::Finding;

namespace {

const std::string kFixtures = std::string(LD_TEST_FIXTURES_DIR) + "/audit";
const std::string kShipped = std::string(LD_TEST_DATA_DIR) + "/../../rules";

const ld::rules::RuleSet& shipped() {
  static const ld::rules::RuleSet set = [] {
    ld::rules::RuleSet s;
    ld::rules::load_rules_path(s, kShipped);
    return s;
  }();
  return set;
}

AuditResult audit_tree(const std::string& tree, AuditTarget target = {}) {
  AuditResult r;
  r.host = audit_host(kFixtures + "/" + tree, target);
  r.findings = ld::rules::evaluate(shipped(), r.host.facts, ld::rules::Scope::kHost);
  return r;
}

std::map<std::string, std::string> severities(const std::vector<Finding>& findings) {
  std::map<std::string, std::string> out;
  for (const auto& f : findings) out[f.rule] = f.severity;
  return out;
}

const Finding* find(const std::vector<Finding>& findings, const std::string& rule) {
  for (const auto& f : findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

int run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), {std::string(LD_BUILD_DIR) + "/latency-doctor", "audit"});
  ld::test::Child child(args);
  return child.wait(std::chrono::seconds(60)).value_or(-1);  // a bound against hangs, not a timing check
}

}  // namespace

TEST(AuditRules, HostRulesLoadCleanly) {
  for (const auto& p : shipped().errors) ADD_FAILURE() << p.to_string();
  for (const auto& p : shipped().warnings) ADD_FAILURE() << p.to_string();
  size_t host_rules = std::count_if(shipped().rules.begin(), shipped().rules.end(),
                                    [](const auto& r) { return r.scope == ld::rules::Scope::kHost; });
  EXPECT_GE(host_rules, 20u);
}

TEST(AuditRules, BadHostYieldsTheExpectedFindings) {
  AuditResult r = audit_tree("bad", {4242, ""});
  const std::map<std::string, std::string> expected{
      {"host-listen-backlog", "warn"},
      {"host-tcp-tw-reuse", "warn"},
      {"host-tcp-fin-timeout", "info"},
      {"host-local-port-range", "info"},
      {"host-slow-start-after-idle", "info"},
      {"host-busy-poll", "info"},
      {"host-nofile-limit", "warn"},
      {"host-swappiness", "warn"},
      {"host-dirty-ratios", "warn"},
      {"host-thp-defrag", "warn"},
      {"host-numa-balancing", "warn"},
      {"host-zone-reclaim", "warn"},
      {"host-cpu-governor", "warn"},
      {"host-cpu-deep-idle", "info"},
      {"host-sched-migration-cost", "info"},
      {"host-irqbalance", "info"},
      {"host-cpu-quota-without-cpuset", "crit"},
      {"host-cgroup-memory-near-limit", "warn"},
      {"host-cgroup-may-swap", "info"},
      {"nginx-proxy-buffering", "warn"},
      {"nginx-proxy-buffer-size", "info"},
      {"nginx-proxy-read-timeout", "warn"},
      {"nginx-keepalive-timeout", "info"},
      {"nginx-upstream-http10", "info"},
      {"trace-no-btf", "warn"},
      {"trace-kptr-restrict", "info"},
  };
  EXPECT_EQ(severities(r.findings), expected);
  // Findings quote the host's numbers and say where nginx settings come from.
  const Finding* quota = find(r.findings, "host-cpu-quota-without-cpuset");
  ASSERT_NE(quota, nullptr);
  EXPECT_NE(quota->title.find("2.0 CPUs over 8 usable CPUs"), std::string::npos) << quota->title;
  EXPECT_NE(quota->evidence.find("throttled in 1200 of 5000 periods"), std::string::npos) << quota->evidence;
  EXPECT_NE(quota->verify.find("/sys/fs/cgroup/system.slice/llm.service/cpu.stat"), std::string::npos) << quota->verify;
  const Finding* buffering = find(r.findings, "nginx-proxy-buffering");
  ASSERT_NE(buffering, nullptr);
  EXPECT_NE(buffering->evidence.find("server llm.example.com, location /v1/: proxy_buffering on (nginx's default; "
                                     "proxy_pass at /etc/nginx/conf.d/llm.conf:5)"),
            std::string::npos)
      << buffering->evidence;
  const Finding* timeout = find(r.findings, "nginx-proxy-read-timeout");
  ASSERT_NE(timeout, nullptr);
  EXPECT_NE(timeout->evidence.find("set at /etc/nginx/conf.d/llm.conf:7"), std::string::npos) << timeout->evidence;
  const Finding* backlog = find(r.findings, "host-listen-backlog");
  ASSERT_NE(backlog, nullptr);
  ASSERT_EQ(backlog->sysctl.size(), 2u);
  EXPECT_EQ(backlog->sysctl[0].key, "net.core.somaxconn");
  EXPECT_EQ(backlog->sysctl[0].current, "128");
  // Most severe first.
  EXPECT_EQ(r.findings.front().severity, "crit");
}

TEST(AuditRules, BadHostSysctlFile) {
  AuditResult r = audit_tree("bad", {4242, ""});
  std::string file = render_sysctl_file(r);
  std::map<std::string, std::string> set;
  std::istringstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find(" = ");
    ASSERT_NE(eq, std::string::npos) << line;
    set[line.substr(0, eq)] = line.substr(eq + 3);
  }
  const std::map<std::string, std::string> expected{
      {"net.core.somaxconn", "65535"},
      {"net.ipv4.tcp_max_syn_backlog", "8192"},
      {"net.ipv4.tcp_tw_reuse", "1"},
      {"net.ipv4.tcp_fin_timeout", "30"},
      {"net.ipv4.ip_local_port_range", "1024 65535"},
      {"net.ipv4.tcp_slow_start_after_idle", "0"},
      {"net.core.busy_read", "50"},
      {"net.core.busy_poll", "50"},
      {"vm.swappiness", "1"},
      {"vm.dirty_ratio", "10"},
      {"vm.dirty_background_ratio", "3"},
      {"kernel.numa_balancing", "0"},
      {"vm.zone_reclaim_mode", "0"},
      {"kernel.sched_migration_cost_ns", "5000000"},
  };
  EXPECT_EQ(set, expected) << file;
  // Every setting follows its reason and caveat.
  EXPECT_NE(file.find("# caveat: only outgoing connections are affected; the article warns against it behind NAT, "
                      "where peers share an address\n# now: 0\nnet.ipv4.tcp_tw_reuse = 1\n"),
            std::string::npos)
      << file;
}

TEST(AuditRules, WellTunedHostHasNothingAboveInfo) {
  AuditResult r = audit_tree("good", {777, ""});
  for (const auto& f : r.findings) EXPECT_EQ(f.severity, "info") << f.rule << ": " << f.title << " - " << f.evidence;
  std::string file = render_sysctl_file(r);
  std::istringstream in(file);
  for (std::string line; std::getline(in, line);)
    EXPECT_TRUE(line.empty() || line[0] == '#') << "the good host needs no sysctl: " << line;
}

TEST(AuditRules, PartialHostFiresNothingOnUnknownFacts) {
  AuditResult r = audit_tree("partial", {31, ""});
  // Only facts that were read can fire: garbage somaxconn ("lots of them") is no number, and
  // the unreadable swappiness is unknown.
  for (const auto& f : r.findings) {
    EXPECT_NE(f.rule, "host-listen-backlog");
    EXPECT_NE(f.rule, "host-swappiness");
    EXPECT_NE(f.rule, "host-cpu-governor");
  }
}

TEST(AuditRules, FailOnGatesImagesWithExit3) {
  EXPECT_EQ(run_cli({"--root", kFixtures + "/bad", "--fail-on", "warn", "--format", "sysctl"}), 3);
  EXPECT_EQ(run_cli({"--root", kFixtures + "/bad", "--pid", "4242", "--fail-on", "crit"}), 3);
  EXPECT_EQ(run_cli({"--root", kFixtures + "/bad", "--fail-on", "crit"}), 0);  // the crit one needs the cgroup
  EXPECT_EQ(run_cli({"--root", kFixtures + "/good", "--pid", "777", "--fail-on", "warn"}), 0);
  EXPECT_EQ(run_cli({"--root", kFixtures + "/bad"}), 0);  // without --fail-on findings are not failures
}
