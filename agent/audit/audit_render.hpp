// `audit` output: text for people, JSON (schema latency-doctor/audit/v1), and a ready
// /etc/sysctl.d/ file. Pure functions of the audit result.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "audit/host_audit.hpp"
#include "report/report.hpp"

namespace ld::audit {

inline constexpr const char* kAuditSchema = "latency-doctor/audit/v1";

struct AuditResult {
  HostAudit host;
  std::vector<model::Finding> findings;  // most severe first (as rules::evaluate sorts them)
  std::vector<std::string> warnings;     // rule loading/evaluation problems
};

// info 0, warn 1, crit 2; -1 for anything else.
int severity_rank(std::string_view severity);
// --fail-on: a finding of `severity` or worse exists.
bool has_finding_at_or_above(const std::vector<model::Finding>& findings, std::string_view severity);

std::string render_audit_text(const AuditResult& result);
std::string render_audit_json(const AuditResult& result);
// `key = value` lines for every recommended sysctl whose current value differs, each after
// `#` lines with the reason and the caveat. Recommendations for keys this host does not have
// (current unknown) are written commented out.
std::string render_sysctl_file(const AuditResult& result);

}  // namespace ld::audit
