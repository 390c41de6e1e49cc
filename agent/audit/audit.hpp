// `latency-doctor audit` as a function: read the host, evaluate the host rules, sort findings.
#pragma once

#include <string>

#include "audit/audit_render.hpp"
#include "audit/host_audit.hpp"

namespace ld::audit {

struct AuditRequest {
  std::string root = "/";
  AuditTarget target;
  std::string nginx_conf;  // "" = /etc/nginx/nginx.conf under root
  std::string rules_dir;   // extra rules (--rules), beside the shipped ones
  std::string shipped_rules_dir;
};

// Throws std::runtime_error when the target cannot be found.
AuditResult run_audit(const AuditRequest& request);

}  // namespace ld::audit
