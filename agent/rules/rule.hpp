// Rules: data files (rules/*.toml, docs/rules.md) that turn facts into findings.
//
// Rules load in layers: the shipped directory, then each --rules DIR in order. A rule whose
// id an earlier layer defined replaces it; a new id adds one. A broken file or rule is
// skipped with a file:line problem, never a crash: `rules check` prints the problems and
// fails, a report carries them as warnings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/cause.hpp"
#include "rules/expr.hpp"
#include "rules/template.hpp"

namespace ld::rules {

// report: evaluated on a report's facts merged with the host facts (attach, report).
// host: evaluated on host facts alone (audit).
enum class Scope { kReport, kHost };

// When a host's current value already satisfies a recommendation.
enum class Accept { kExact, kAtLeast, kAtMost };

struct SysctlSpec {
  std::string key;  // dotted, as `sysctl -n` takes it
  std::string value;
  std::string caveat;
  Accept accept = Accept::kExact;
};

struct Rule {
  std::string id;
  model::Cause cause = model::Cause::kUnknown;
  std::string severity;  // info | warn | crit: the least it reports
  Scope scope = Scope::kReport;
  bool enabled = true;       // false: an override that switches a rule off
  bool sysctl_only = false;  // skip the finding when every sysctl already matches
  Expr condition;
  std::optional<Expr> warn_if, crit_if;  // raise the severity when they hold
  Template title, evidence, remedy, verify;
  std::vector<SysctlSpec> sysctl;
  std::string file;  // where it is defined
  uint32_t line = 0;
  int layer = 0;  // which directory it came from
};

struct Problem {
  std::string file;   // "" when not about one file
  uint32_t line = 0;  // 0 when not about one line
  std::string message;
  std::string to_string() const;  // "file:line: message"
};

struct RuleSet {
  std::vector<Rule> rules;
  std::vector<Problem> errors;       // what was skipped
  std::vector<Problem> warnings;     // loaded, but probably not what was meant
  std::vector<std::string> sources;  // the directories and files read, in order
  int layer = 0;                     // the layer being loaded

  const Rule* find(std::string_view id) const;
};

// Adds the rules of one file's text (file names the problems) to the current layer of `set`.
void load_rules_text(RuleSet& set, std::string_view text, const std::string& file);
// Starts a new layer with a directory (every *.toml in it, by name) or a single file.
// Throws std::runtime_error when the path cannot be read.
void load_rules_path(RuleSet& set, const std::string& path);
// The shipped rules, when found (else a warning), then every extra path as a new layer.
// Throws std::runtime_error for an extra path that cannot be read.
RuleSet load_rules(const std::vector<std::string>& extra_paths);
// rules/ beside the installed binary or in the source tree: <exe dir>/../share/latency-doctor/
// rules, <exe dir>/rules, <exe dir>/../rules (the binary is build/latency-doctor).
std::optional<std::string> shipped_rules_dir();

}  // namespace ld::rules
