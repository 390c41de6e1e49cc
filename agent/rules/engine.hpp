// The rules engine: rules + facts -> findings (docs/rules.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/report.hpp"
#include "rules/facts.hpp"
#include "rules/rule.hpp"

namespace ld::rules {

// The findings of every enabled rule of `scope` whose condition holds on `facts`, sorted:
// crit, warn, info; then by the time of the rule's cause (fact cause.C.ms), largest first.
std::vector<model::Finding> evaluate(const RuleSet& rules, const FactSet& facts, Scope scope);

// Sorts findings as evaluate() does (facts give each cause's ms).
void sort_findings(std::vector<model::Finding>& findings, const FactSet& facts);

// A JSON object of name -> scalar as facts; nested objects flatten with dots, arrays and
// nulls are skipped.
FactSet facts_from_json(const nlohmann::json& object);

// The host facts recorded with a report (report.host["facts"]), empty when there are none.
FactSet host_facts_of(const model::Report& report);

// The facts report rules read: the report's facts (analysis/facts.hpp), target.pid, and the
// host facts.
FactSet facts_for_report(const model::Report& report, const FactSet& host_facts);

// Evaluates the report rules on a report and appends their findings (then sorts them all);
// every load problem of `rules` becomes a report warning.
void apply_rules(model::Report& report, const RuleSet& rules, const FactSet& host_facts);
// The same with the shipped rules plus `extra_paths` (--rules). Throws std::runtime_error
// when an extra path cannot be read.
void apply_rules(model::Report& report, const FactSet& host_facts, const std::vector<std::string>& extra_paths);

}  // namespace ld::rules
