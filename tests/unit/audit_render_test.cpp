// audit output formats: the sysctl.d file (skips what already matches, dedups, comments out
// keys the host lacks, one comment line per reason/caveat), JSON schema audit/v1 with the
// report's finding objects, text sections and --fail-on thresholds.
#include <gtest/gtest.h>

#include <sstream>

#include "audit/audit_render.hpp"

using namespace ld::audit;
using ld::model::Finding;

namespace {

const std::string kBad = std::string(LD_TEST_FIXTURES_DIR) + "/audit/bad";

Finding finding(std::string rule, std::string severity, std::vector<ld::model::SysctlRec> sysctl = {}) {
  Finding f;
  f.rule = std::move(rule);
  f.cause = ld::model::Cause::kTimeWait;
  f.severity = std::move(severity);
  f.title = "title of " + f.rule;
  f.evidence = "evidence of " + f.rule;
  f.remedy = "remedy of " + f.rule;
  f.sysctl = std::move(sysctl);
  f.verify = "sysctl net.core.somaxconn";
  return f;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every non-comment, non-blank line of a sysctl.d file.
std::vector<std::string> settings(const std::string& file) {
  std::vector<std::string> out;
  for (const auto& line : lines_of(file))
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

}  // namespace

TEST(AuditRender, FailOnThresholds) {
  std::vector<Finding> f{finding("b", "info"), finding("z", "crit")};
  EXPECT_TRUE(has_finding_at_or_above(f, "crit"));
  EXPECT_TRUE(has_finding_at_or_above(f, "warn"));
  std::vector<Finding> warn_only{finding("a", "warn"), finding("b", "info")};
  EXPECT_TRUE(has_finding_at_or_above(warn_only, "warn"));
  EXPECT_FALSE(has_finding_at_or_above(warn_only, "crit"));
  EXPECT_FALSE(has_finding_at_or_above({finding("b", "info")}, "warn"));
}

TEST(AuditRender, SysctlFileSkipsMatchingDedupsAndCommentsOutUnknownKeys) {
  AuditResult r;
  r.host.root = "/";
  r.findings = {
      finding("somaxconn", "warn", {{"net.core.somaxconn", "65535", "4096", "uses more memory per listener"}}),
      finding("ports", "info",
              {{"net.ipv4.ip_local_port_range", "1024 65535", "1024\t65535", ""},             // already so
               {"net.core.somaxconn", "1024", "4096", ""}}),                                  // duplicate key
      finding("migration", "info", {{"kernel.sched_migration_cost_ns", "5000000", "", ""}}),  // not on host
  };
  std::string file = render_sysctl_file(r);
  EXPECT_EQ(settings(file), std::vector<std::string>{"net.core.somaxconn = 65535"});
  EXPECT_NE(file.find("# title of somaxconn [warn, rule somaxconn]\n# evidence of somaxconn\n"
                      "# caveat: uses more memory per listener\n# now: 4096\nnet.core.somaxconn = 65535\n"),
            std::string::npos)
      << file;
  EXPECT_NE(file.find("# kernel.sched_migration_cost_ns = 5000000\n"), std::string::npos) << file;
  EXPECT_EQ(file.find("ip_local_port_range"), std::string::npos) << file;
  for (const auto& line : lines_of(file))
    EXPECT_TRUE(line.empty() || line[0] == '#' || line.find(" = ") != std::string::npos) << line;
}

TEST(AuditRender, SysctlFileNeverLetsRuleTextEscapeAComment) {
  AuditResult r;
  Finding f = finding("evil", "warn", {{"vm.swappiness", "1", "60", "line one\nvm.overcommit_memory = 2"}});
  f.title = "two\nlines";
  r.findings = {f};
  EXPECT_EQ(settings(render_sysctl_file(r)), std::vector<std::string>{"vm.swappiness = 1"});
}

TEST(AuditRender, SysctlFileWithNothingToChangeSaysSo) {
  AuditResult r;
  std::string file = render_sysctl_file(r);
  EXPECT_TRUE(settings(file).empty());
  EXPECT_NE(file.find("Nothing to change"), std::string::npos);
}

TEST(AuditRender, JsonHasSchemaHostFactsAndReportFindings) {
  AuditResult r;
  r.host = audit_host(kBad, {4242, ""});
  r.findings = {finding("somaxconn", "warn", {{"net.core.somaxconn", "65535", "128", "c"}})};
  auto j = nlohmann::json::parse(render_audit_json(r));
  EXPECT_EQ(j["schema"], "latency-doctor/audit/v1");
  EXPECT_EQ(j["host"]["sysctl.net.core.somaxconn"], 128);
  EXPECT_EQ(j["host"]["cgroup.cpu_quota_cpus"], 2);
  EXPECT_EQ(j["target"]["pid"], 4242);
  ASSERT_EQ(j["findings"].size(), 1u);
  // The same object the report renders.
  EXPECT_EQ(j["findings"][0], nlohmann::json::parse(ld::report::finding_to_json(r.findings[0]).dump()));
  EXPECT_EQ(j["findings"][0]["sysctl"][0]["current"], "128");
  EXPECT_EQ(j["sources"]["sysctl.vm.swappiness"], "/proc/sys/vm/swappiness");
  EXPECT_TRUE(j["unknown"].is_array());
  bool saw_btf = false;
  for (const auto& t : j["tracing"]) saw_btf = saw_btf || (t["name"] == "BTF" && t["available"] == false);
  EXPECT_TRUE(saw_btf);
}

TEST(AuditRender, TextHasEverySectionAndTheTarget) {
  AuditResult r;
  r.host = audit_host(kBad, {4242, ""});
  r.findings = {finding("somaxconn", "crit", {{"net.core.somaxconn", "65535", "128", "more memory"}})};
  std::string text = render_audit_text(r);
  for (const char* expected :
       {"latency-doctor audit of ", "kernel 5.10.0-bad, 8 CPUs",
        "target: pid 4242 (python3), cgroup /system.slice/llm.service (v2)", "findings: 1 crit, 0 warn, 0 info",
        "[crit] title of somaxconn", "sysctl net.core.somaxconn = 65535 (now 128) - more memory",
        "governor ondemand,powersave", "CPU quota 2 CPUs", "open files 1024 soft / 4096 hard", "irqbalance not running",
        "proxy_buffering on  (default, proxy_pass at /etc/nginx/conf.d/llm.conf:5)", "sysctls read",
        "tracing: what latency-doctor can trace here", "no   BTF"})
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
}

TEST(AuditRender, TextWithoutTargetSaysHowToGiveOne) {
  AuditResult r;
  r.host = audit_host(kBad, {});
  std::string text = render_audit_text(r);
  EXPECT_NE(text.find("target: none (add --pid PID or --cgroup PATH"), std::string::npos) << text;
  EXPECT_NE(text.find("findings: none"), std::string::npos) << text;
}
