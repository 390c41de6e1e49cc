// Rules: data files (rules/*.toml, docs/rules.md) that turn facts into findings.
//
// Rules load in layers: the shipped directory, then each --rules DIR in order. A rule whose
// id an earlier layer defined replaces it; a new id adds one. A broken file or rule is
// skipped with a file:line problem, never a crash: `rules check` prints the problems and
// fails, a report carries them as warnings.
#pragma once

#include <array>
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

// What a finding's numbers rest on, counted in units a second run would count again. A rule
// states one or more sets of counts (`support`); its finding rises above info only when every
// count of one set reaches its unit's minimum (docs/rules.md, "Evidence size").
enum class SupportUnit : uint8_t { kSlowTokens, kSamples, kRequests, kWindows, kEvents };
struct SupportUnitInfo {
  SupportUnit unit;
  std::string_view name;  // the key in rule files and the report's evidence_size
  double minimum;         // for a finding above info
  std::string_view noun;  // in the evidence sentence, singular ("slow token"); "s" makes the plural
};
// Three slow tokens: one or two can be the same accident; three of one cause is a pattern a
// second run repeats. Twenty samples: a share measured on fewer moves by 20 points from one
// run to the next (the Wilson interval of 10/20 is 30-70%). Twenty token windows for a
// typical-token figure, three requests for a per-request one, three counted kernel events.
inline constexpr std::array<SupportUnitInfo, 5> kSupportUnits{{
    {SupportUnit::kSlowTokens, "slow_tokens", 3, "slow token"},
    {SupportUnit::kSamples, "samples", 20, "on-CPU sample"},
    {SupportUnit::kRequests, "requests", 3, "request"},
    {SupportUnit::kWindows, "windows", 20, "token window"},
    {SupportUnit::kEvents, "events", 3, "event"},
}};
const SupportUnitInfo& support_unit_info(SupportUnit unit);

struct SupportCount {
  SupportUnit unit;
  Expr count;  // a number; unknown counts as 0
};
using SupportSet = std::vector<SupportCount>;  // every count must reach its minimum

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
  std::vector<SupportSet> support;  // any one set suffices; empty: the rule states none
  std::string file;                 // where it is defined
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
