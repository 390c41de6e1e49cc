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
// std::runtime_error when the root (check_root), the target or a --rules path cannot be found.
AuditResult run_audit(const AuditRequest& request);

// A tree to audit must be a directory this process can list and hold at least one of /proc,
// /sys and /etc: a typo in --root (or an image not mounted yet) would otherwise give an audit
// of nothing that passes. Throws std::runtime_error with a one-line reason.
void check_root(const std::string& root);

}  // namespace ld::audit
