// `latency-doctor audit` as a function: read the host, evaluate the host rules, sort findings.
#pragma once

#include <string>
#include <vector>

#include "audit/audit_render.hpp"
#include "audit/host_audit.hpp"

namespace ld::audit {

struct AuditRequest {
  std::string root = "/";
  AuditTarget target;
  std::string nginx_conf;               // "" = /etc/nginx/nginx.conf under root
  std::vector<std::string> rule_paths;  // --rules: added to the shipped rules
};

// The host rules (scope "host", rules/host_*.toml) evaluated on the host facts. Throws
// std::runtime_error when the target or a --rules path cannot be found.
AuditResult run_audit(const AuditRequest& request);

}  // namespace ld::audit
