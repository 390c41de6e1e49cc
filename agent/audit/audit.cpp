#include "audit/audit.hpp"

namespace ld::audit {

AuditResult run_audit(const AuditRequest& request) {
  AuditResult result;
  result.host = audit_host(request.root, request.target, request.nginx_conf);
  // Findings come from the host rules (rules/host*.toml) once the rules engine is merged.
  result.warnings.push_back("host rules not evaluated: this build has no rules engine yet");
  sort_findings(result.findings);
  return result;
}

}  // namespace ld::audit
