// Rule files: loading with file:line problems, layering, evaluation into findings, and the
// `rules` subcommand.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "rules/engine.hpp"
#include "trace/trace_file.hpp"

using namespace ld::rules;
namespace fs = std::filesystem;

namespace {

// A complete rule; tests replace one line to break it.
const char* const kDiskRule = R"(# a comment
[[rule]]
id = "slow-fsync"
cause = "disk_io"
severity = "warn"
title = "fsync on the token path"
condition = "cause.disk_io.max_ms >= 20ms"
crit_if = "cause.disk_io.max_ms >= 300ms"
evidence = "{cause.disk_io.syscall} took {cause.disk_io.max_ms:.0f} ms"
remedy = "log asynchronously"
verify = "strace -p {target.pid}"
support = { slow_tokens = "cause.disk_io.slow_tokens" }
)";

RuleSet load(const std::string& text, const std::string& file = "test.toml") {
  RuleSet set;
  load_rules_text(set, text, file);
  return set;
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The only error of a set, as "file:line: message".
std::string only_error(const RuleSet& set) {
  EXPECT_EQ(set.errors.size(), 1u);
  return set.errors.empty() ? "" : set.errors.front().to_string();
}

FactSet disk_facts(double max_ms) {
  FactSet f;
  f.set("cause.disk_io.max_ms", max_ms);
  f.set("cause.disk_io.ms", max_ms);
  f.set("cause.disk_io.syscall", "fsync");
  f.set("cause.disk_io.slow_tokens", 3);  // the minimum for a finding above info
  f.set("target.pid", 4242);
  return f;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ld-rules-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST(RulesLoad, ReadsEveryField) {
  const RuleSet set = load(std::string(kDiskRule) + R"(scope = "report"
sysctl_only = true
[[rule.sysctl]]
key = "vm.dirty_ratio"
value = 10
accept = "at_most"
caveat = "more frequent writeback"
)");
  ASSERT_TRUE(set.errors.empty()) << only_error(set);
  ASSERT_EQ(set.rules.size(), 1u);
  const Rule& r = set.rules.front();
  EXPECT_EQ(r.id, "slow-fsync");
  EXPECT_EQ(r.cause, ld::model::Cause::kDiskIo);
  EXPECT_EQ(r.severity, "warn");
  EXPECT_EQ(r.scope, Scope::kReport);
  EXPECT_TRUE(r.sysctl_only);
  EXPECT_TRUE(r.crit_if.has_value());
  EXPECT_FALSE(r.warn_if.has_value());
  EXPECT_EQ(r.file, "test.toml");
  EXPECT_EQ(r.line, 2u);
  ASSERT_EQ(r.sysctl.size(), 1u);
  EXPECT_EQ(r.sysctl[0].key, "vm.dirty_ratio");
  EXPECT_EQ(r.sysctl[0].value, "10");
  EXPECT_EQ(r.sysctl[0].accept, Accept::kAtMost);
  EXPECT_EQ(r.sysctl[0].caveat, "more frequent writeback");
}

TEST(RulesLoad, ProblemsNameFileAndLine) {
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {"severity = \"warn\"", "severity = \"urgent\"",
       "t.toml:5: rule slow-fsync: severity must be info, warn or crit"},
      {"cause = \"disk_io\"", "cause = \"disk\"", "t.toml:4: rule slow-fsync: cause 'disk' is not in the vocabulary"},
      {"condition = \"cause.disk_io.max_ms >= 20ms\"", "condition = \"cause.disk_io.max_ms >= 20mss\"",
       "t.toml:7: rule slow-fsync: condition: unknown unit 'mss'"},
      {"remedy = \"log asynchronously\"", "remedy = \"log {asynchronously\"",
       "t.toml:10: rule slow-fsync: remedy: '{' is not closed"},
      {"verify = ", "verfy = ", "t.toml:11: rule slow-fsync: unknown key 'verfy' in a rule"},
      {"title = \"fsync on the token path\"\n", "", "t.toml:2: rule slow-fsync: rule has no 'title'"},
      {"severity = \"warn\"", "severity = 2", "t.toml:5: rule slow-fsync: 'severity' must be a string"},
      {"id = \"slow-fsync\"", "id = \"Slow Fsync\"", "t.toml:2: rule Slow Fsync: id 'Slow Fsync'"},
      {"title = \"fsync on the token path\"", "title = \"fsync on the token path", "t.toml:6: TOML:"},
  };
  for (const Case& c : cases) {
    const RuleSet set = load(replace(kDiskRule, c.from, c.to), "t.toml");
    EXPECT_TRUE(set.rules.empty()) << c.expected;
    EXPECT_EQ(only_error(set).rfind(c.expected, 0), 0u) << "got: " << only_error(set) << "\nwanted: " << c.expected;
  }
}

TEST(RulesLoad, ExpressionErrorsInMultiLineStringsPointAtTheirLine) {
  const std::string text =
      replace(kDiskRule, "condition = \"cause.disk_io.max_ms >= 20ms\"",
              "condition = \"\"\"\ncause.disk_io.max_ms >= 20ms\nand cause.disk_io.calls >> 3\"\"\"");
  const RuleSet set = load(text, "m.toml");
  EXPECT_EQ(only_error(set).rfind("m.toml:9: rule slow-fsync: condition: expected a value", 0), 0u) << only_error(set);
}

TEST(RulesLoad, ABrokenRuleDoesNotTakeTheOthersWithIt) {
  const std::string broken = replace(replace(kDiskRule, "slow-fsync", "broken"), "severity = \"warn\"", "");
  const RuleSet set = load(std::string(kDiskRule) + broken);
  EXPECT_EQ(set.rules.size(), 1u);
  EXPECT_EQ(only_error(set).rfind("test.toml:14: rule broken: rule has no 'severity'", 0), 0u) << only_error(set);
}

TEST(RulesLoad, FileShapeProblems) {
  EXPECT_EQ(only_error(load("rule = 3\n")), "test.toml:1: 'rule' must be an array of tables: write [[rule]]");
  EXPECT_EQ(only_error(load(std::string("[other]\nx = 1\n") + kDiskRule))
                .rfind("test.toml:1: unknown top-level key 'other'", 0),
            0u);
  const RuleSet empty = load("# nothing here\n");
  EXPECT_TRUE(empty.errors.empty());
  ASSERT_EQ(empty.warnings.size(), 1u);
  EXPECT_EQ(empty.warnings[0].to_string(), "test.toml: no [[rule]] in this file");
  const RuleSet sysctl = load(std::string(kDiskRule) + "[[rule.sysctl]]\nkey = \"vm swappiness\"\nvalue = 1\n");
  EXPECT_EQ(only_error(sysctl).rfind("test.toml:14: rule slow-fsync: sysctl key 'vm swappiness'", 0), 0u)
      << only_error(sysctl);
}

TEST(RulesLoad, WarnsAboutFactsThatNoProducerWrites) {
  const RuleSet set =
      load(replace(kDiskRule, "cause.disk_io.max_ms >= 20ms", "caus.disk_io.max_ms >= 20ms or cause.diskio.ms > 0"));
  ASSERT_EQ(set.rules.size(), 1u);  // still loaded: a warning, not an error
  ASSERT_EQ(set.warnings.size(), 2u);
  EXPECT_NE(set.warnings[0].message.find("'caus.disk_io.max_ms' is not in any known namespace"), std::string::npos);
  EXPECT_NE(set.warnings[1].message.find("'diskio' is not a cause id"), std::string::npos);
  const RuleSet host = load(replace(kDiskRule, "severity = \"warn\"", "severity = \"warn\"\nscope = \"host\""));
  ASSERT_FALSE(host.warnings.empty());
  EXPECT_NE(host.warnings[0].message.find("is a report fact: a host rule never sees it"), std::string::npos);
}

TEST(RulesLoad, LaterLayersOverrideAndDisable) {
  RuleSet set;
  ++set.layer;
  load_rules_text(set, kDiskRule, "shipped.toml");
  load_rules_text(set, replace(kDiskRule, "slow-fsync", "other"), "shipped2.toml");
  load_rules_text(set, kDiskRule, "dup.toml");  // same id, same layer: an error
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_EQ(set.errors[0].to_string(), "dup.toml:2: rule slow-fsync is already defined at shipped.toml:2 (skipped)");
  ++set.layer;
  load_rules_text(set, replace(kDiskRule, "severity = \"warn\"", "severity = \"info\""), "mine.toml");
  load_rules_text(set, "[[rule]]\nid = \"other\"\nenabled = false\n", "off.toml");
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_EQ(set.find("slow-fsync")->severity, "info");
  EXPECT_EQ(set.find("slow-fsync")->file, "mine.toml");
  EXPECT_FALSE(set.find("other")->enabled);
  const auto findings = evaluate(set, disk_facts(50), Scope::kReport);
  ASSERT_EQ(findings.size(), 1u);  // "other" would fire on the same facts
  EXPECT_EQ(findings[0].rule, "slow-fsync");
}

TEST(RulesEvaluate, FillsTheFindingAndRaisesSeverity) {
  const RuleSet set = load(kDiskRule);
  auto findings = evaluate(set, disk_facts(50), Scope::kReport);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "slow-fsync");
  EXPECT_EQ(findings[0].cause, ld::model::Cause::kDiskIo);
  EXPECT_EQ(findings[0].severity, "warn");
  EXPECT_EQ(findings[0].evidence, "fsync took 50 ms");
  EXPECT_EQ(findings[0].verify, "strace -p 4242");
  EXPECT_EQ(evaluate(set, disk_facts(400), Scope::kReport).at(0).severity, "crit");
  EXPECT_TRUE(evaluate(set, disk_facts(10), Scope::kReport).empty());
  EXPECT_TRUE(evaluate(set, FactSet{}, Scope::kReport).empty());
  EXPECT_TRUE(evaluate(set, disk_facts(50), Scope::kHost).empty());  // a report rule
}

TEST(RulesEvaluate, AFindingWithTooLittleEvidenceStaysInfo) {
  const RuleSet set = load(kDiskRule);
  FactSet two_tokens = disk_facts(400);  // crit by its numbers, but from two slow tokens
  two_tokens.set("cause.disk_io.slow_tokens", 2);
  const auto thin = evaluate(set, two_tokens, Scope::kReport);
  ASSERT_EQ(thin.size(), 1u);
  EXPECT_EQ(thin[0].severity, "info");
  EXPECT_EQ(thin[0].capped_from, "crit");
  EXPECT_EQ(thin[0].evidence,
            "fsync took 400 ms Too little evidence for a critical finding: 2 slow tokens (3 needed); info until a "
            "longer run shows it again.");
  ASSERT_EQ(thin[0].evidence_size.size(), 1u);
  EXPECT_EQ(thin[0].evidence_size[0].unit, "slow_tokens");
  EXPECT_EQ(thin[0].evidence_size[0].count, 2);
  EXPECT_EQ(thin[0].evidence_size[0].minimum, 3);
  two_tokens.set("cause.disk_io.slow_tokens", 1);
  EXPECT_NE(evaluate(set, two_tokens, Scope::kReport).at(0).evidence.find("1 slow token (3 needed)"),
            std::string::npos);  // singular
  // Enough evidence: the rule's own severity, and the size still stated.
  const auto enough = evaluate(set, disk_facts(400), Scope::kReport);
  EXPECT_EQ(enough.at(0).severity, "crit");
  EXPECT_TRUE(enough.at(0).capped_from.empty());
  EXPECT_EQ(enough.at(0).evidence_size.at(0).count, 3);
}

TEST(RulesEvaluate, AnyOneSupportSetSuffices) {
  const RuleSet set =
      load(replace(kDiskRule, "support = { slow_tokens = \"cause.disk_io.slow_tokens\" }",
                   "support = [{ slow_tokens = \"cause.disk_io.slow_tokens\" },\n"
                   "           { samples = \"cause.disk_io.samples\", requests = \"cause.disk_io.requests\" }]"));
  ASSERT_TRUE(set.errors.empty()) << only_error(set);
  FactSet f = disk_facts(50);
  f.set("cause.disk_io.slow_tokens", 1);
  f.set("cause.disk_io.samples", 40);
  f.set("cause.disk_io.requests", 2);  // the second set falls short on requests
  EXPECT_EQ(evaluate(set, f, Scope::kReport).at(0).severity, "info");
  f.set("cause.disk_io.requests", 3);
  EXPECT_EQ(evaluate(set, f, Scope::kReport).at(0).severity, "warn");
  EXPECT_EQ(only_error(load(replace(kDiskRule, "slow_tokens =", "tokens =")))
                .rfind("test.toml:12: rule slow-fsync: support: unknown unit 'tokens'", 0),
            0u);
}

TEST(RulesEvaluate, SysctlLinesShowTheCurrentValueAndDropWhatMatches) {
  const std::string rule = std::string(kDiskRule) + R"(
[[rule.sysctl]]
key = "net.core.somaxconn"
value = 65535
accept = "at_least"
[[rule.sysctl]]
key = "net.ipv4.ip_local_port_range"
value = "1024 65535"
[[rule.sysctl]]
key = "vm.swappiness"
value = 1
accept = "at_most"
)";
  const RuleSet set = load(rule);
  ASSERT_TRUE(set.errors.empty()) << only_error(set);
  FactSet facts = disk_facts(50);
  facts.set("sysctl.net.core.somaxconn", 4096);
  facts.set("sysctl.net.ipv4.ip_local_port_range", "1024\t65535");  // same words
  auto lines = evaluate(set, facts, Scope::kReport).at(0).sysctl;
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].key, "net.core.somaxconn");
  EXPECT_EQ(lines[0].value, "65535");
  EXPECT_EQ(lines[0].current, "4096");
  EXPECT_EQ(lines[1].key, "vm.swappiness");
  EXPECT_EQ(lines[1].current, "");  // unknown: kept

  facts.set("sysctl.net.core.somaxconn", 100000);  // already above the minimum
  facts.set("sysctl.vm.swappiness", 0);
  EXPECT_TRUE(evaluate(set, facts, Scope::kReport).at(0).sysctl.empty());  // the finding stays

  const RuleSet only = load(replace(rule, "severity = \"warn\"", "severity = \"warn\"\nsysctl_only = true"));
  EXPECT_TRUE(evaluate(only, facts, Scope::kReport).empty());  // its only point was the sysctls
  facts.set("sysctl.vm.swappiness", 30);
  EXPECT_EQ(evaluate(only, facts, Scope::kReport).size(), 1u);
}

TEST(RulesEvaluate, HostRulesSkipWhenTheSettingAlreadyMatches) {
  const RuleSet set = load(R"toml([[rule]]
id = "somaxconn"
cause = "time_wait"
severity = "info"
scope = "host"
title = "somaxconn is low"
condition = "exists(sysctl.net.core.somaxconn)"
evidence = "net.core.somaxconn is {sysctl.net.core.somaxconn}"
remedy = "raise it"
verify = "sysctl net.core.somaxconn"
[[rule.sysctl]]
key = "net.core.somaxconn"
value = 65535
)toml");
  ASSERT_TRUE(set.errors.empty()) << only_error(set);
  FactSet host;
  host.set("sysctl.net.core.somaxconn", 4096);
  ASSERT_EQ(evaluate(set, host, Scope::kHost).size(), 1u);
  EXPECT_TRUE(evaluate(set, host, Scope::kReport).empty());
  host.set("sysctl.net.core.somaxconn", 65535);
  EXPECT_TRUE(evaluate(set, host, Scope::kHost).empty());  // host rules are sysctl_only by default
}

TEST(RulesEvaluate, SortsBySeverityThenByTheCausesTime) {
  RuleSet set;
  for (const std::string cause : {"gil", "disk_io", "network"}) {
    std::string text = replace(kDiskRule, "slow-fsync", "r-" + cause);
    text = replace(text, "\"disk_io\"", "\"" + cause + "\"");
    text = replace(text, "cause.disk_io.max_ms >= 20ms", "cause." + cause + ".ms > 0");
    text = replace(text, "cause.disk_io.max_ms >= 300ms", "cause." + cause + ".max_ms >= 300ms");
    load_rules_text(set, text, cause + ".toml");
  }
  ASSERT_TRUE(set.errors.empty()) << only_error(set);
  FactSet facts = disk_facts(400);   // disk_io: crit
  facts.set("cause.gil.ms", 800.0);  // more time than disk_io, but only warn
  facts.set("cause.gil.max_ms", 100.0);
  facts.set("cause.network.ms", 120.0);
  facts.set("cause.network.max_ms", 100.0);
  std::vector<std::string> order;
  for (const auto& f : evaluate(set, facts, Scope::kReport)) order.push_back(f.rule + ":" + f.severity);
  EXPECT_EQ(order, (std::vector<std::string>{"r-disk_io:crit", "r-gil:warn", "r-network:warn"}));
}

TEST(RulesFacts, FromJsonFlattensObjects) {
  const auto facts = facts_from_json(nlohmann::json::parse(R"({
    "sysctl.net.core.somaxconn": 4096,
    "cpu": {"governor": "powersave", "online": 8},
    "mem": {"thp": {"enabled": "madvise"}},
    "nginx.found": true,
    "ignored": [1, 2], "nothing": null
  })"));
  EXPECT_EQ(std::get<double>(*facts.get("sysctl.net.core.somaxconn")), 4096);
  EXPECT_EQ(std::get<std::string>(*facts.get("cpu.governor")), "powersave");
  EXPECT_EQ(std::get<std::string>(*facts.get("mem.thp.enabled")), "madvise");
  EXPECT_TRUE(std::get<bool>(*facts.get("nginx.found")));
  EXPECT_FALSE(facts.has("ignored"));
  EXPECT_FALSE(facts.has("nothing"));
  EXPECT_TRUE(facts_from_json(nlohmann::json::array({1})).all().empty());
}

TEST(RulesApply, ReportGetsFindingsAndLoadProblemsAsWarnings) {
  RuleSet set = load(kDiskRule);
  load_rules_text(set, "[[rule]]\nid = \"x\"\n", "broken.toml");
  ld::model::Report report;
  report.target.pids = {31337};
  report.duration_ms = 1000;
  ld::model::Outlier o;
  o.kind = ld::model::WindowKind::kTpot;
  o.request = "r1";
  o.duration_ms = 200;
  o.causes.push_back({ld::model::Cause::kDiskIo, 180, 0.9, {{"syscall", "fdatasync"}}});
  for (int i = 0; i < 3; ++i) report.outliers.push_back(o);  // three slow tokens: enough for a warning
  report.host = {{"facts", {{"sysctl.vm.swappiness", 60}}}};
  apply_rules(report, set, host_facts_of(report));
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].evidence, "fdatasync took 180 ms");
  EXPECT_EQ(report.findings[0].verify, "strace -p 31337");
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(report.warnings[0], "rules: broken.toml:1: rule x: rule has no 'cause' (rule skipped)");
  EXPECT_EQ(std::get<double>(*facts_for_report(report, host_facts_of(report)).get("sysctl.vm.swappiness")), 60);
}

TEST(RulesLoad, PathsAreDirectoriesOrFiles) {
  TempDir dir;
  dir.write("b.toml", kDiskRule);
  dir.write("a.toml", replace(kDiskRule, "slow-fsync", "first"));
  dir.write("notes.txt", "not a rule file");
  RuleSet set;
  load_rules_path(set, dir.path());
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_EQ(set.rules[0].id, "first");  // files load by name
  EXPECT_EQ(set.layer, 1);
  load_rules_path(set, dir.path() + "/b.toml");  // a second layer: overrides, no duplicate error
  EXPECT_TRUE(set.errors.empty());
  EXPECT_EQ(set.rules.size(), 2u);
  EXPECT_THROW(load_rules_path(set, dir.path() + "/missing"), std::runtime_error);
  EXPECT_THROW(load_rules({dir.path() + "/missing"}), std::runtime_error);
}

// ---- the `rules` subcommand, run as a child (the binary is built beside this test)
namespace {

struct CliRun {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), {}};
}

CliRun run_cli(const std::vector<std::string>& args) {
  const std::string exe = (fs::read_symlink("/proc/self/exe").parent_path() / "latency-doctor").string();
  TempDir tmp;
  std::string cmd = exe;
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + tmp.path() + "/out 2>" + tmp.path() + "/err";
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(tmp.path() + "/out");
  r.err = slurp(tmp.path() + "/err");
  return r;
}

}  // namespace

TEST(RulesCli, CheckPassesOnTheShippedRules) {
  const CliRun r = run_cli({"rules", "check"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no warnings either
  EXPECT_NE(r.out.find("rules OK (0 warnings)"), std::string::npos) << r.out;
}

TEST(RulesCli, CheckReportsFileAndLineAndFails) {
  TempDir dir;
  const std::string broken = dir.write("broken.toml", replace(kDiskRule, "20ms", "20 parsecs"));
  dir.write("bad-toml.toml", "[[rule]\n");
  const CliRun r = run_cli({"rules", "check", "--rules", dir.path()});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(dir.path() + "/bad-toml.toml:1: error: TOML:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(broken + ":7: error: rule slow-fsync: condition:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 errors"), std::string::npos) << r.err;
  const CliRun missing = run_cli({"rules", "check", "--rules", dir.path() + "/nope"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nope is not a readable directory or file"), std::string::npos) << missing.err;
}

TEST(RulesCli, ListShowsShippedAndAddedRules) {
  TempDir dir;
  dir.write("mine.toml", replace(kDiskRule, "slow-fsync", "zz-my-rule"));
  const CliRun r = run_cli({"rules", "list", "--rules", dir.path()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("zz-my-rule"), std::string::npos);
  EXPECT_NE(r.out.find("disk-io-on-token-path"), std::string::npos);  // a shipped one
  EXPECT_EQ(run_cli({"rules"}).status, 1);                            // list or check is required
}

TEST(RulesCli, ReportAppliesRulesFromRulesDirs) {
  TempDir dir;
  const std::string trace = dir.path() + "/empty.ldtrace";
  {
    ld::trace::TraceWriter writer(trace, {{"target", {{"pids", {4242}}, {"comm", "python3"}}}});
    writer.finish({});
  }
  const std::string always =
      replace(replace(kDiskRule, "slow-fsync", "always-here"), "cause.disk_io.max_ms >= 20ms", "summary.requests >= 0");
  const std::string rules = dir.write("always.toml", always);
  const CliRun r = run_cli({"report", trace, "--format", "json", "--rules", rules});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["findings"].size(), 1u) << r.out;
  EXPECT_EQ(report["findings"][0]["rule"], "always-here");
  // An empty trace has no slow token: the warning stays info, and the JSON says why.
  EXPECT_EQ(report["findings"][0]["severity"], "info");
  EXPECT_EQ(report["findings"][0]["capped_from"], "warn");
  EXPECT_EQ(report["findings"][0]["evidence_size"], nlohmann::json({{"slow_tokens", 0}}));
  EXPECT_EQ(run_cli({"report", trace, "--rules", dir.path() + "/nope"}).status, 2);
  // A broken rule file is a warning in a report, not a failure.
  dir.write("broken.toml", "[[rule]]\nid = 'x'\n");
  const CliRun warned = run_cli({"report", trace, "--rules", dir.path()});
  EXPECT_EQ(warned.status, 0) << warned.err;
  EXPECT_NE(warned.err.find("warning: rules: " + dir.path() + "/broken.toml:1: rule x: rule has no 'cause'"),
            std::string::npos)
      << warned.err;
}
