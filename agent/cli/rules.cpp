// latency-doctor rules list|check: the rules this binary applies, and whether rule files load.
#include <algorithm>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "report/text_table.hpp"
#include "rules/rule.hpp"

namespace ld::cli {
namespace {

struct RulesOptions {
  std::vector<std::string> paths;  // --rules, in order
};

// "file:line: error: message", the form editors and CI logs link to.
void print_problem(const rules::Problem& p, const char* kind) {
  const std::string where = p.file.empty() ? "" : p.line ? fmt::format("{}:{}: ", p.file, p.line) : p.file + ": ";
  fmt::print(stderr, "{}{}: {}\n", report::printable(where), kind, report::printable(p.message));
}

std::string severity_cell(const rules::Rule& r) {
  if (!r.enabled) return "off";
  if (r.crit_if && r.severity != "crit") return r.severity + "..crit";
  if (r.warn_if && r.severity == "info") return "info..warn";
  return r.severity;
}

// The shipped rules plus --rules; nullopt (with the error printed) when a path is unreadable.
std::optional<rules::RuleSet> load_for(const std::string& command, const RulesOptions& o) {
  try {
    return rules::load_rules(o.paths);
  } catch (const std::exception& e) {
    print_error(command, e.what());
    return std::nullopt;
  }
}

int run_list(const RulesOptions& o) {
  const auto loaded = load_for("rules list", o);
  if (!loaded) return kExitRuntime;
  const rules::RuleSet& set = *loaded;
  std::vector<const rules::Rule*> sorted;
  for (const rules::Rule& r : set.rules) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(), [](const rules::Rule* a, const rules::Rule* b) { return a->id < b->id; });
  using report::Align;
  report::TextTable table({{"id", Align::kLeft},
                           {"cause", Align::kLeft},
                           {"severity", Align::kLeft},
                           {"scope", Align::kLeft},
                           {"title", Align::kLeft}});
  for (const rules::Rule* r : sorted)
    table.add_row({r->id, std::string(model::cause_id(r->cause)), severity_cell(*r),
                   r->scope == rules::Scope::kHost ? "host" : "report", r->title.text()});
  fmt::print("{}", table.render(""));
  for (const auto& p : set.errors) print_problem(p, "error");
  for (const auto& p : set.warnings) print_problem(p, "warning");
  return kExitOk;
}

int run_check(const RulesOptions& o) {
  const auto loaded = load_for("rules check", o);
  if (!loaded) return kExitRuntime;
  const rules::RuleSet& set = *loaded;
  for (const auto& p : set.errors) print_problem(p, "error");
  for (const auto& p : set.warnings) print_problem(p, "warning");
  const std::string from = set.sources.empty() ? "nowhere" : fmt::format("{}", fmt::join(set.sources, ", "));
  if (!set.errors.empty()) {
    fmt::print(stderr, "rules check: {} error{} in {}: those rules are skipped at run time\n", set.errors.size(),
               set.errors.size() == 1 ? "" : "s", from);
    return kExitRuntime;
  }
  fmt::print("rules check: {} rules OK ({} warning{}) in {}\n", set.rules.size(), set.warnings.size(),
             set.warnings.size() == 1 ? "" : "s", from);
  return kExitOk;
}

}  // namespace

void register_rules(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RulesOptions>();
  auto* sub = app.add_subcommand("rules", "List the diagnosis rules, or check rule files");
  sub->require_subcommand(1);
  sub->footer(
      "Rules are TOML files (docs/rules.md). The shipped ones live in rules/ beside the binary;\n"
      "--rules DIR adds rules and replaces shipped ones with the same id.\n\n"
      "Examples:\n"
      "  latency-doctor rules list\n"
      "  latency-doctor rules check --rules ./my-rules");
  auto* list = sub->add_subcommand("list", "The rules that apply: id, cause, severity, scope, title");
  add_rules_option(list, opts->paths);
  list->callback([opts, &exit_code] { exit_code = run_command("rules list", [&] { return run_list(*opts); }); });
  auto* check = sub->add_subcommand("check", "Load every rule file; print file:line for each problem (exit 2)");
  add_rules_option(check, opts->paths);
  check->callback([opts, &exit_code] { exit_code = run_command("rules check", [&] { return run_check(*opts); }); });
}

}  // namespace ld::cli
