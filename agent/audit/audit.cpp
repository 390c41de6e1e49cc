#include "audit/audit.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "audit/host_tree.hpp"
#include "rules/engine.hpp"

namespace ld::audit {

void check_root(const std::string& root) {
  if (root.empty() || root == "/") return;  // the live host
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("--root {}: {}", root, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("--root {}: not a directory", root));
  DIR* dir = ::opendir(root.c_str());
  if (!dir) throw std::runtime_error(fmt::format("--root {}: cannot list it: {}", root, std::strerror(errno)));
  ::closedir(dir);
  const HostTree tree(root);
  if (!tree.is_dir("/proc") && !tree.is_dir("/sys") && !tree.is_dir("/etc"))
    throw std::runtime_error(fmt::format("--root {}: holds none of proc, sys and etc: not a host or image tree", root));
}

AuditResult run_audit(const AuditRequest& request) {
  check_root(request.root);
  AuditResult result;
  result.host = audit_host(request.root, request.target, request.nginx_conf);
  const rules::RuleSet rules = rules::load_rules(request.rule_paths);
  for (const rules::Problem& p : rules.errors) result.warnings.push_back("rules: " + p.to_string());
  for (const rules::Problem& p : rules.warnings) result.warnings.push_back("rules: " + p.to_string());
  result.findings = rules::evaluate(rules, result.host.facts, rules::Scope::kHost);  // sorted
  return result;
}

}  // namespace ld::audit
