// Every shipped rule (rules/*.toml) fires on its evidence fixture and stays silent on a clean
// report. Fixtures (tests/data/rules/RULE-ID.json) describe report parts, not facts: the facts
// come from report_facts(), so a rule that reads a name the attribution does not write fails.
//
//   {"rule": "...", "report": {outliers, repeat, typical_frame_samples, window, periodicity, ttft_ms, target,
//   client_join},
//    "host": {host facts}, "expect": {"severity", "quotes": [...], "sysctl": [{key, current}]},
//    "silent_with_host": {host facts under which the rule must not fire}}
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "model/stats.hpp"
#include "rules/engine.hpp"

using namespace ld::rules;
using ld::model::Report;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(LD_TEST_DATA_DIR) + "/rules";
const std::string kShipped = std::string(LD_TEST_DATA_DIR) + "/../../rules";

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  return json::parse(in, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
}

const RuleSet& shipped() {
  static const RuleSet set = [] {
    RuleSet s;
    load_rules_path(s, kShipped);
    return s;
  }();
  return set;
}

// A healthy 30 s trace of 40 streamed requests: no outliers, steady clocks, few connections.
Report clean_report() {
  Report r;
  r.target = {{4242}, "python3", "/usr/bin/python3.11", {}};
  r.duration_ms = 30000;
  r.attributed = true;
  std::vector<double> ttft, gaps;
  for (int i = 0; i < 40; ++i) {
    ld::model::RequestRow row;
    row.id = "r" + std::to_string(i);
    row.input_bytes = 200 + 60 * static_cast<uint64_t>(i);
    row.ttft_ms = 300 + (i % 5) * 12;
    row.tokens = 120;
    row.tpot_median_ms = 40;
    row.complete = true;
    ttft.push_back(row.ttft_ms);
    for (int t = 1; t < 120; ++t) gaps.push_back(38 + (t % 5));
    r.request_rows.push_back(row);
  }
  r.requests = r.request_rows.size();
  r.tokens = 40 * 120;
  r.gaps = gaps.size();
  r.ttft_ms = ld::model::describe(ttft);
  r.tpot_ms = ld::model::describe(gaps);
  for (const char* probe :
       {"sock", "sched", "perf", "memory", "disk", "gil", "futex", "tcp", "cgroup", "reclaim", "cpufreq"})
    r.probes.push_back({probe, ld::model::ProbeState::kAttached, "", 1000, 0});
  r.tcp_sends.token_sends = r.tokens;  // every token sent on a TCP socket with TCP_NODELAY
  r.tcp_sends.requests = r.requests;
  r.typical.windows = r.gaps;
  r.typical.total_ms = 40.0 * static_cast<double>(r.gaps);
  r.typical.causes = {{ld::model::Cause::kCompute, 38.0 * static_cast<double>(r.gaps), 0.95, json::object()},
                      {ld::model::Cause::kUnknown, 2.0 * static_cast<double>(r.gaps), 0.05, json::object()}};
  r.window_facts = {
      {"time_wait_max", 14},         {"listen_overflows", 0},      {"retransmits", 0},         {"connects", 40},
      {"connects_per_request", 1.0}, {"cgroup_throttled_ms", 0},   {"cgroup_nr_throttled", 0}, {"cpu_khz_min", 2900000},
      {"cpu_khz_max", 3000000},      {"cpu_freq_min_ratio", 0.97}, {"migrations_per_s", 15},   {"ioctl_blocked_ms", 0}};
  return r;
}

ld::model::Outlier outlier_from(const json& j, const Report& r) {
  ld::model::Outlier o;
  o.kind = ld::model::parse_window_kind(j.at("kind").get<std::string>()).value();
  o.request = j.at("request");
  o.duration_ms = j.at("duration_ms");
  o.baseline_ms = o.kind == ld::model::WindowKind::kTtft ? r.ttft_ms.p50 : r.tpot_ms.p50;
  for (const json& c : j.at("causes"))
    o.causes.push_back({ld::model::parse_cause(c.at("cause").get<std::string>()).value(), c.at("ms"),
                        c.at("ms").get<double>() / o.duration_ms, c.value("evidence", json::object())});
  if (j.contains("facts")) o.facts = j["facts"];  // e.g. own_contention_ms: the server as its own neighbour
  o.frame_samples = j.value("frame_samples", 0);  // the window's on-CPU samples with frames
  for (const json& f : j.value("frames", json::array())) {
    const auto samples = static_cast<uint64_t>(std::llround(f.at("share").get<double>() * o.frame_samples));
    o.frames.push_back(
        {f.at("python"), f.at("function"), f.at("where"), f.at("share"), f.at("typical_share"), samples});
  }
  return o;
}

// The clean report with the fixture's parts laid over it.
Report fixture_report(const json& parts) {
  Report r = clean_report();
  const json outliers = parts.value("outliers", json::array()), window = parts.value("window", json::object());
  // A fault recurs: "repeat" lays its outliers over the report that many times, as the slow
  // tokens of a run that saw it again (a finding above info needs 3 slow tokens).
  const int repeat = parts.value("repeat", 1);
  for (int i = 0; i < repeat; ++i)
    for (const json& o : outliers) r.outliers.push_back(outlier_from(o, r));
  for (const auto& [key, value] : window.items()) r.window_facts[key] = value;
  r.typical.frame_samples = parts.value("typical_frame_samples", 0);
  if (parts.contains("periodicity")) {
    const json& p = parts["periodicity"];
    r.periodicity = {true, p.at("period_s"), p.at("outliers"), p.value("coincides", "")};
  }
  if (parts.contains("ttft_ms")) {
    r.ttft_ms.p50 = parts["ttft_ms"].at("p50");
    r.ttft_ms.p90 = parts["ttft_ms"].at("p90");
  }
  if (parts.contains("target")) r.target.comm = parts["target"].at("comm");
  if (parts.contains("client_join")) {
    // A client's token log joined to the server's requests: the medians the client.* facts read.
    const json& c = parts["client_join"];
    auto& j = r.client_join;
    j.present = true;
    j.source = "jsonl:client.jsonl";
    j.client_requests = c.at("requests");
    j.server_requests = j.matched = c.at("matched");
    j.client_ttft_ms.p50 = c.at("client_ttft_p50");
    j.server_ttft_ms.p50 = c.at("server_ttft_p50");
    j.before_server_ms.p50 = c.at("before_server_p50");
    j.after_server_ms.p50 = c.at("after_server_p50");
    j.outside_ttft_ms.p50 = j.client_ttft_ms.p50 - j.server_ttft_ms.p50;
    j.outside_ttft_share = c.at("outside_share");
    j.gaps = c.at("gaps");
    j.bunched_tokens = c.at("bunched_tokens");
    j.bunched_share = static_cast<double>(j.bunched_tokens) / static_cast<double>(j.gaps);
    j.lag_ms.p50 = c.at("lag_p50");
    j.lag_ms.max = c.at("lag_max");
    j.client_gap_ms.p50 = j.server_gap_ms.p50 = 40;
    if (c.contains("held_tokens")) {  // lag split by whether Nagle held the token's send
      j.held_lag_ms.count = c["held_tokens"];
      j.held_lag_ms.p50 = c.at("held_lag_p50");
      j.held_lag_ms.max = c.at("held_lag_max");
      j.other_lag_ms.count = j.gaps + j.matched - j.held_lag_ms.count;
      j.other_lag_ms.p50 = c.at("other_lag_p50");
    }
  }
  if (parts.contains("tcp_sends")) {
    const json& t = parts["tcp_sends"];
    r.tcp_sends.nagle = t.at("nagle");
    r.tcp_sends.held = t.at("held");
    r.tcp_sends.nagle_requests = t.at("nagle_requests");
  }
  return r;
}

// Debian's defaults and a performance governor: what a host looks like before tuning.
FactSet clean_host() { return facts_from_json(read_json(kFixtures + "/clean-host.json")); }

FactSet host_with(const json& overrides) {
  FactSet host = clean_host();
  host.merge(facts_from_json(overrides));
  return host;
}

std::vector<ld::model::Finding> findings_for(const Report& report, const FactSet& host) {
  return evaluate(shipped(), facts_for_report(report, host), Scope::kReport);
}

const ld::model::Finding* find(const std::vector<ld::model::Finding>& findings, const std::string& rule) {
  auto it = std::find_if(findings.begin(), findings.end(), [&](const auto& f) { return f.rule == rule; });
  return it == findings.end() ? nullptr : &*it;
}

// An unknown value renders as "?"; a question mark right after a word is the text's own.
bool has_unknown_mark(const std::string& text) {
  for (size_t at = text.find('?'); at != std::string::npos; at = text.find('?', at + 1))
    if (at == 0 || !std::isalpha(static_cast<unsigned char>(text[at - 1]))) return true;
  return false;
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kFixtures))
    if (entry.path().extension() == ".json" && entry.path().stem() != "clean-host") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST(RulesShipped, LoadWithoutProblems) {
  for (const auto& p : shipped().errors) ADD_FAILURE() << p.to_string();
  for (const auto& p : shipped().warnings) ADD_FAILURE() << p.to_string();
  EXPECT_GE(shipped().rules.size(), 15u);
  for (const Rule& r : shipped().rules) EXPECT_FALSE(r.verify.empty()) << r.id;
}

// Host rules (rules/host_*.toml) are tested on prepared host trees: audit_rules_test.cpp.
TEST(RulesShipped, EveryRuleHasAFixture) {
  for (const Rule& r : shipped().rules) {
    if (r.scope == Scope::kReport) {
      EXPECT_TRUE(fs::exists(kFixtures + "/" + r.id + ".json")) << "no fixture for shipped rule " << r.id;
    }
  }
}

TEST(RulesShipped, SilentOnACleanReport) {
  const auto findings = findings_for(clean_report(), clean_host());
  for (const auto& f : findings) ADD_FAILURE() << f.rule << " fired on the clean report: " << f.evidence;
}

TEST(RulesShipped, EachFiresOnItsEvidenceAndQuotesIt) {
  const auto files = fixture_files();
  const auto report_rules = std::count_if(shipped().rules.begin(), shipped().rules.end(),
                                          [](const Rule& r) { return r.scope == Scope::kReport; });
  EXPECT_GE(files.size(), static_cast<size_t>(report_rules));
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const json fixture = read_json(file);
    const std::string id = fixture.at("rule");
    ASSERT_NE(shipped().find(id), nullptr) << "fixture for an unknown rule";
    const Report report = fixture_report(fixture.value("report", json::object()));
    const auto findings = findings_for(report, host_with(fixture.value("host", json::object())));
    const auto* f = find(findings, id);
    ASSERT_NE(f, nullptr) << id << " did not fire";
    const json& expect = fixture.at("expect");
    EXPECT_EQ(f->severity, expect.at("severity").get<std::string>()) << id;
    EXPECT_EQ(f->cause, shipped().find(id)->cause);
    for (const std::string quote : expect.at("quotes"))
      EXPECT_NE(f->evidence.find(quote), std::string::npos)
          << id << ": evidence lacks \"" << quote << "\": " << f->evidence;
    for (const std::string* text : {&f->title, &f->evidence, &f->remedy, &f->verify})
      EXPECT_FALSE(has_unknown_mark(*text)) << id << ": a fact is missing in \"" << *text << "\"";
    EXPECT_FALSE(f->remedy.empty());
    const json want_sysctl = expect.value("sysctl", json::array());
    ASSERT_EQ(f->sysctl.size(), want_sysctl.size()) << id;
    for (size_t i = 0; i < want_sysctl.size(); ++i) {
      EXPECT_EQ(f->sysctl[i].key, want_sysctl[i].at("key").get<std::string>());
      EXPECT_EQ(f->sysctl[i].current, want_sysctl[i].at("current").get<std::string>());
    }
    if (fixture.contains("silent_with_host")) {
      EXPECT_EQ(find(findings_for(report, host_with(fixture["silent_with_host"])), id), nullptr)
          << id << " fired although the host already has the remedy";
    }
  }
}

// The same fixtures seen once instead of "repeat" times: a rule that rests on slow tokens keeps
// its finding at info, says what it fell short of, and keeps the severity it would have had.
TEST(RulesShipped, EachStaysInfoOnTooFewSlowTokens) {
  size_t checked = 0;
  for (const std::string& file : fixture_files()) {
    SCOPED_TRACE(file);
    json fixture = read_json(file);
    const Rule* rule = shipped().find(fixture.at("rule").get<std::string>());
    ASSERT_NE(rule, nullptr);
    const bool rests_on_slow_tokens =
        !rule->support.empty() && std::all_of(rule->support.begin(), rule->support.end(), [](const SupportSet& s) {
          return std::any_of(s.begin(), s.end(),
                             [](const SupportCount& c) { return c.unit == SupportUnit::kSlowTokens; });
        });
    json& parts = fixture.at("report");
    if (!rests_on_slow_tokens || parts.value("repeat", 1) < 2) continue;
    parts.erase("repeat");
    const auto findings = findings_for(fixture_report(parts), host_with(fixture.value("host", json::object())));
    const auto* f = find(findings, rule->id);
    ASSERT_NE(f, nullptr) << rule->id << " did not fire";
    EXPECT_EQ(f->severity, "info") << rule->id;
    EXPECT_EQ(f->capped_from, fixture.at("expect").at("severity").get<std::string>()) << rule->id;
    EXPECT_NE(f->evidence.find("Too little evidence"), std::string::npos) << f->evidence;
    ++checked;
  }
  EXPECT_GE(checked, 15u);  // most report rules rest on slow tokens
}

// A fault's finding names it: on each fixture, the fixture's rule is the most severe finding
// of its cause, and no crit finding blames another cause.
TEST(RulesShipped, FixturesDoNotBlameOtherCauses) {
  for (const std::string& file : fixture_files()) {
    const json fixture = read_json(file);
    const std::string id = fixture.at("rule");
    const auto findings = findings_for(fixture_report(fixture.value("report", json::object())),
                                       host_with(fixture.value("host", json::object())));
    for (const auto& f : findings) {
      if (f.cause != shipped().find(id)->cause && f.rule != "unexplained-outliers" && f.rule != "periodic-spikes") {
        EXPECT_EQ(f.severity, "info") << file << ": " << f.rule << " also fired at " << f.severity;
      }
    }
  }
}

// A cause second in every slow token gets its finding though it never takes a fifth of one: a
// logger that builds a 48 MiB record (45 ms of page faults) then writes and fsyncs it (190 ms).
// The same share in one slow token of twelve does not.
TEST(RulesShipped, ACauseThatRecursInEverySlowTokenIsAFinding) {
  auto slow_token = [](double kv_ms) {
    return json{{"kind", "tpot"},
                {"request", "r1"},
                {"duration_ms", 240},
                {"causes",
                 {{{"cause", "disk_io"}, {"ms", 240 - kv_ms}, {"evidence", {{"syscall", "write"}}}},
                  {{"cause", "kv_alloc"}, {"ms", kv_ms}, {"evidence", {{"faults", 11000}}}}}}};
  };
  json every = json::array(), once = json::array();
  for (int i = 0; i < 12; ++i) {
    every.push_back(slow_token(45));
    once.push_back(slow_token(i == 0 ? 45 : 2));
  }
  const auto recurring = findings_for(fixture_report({{"outliers", every}}), clean_host());
  const auto* f = find(recurring, "kv-alloc-on-request");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, "warn") << f->evidence;
  EXPECT_NE(find(recurring, "disk-io-on-token-path"), nullptr);
  EXPECT_EQ(find(findings_for(fixture_report({{"outliers", once}}), clean_host()), "kv-alloc-on-request"), nullptr);
}

// Two held sends are not a pattern a second run would repeat: the Nagle finding stays info and
// says what it lacks; three in three requests warn.
TEST(RulesShipped, NagleHoldsWarnOnlyOnThreeHeldSendsInThreeRequests) {
  Report r = clean_report();
  r.tcp_sends.nagle = r.tcp_sends.token_sends;
  r.tcp_sends.nagle_requests = r.requests;
  r.tcp_sends.held = 2;
  const auto thin_findings = findings_for(r, clean_host());
  const auto* thin = find(thin_findings, "nagle-holds-token-writes");
  ASSERT_NE(thin, nullptr);
  EXPECT_EQ(thin->severity, "info");
  EXPECT_NE(thin->evidence.find("Too little evidence"), std::string::npos) << thin->evidence;
  EXPECT_EQ(find(thin_findings, "nagle-on-token-sockets"), nullptr);
  r.tcp_sends.held = 3;
  const auto findings = findings_for(r, clean_host());
  const auto* enough = find(findings, "nagle-holds-token-writes");
  ASSERT_NE(enough, nullptr);
  EXPECT_EQ(enough->severity, "warn") << enough->evidence;
}
