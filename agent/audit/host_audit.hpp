// The pre-deployment host audit: host facts read from a tree ("/" or `--root DIR`) into the
// flat FactSet that host rules read (docs/audit.md lists every name), plus what the report
// needs beside them: where each fact came from, what could not be read, and what
// latency-doctor can trace on this host.
//
// Reading never fails as a whole: a missing or unreadable file leaves its fact absent and is
// listed in `unknown` with the path and the reason.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rules/facts.hpp"

namespace ld::audit {

// The service whose cgroup and limits are checked; neither set = host only.
struct AuditTarget {
  int pid = 0;
  std::string cgroup;  // "/system.slice/vllm.service" or "/sys/fs/cgroup/system.slice/vllm.service"
};

struct UnknownFact {
  std::string fact;    // the fact name, or a prefix for a group ("cgroup.*")
  std::string path;    // the host path that could not be read
  std::string reason;  // "no such file", "Permission denied", ...
};

// One line of "what latency-doctor can trace here".
struct TraceCapability {
  std::string name;               // "BTF", "tracepoints", "probe sock", ...
  std::optional<bool> available;  // nullopt = unknown
  std::string detail;             // why, or what it enables
};

struct HostAudit {
  std::string root = "/";
  rules::FactSet facts;
  std::map<std::string, std::string> sources;  // fact -> host path (or file:line) it came from
  std::vector<UnknownFact> unknown;
  std::vector<TraceCapability> tracing;
  std::vector<std::string> warnings;  // e.g. nginx syntax errors, with file:line
  // The target as resolved: pid, comm, cgroup path ("" when not given).
  int target_pid = 0;
  std::string target_comm;
  std::string target_cgroup;
};

// Throws std::runtime_error when the target cannot be found (no such pid / cgroup): the one
// thing an audit cannot carry on without, because the user asked for it.
HostAudit audit_host(const std::string& root, const AuditTarget& target, const std::string& nginx_conf = "");
rules::FactSet read_host_facts(const std::string& root, const AuditTarget& target);

// name -> value, for the trace header (and the audit's JSON "host" object), and back.
nlohmann::json host_facts_to_json(const rules::FactSet& facts);
rules::FactSet host_facts_from_json(const nlohmann::json& object);  // ignores non-scalar values

}  // namespace ld::audit
