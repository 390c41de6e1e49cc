// What every host fact reader writes through: a fact with the place it came from, or the
// reason it is unknown. Internal to agent/audit.
#pragma once

#include <optional>
#include <string>

#include "audit/host_audit.hpp"
#include "audit/host_tree.hpp"

namespace ld::audit {

class FactSink {
 public:
  FactSink(const HostTree& tree, HostAudit& out) : tree_(tree), out_(out) {}

  const HostTree& tree() const { return tree_; }
  const rules::FactSet& facts() const { return out_.facts; }
  HostAudit& audit() { return out_; }

  template <class V>
  void set(const std::string& name, V value, const std::string& source) {
    out_.facts.set(name, value);
    if (!source.empty()) out_.sources[name] = source;
  }
  void unknown(const std::string& fact, const std::string& path, const std::string& reason) {
    out_.unknown.push_back({fact, path, reason});
  }
  void warn(std::string message) { out_.warnings.push_back(std::move(message)); }

  // The file's text for `fact`, or nullopt with the fact listed as unknown.
  std::optional<std::string> read(const std::string& fact, const std::string& path) {
    FileText file = tree_.read(path);
    if (file.ok) return std::move(file.text);
    unknown(fact, path, file.error);
    return std::nullopt;
  }
  // Same, but a missing file is a normal state of the host (no cpufreq driver, no swap
  // controller): nullopt without an unknown entry; other failures are still unknown.
  std::optional<std::string> read_optional(const std::string& fact, const std::string& path) {
    FileText file = tree_.read(path);
    if (file.ok) return std::move(file.text);
    if (!file.missing) unknown(fact, path, file.error);
    return std::nullopt;
  }

 private:
  const HostTree& tree_;
  HostAudit& out_;
};

// Readers, one file each; called in this order by audit_host().
void read_sysctl_facts(FactSink& sink);
void read_system_facts(FactSink& sink);                             // cpu, mem, numa, irq
void read_target_facts(FactSink& sink, const AuditTarget& target);  // cgroup, limits
void read_nginx_facts(FactSink& sink, const std::string& nginx_conf);
void read_trace_facts(FactSink& sink);  // observability readiness (after sysctls)

}  // namespace ld::audit
