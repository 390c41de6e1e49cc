#include "rules/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "rules/report_facts.hpp"

namespace ld::rules {
namespace {

int severity_rank(const std::string& severity) {
  if (severity == "crit") return 0;
  if (severity == "warn") return 1;
  return 2;
}

std::optional<double> number_in(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double n = std::strtod(begin, &end);
  while (*end == ' ' || *end == '\t' || *end == '\n') ++end;
  if (end == begin || *end != '\0' || !std::isfinite(n)) return std::nullopt;
  return n;
}

// "1024\t65535" and "1024 65535" are the same sysctl value.
std::string normalise_spaces(const std::string& text) {
  std::istringstream words(text);
  std::string word, out;
  while (words >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

std::string fact_text(const FactValue& value) {
  if (const double* n = std::get_if<double>(&value))
    return std::fabs(*n - std::round(*n)) < 1e-9 && std::fabs(*n) < 1e15 ? fmt::format("{:.0f}", *n)
                                                                         : fmt::format("{}", *n);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "1" : "0";
  return std::get<std::string>(value);
}

bool satisfied(const SysctlSpec& spec, const std::string& current) {
  const auto have = number_in(current), want = number_in(spec.value);
  if (spec.accept != Accept::kExact) {
    if (!have || !want) return false;
    return spec.accept == Accept::kAtLeast ? *have >= *want : *have <= *want;
  }
  if (have && want) return *have == *want;
  return normalise_spaces(current) == normalise_spaces(spec.value);
}

std::string severity_of(const Rule& rule, const FactSet& facts) {
  std::string severity = rule.severity;
  auto raise = [&](const std::optional<Expr>& when, const char* level) {
    if (when && when->holds(facts) && severity_rank(level) < severity_rank(severity)) severity = level;
  };
  raise(rule.warn_if, "warn");
  raise(rule.crit_if, "crit");
  return severity;
}

// nullopt: the rule's only point is sysctls the host already has.
std::optional<std::vector<model::SysctlRec>> sysctl_lines(const Rule& rule, const FactSet& facts) {
  std::vector<model::SysctlRec> lines;
  for (const SysctlSpec& spec : rule.sysctl) {
    const FactValue* current = facts.get("sysctl." + spec.key);
    const std::string now = current ? fact_text(*current) : "";
    if (current && satisfied(spec, now)) continue;
    lines.push_back({spec.key, spec.value, now, spec.caveat});
  }
  if (rule.sysctl_only && !rule.sysctl.empty() && lines.empty()) return std::nullopt;
  return lines;
}

// What the finding rests on: the counts of the first of the rule's support sets that reaches
// every minimum, or of its first set when none does.
struct Support {
  bool enough = true;
  std::vector<model::EvidenceCount> counts;
};

Support support_of(const Rule& rule, const FactSet& facts) {
  Support first;
  for (size_t i = 0; i < rule.support.size(); ++i) {
    Support s;
    for (const SupportCount& c : rule.support[i]) {
      const Value v = c.count.evaluate(facts);
      const double n = v.kind == Value::Kind::kNumber && std::isfinite(v.number) ? v.number : 0;
      const SupportUnitInfo& unit = support_unit_info(c.unit);
      s.counts.push_back({std::string(unit.name), n, unit.minimum});
      s.enough = s.enough && n >= unit.minimum;
    }
    if (s.enough) return s;
    if (i == 0) first = std::move(s);
  }
  return first;  // enough only when the rule states no support
}

// "2 slow tokens (3 needed)": the counts short of their minimum.
std::string shortfall(const std::vector<model::EvidenceCount>& counts) {
  std::string out;
  for (const model::EvidenceCount& c : counts) {
    if (c.count >= c.minimum) continue;
    const auto* unit = std::find_if(kSupportUnits.begin(), kSupportUnits.end(),
                                    [&](const SupportUnitInfo& u) { return u.name == c.unit; });
    const double count = std::floor(c.count);
    out += fmt::format("{}{:.0f} {}{} ({:.0f} needed)", out.empty() ? "" : " and ", count,
                       unit == kSupportUnits.end() ? std::string_view(c.unit) : unit->noun, count == 1 ? "" : "s",
                       c.minimum);
  }
  return out;
}

double cause_ms(const FactSet& facts, model::Cause cause) {
  const FactValue* v = facts.get(fmt::format("cause.{}.ms", model::cause_id(cause)));
  const double* ms = v ? std::get_if<double>(v) : nullptr;
  return ms ? *ms : 0;
}

void flatten(const nlohmann::json& value, const std::string& name, FactSet& facts, int depth) {
  if (value.is_object()) {
    if (depth > 8) return;  // facts are flat; deeper nesting is not ours
    for (const auto& [key, item] : value.items())
      flatten(item, name.empty() ? key : name + "." + key, facts, depth + 1);
  } else if (name.empty()) {
    return;
  } else if (value.is_boolean()) {
    facts.set(name, value.get<bool>());
  } else if (value.is_number()) {
    const double n = value.get<double>();
    if (std::isfinite(n)) facts.set(name, n);
  } else if (value.is_string()) {
    facts.set(name, value.get<std::string>());
  }
}

}  // namespace

void sort_findings(std::vector<model::Finding>& findings, const FactSet& facts) {
  std::stable_sort(findings.begin(), findings.end(), [&](const model::Finding& a, const model::Finding& b) {
    if (severity_rank(a.severity) != severity_rank(b.severity))
      return severity_rank(a.severity) < severity_rank(b.severity);
    const double ma = cause_ms(facts, a.cause), mb = cause_ms(facts, b.cause);
    if (ma != mb) return ma > mb;
    return a.rule < b.rule;
  });
}

std::vector<model::Finding> evaluate(const RuleSet& rules, const FactSet& facts, Scope scope) {
  std::vector<model::Finding> findings;
  for (const Rule& rule : rules.rules) {
    if (!rule.enabled || rule.scope != scope || !rule.condition.holds(facts)) continue;
    auto sysctl = sysctl_lines(rule, facts);
    if (!sysctl) continue;
    model::Finding f;
    f.rule = rule.id;
    f.cause = rule.cause;
    f.severity = severity_of(rule, facts);
    f.title = rule.title.render(facts);
    f.evidence = rule.evidence.render(facts);
    f.remedy = rule.remedy.render(facts);
    f.verify = rule.verify.render(facts, Template::Quoting::kShell);
    f.sysctl = std::move(*sysctl);
    Support support = support_of(rule, facts);
    f.evidence_size = std::move(support.counts);
    if (!support.enough && f.severity != "info") {
      f.capped_from = f.severity;
      f.severity = "info";
      f.evidence += fmt::format("{}Too little evidence for a {}: {}; info until a longer run shows it again.",
                                f.evidence.empty() ? "" : " ", f.capped_from == "crit" ? "critical finding" : "warning",
                                shortfall(f.evidence_size));
    }
    findings.push_back(std::move(f));
  }
  sort_findings(findings, facts);
  return findings;
}

FactSet facts_from_json(const nlohmann::json& object) {
  FactSet facts;
  if (object.is_object()) flatten(object, "", facts, 0);
  return facts;
}

FactSet host_facts_of(const model::Report& report) {
  if (!report.host.is_object()) return {};
  auto it = report.host.find("facts");
  return it == report.host.end() ? FactSet{} : facts_from_json(*it);
}

FactSet facts_for_report(const model::Report& report, const FactSet& host_facts) {
  FactSet facts = host_facts;
  facts.merge(report_facts(report));
  // Verify commands name the process; report_facts does not carry the pid.
  if (!report.target.pids.empty() && !facts.has("target.pid")) facts.set("target.pid", report.target.pids.front());
  return facts;
}

void apply_rules(model::Report& report, const RuleSet& rules, const FactSet& host_facts) {
  for (const Problem& p : rules.errors) report.warnings.push_back("rules: " + p.to_string());
  for (const Problem& p : rules.warnings) report.warnings.push_back("rules: " + p.to_string());
  const FactSet facts = facts_for_report(report, host_facts);
  auto found = evaluate(rules, facts, Scope::kReport);
  report.findings.insert(report.findings.end(), found.begin(), found.end());
  sort_findings(report.findings, facts);
}

void apply_rules(model::Report& report, const FactSet& host_facts, const std::vector<std::string>& extra_paths) {
  apply_rules(report, load_rules(extra_paths), host_facts);
}

}  // namespace ld::rules
