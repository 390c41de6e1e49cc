#include "audit/host_audit.hpp"

#include <cmath>

#include "audit/fact_sink.hpp"

namespace ld::audit {

HostAudit audit_host(const std::string& root, const AuditTarget& target, const std::string& nginx_conf) {
  HostTree tree(root);
  HostAudit audit;
  audit.root = tree.display_root();
  FactSink sink(tree, audit);
  read_target_facts(sink, target);  // first: a wrong --pid/--cgroup fails before any work
  read_sysctl_facts(sink);
  read_system_facts(sink);
  read_nginx_facts(sink, nginx_conf);
  read_trace_facts(sink);
  return audit;
}

rules::FactSet read_host_facts(const std::string& root, const AuditTarget& target) {
  return audit_host(root, target).facts;
}

nlohmann::json host_facts_to_json(const rules::FactSet& facts) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : facts.all()) {
    std::visit(
        [&, &name = name](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, double>) {
            // Whole numbers as integers: byte counts and sysctls read back exactly.
            if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) out[name] = static_cast<int64_t>(v);
            else if (std::isfinite(v)) out[name] = v;
          } else {
            out[name] = v;
          }
        },
        value);
  }
  return out;
}

rules::FactSet host_facts_from_json(const nlohmann::json& object) {
  rules::FactSet facts;
  if (!object.is_object()) return facts;
  for (const auto& [name, value] : object.items()) {
    if (value.is_boolean()) facts.set(name, value.get<bool>());
    else if (value.is_number()) facts.set(name, value.get<double>());
    else if (value.is_string()) facts.set(name, value.get<std::string>());
  }
  return facts;
}

}  // namespace ld::audit
