#include "audit/audit.hpp"

#include "rules/engine.hpp"

namespace ld::audit {

AuditResult run_audit(const AuditRequest& request) {
  AuditResult result;
  result.host = audit_host(request.root, request.target, request.nginx_conf);
  const rules::RuleSet rules = rules::load_rules(request.rule_paths);
  for (const rules::Problem& p : rules.errors) result.warnings.push_back("rules: " + p.to_string());
  for (const rules::Problem& p : rules.warnings) result.warnings.push_back("rules: " + p.to_string());
  result.findings = rules::evaluate(rules, result.host.facts, rules::Scope::kHost);  // sorted
  return result;
}

}  // namespace ld::audit
