// Rule files: TOML (toml++) into Rules, every problem with its file:line.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "rules/rule.hpp"

namespace ld::rules {

std::string Problem::to_string() const {
  if (file.empty()) return message;
  if (line == 0) return fmt::format("{}: {}", file, message);
  return fmt::format("{}:{}: {}", file, line, message);
}

const Rule* RuleSet::find(std::string_view id) const {
  for (const Rule& r : rules)
    if (r.id == id) return &r;
  return nullptr;
}

const SupportUnitInfo& support_unit_info(SupportUnit unit) { return kSupportUnits[static_cast<size_t>(unit)]; }
static_assert([] {
  for (size_t i = 0; i < kSupportUnits.size(); ++i)
    if (static_cast<size_t>(kSupportUnits[i].unit) != i) return false;
  return true;
}());

namespace {

// The first segment of every fact name a producer writes (docs/rules.md); a name outside them
// is almost certainly a typo that would keep a rule from ever firing.
const std::vector<std::string>& report_namespaces() {
  static const std::vector<std::string> names{"summary", "outliers", "cause",  "typical", "ttft_fit",
                                              "ttft",    "periodic", "window", "probes",  "target",
                                              "client",  "frames",   "tcp"};
  return names;
}
const std::vector<std::string>& host_namespaces() {
  static const std::vector<std::string> names{"sysctl", "cpu", "mem",   "numa",  "cgroup",
                                              "limits", "irq", "nginx", "trace", "host"};
  return names;
}

// "kv_alloc, cpu_frequency, ...": the vocabulary, for messages.
std::string cause_list() {
  std::string list;
  for (const auto& info : model::kCauses) list += fmt::format("{}{}", list.empty() ? "" : ", ", info.id);
  return list;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

class RuleError : public std::runtime_error {
 public:
  RuleError(uint32_t line, const std::string& what) : std::runtime_error(what), line_(line) {}
  uint32_t line() const { return line_; }

 private:
  uint32_t line_;
};

uint32_t line_of(const toml::node& node) { return node.source().begin.line; }

// Reads one rule table; throws RuleError for the first problem.
class RuleReader {
 public:
  RuleReader(const toml::table& table, std::string_view text) : t_(table), text_(text) {}

  Rule read() {
    Rule r;
    r.line = line_of(t_);
    check_keys();
    r.id = string("id", true);
    check_id(r.id);
    if (const toml::node* enabled = t_.get("enabled")) r.enabled = boolean(*enabled, "enabled");
    if (!r.enabled) return r;  // an override that switches a rule off needs nothing else
    const std::string cause = string("cause", true);
    const auto parsed = model::parse_cause(cause);
    if (!parsed)
      throw RuleError(line_of(*t_.get("cause")),
                      fmt::format("cause '{}' is not in the vocabulary ({})", cause, cause_list()));
    r.cause = *parsed;
    r.severity = string("severity", true);
    if (r.severity != "info" && r.severity != "warn" && r.severity != "crit")
      throw RuleError(line_of(*t_.get("severity")), "severity must be info, warn or crit");
    const std::string scope = string("scope", false);
    if (scope == "host") r.scope = Scope::kHost;
    else if (!scope.empty() && scope != "report")
      throw RuleError(line_of(*t_.get("scope")), "scope must be report or host");
    r.sysctl_only = r.scope == Scope::kHost;
    if (const toml::node* only = t_.get("sysctl_only")) r.sysctl_only = boolean(*only, "sysctl_only");
    r.condition = *expression("condition", true);
    r.warn_if = expression("warn_if", false);
    r.crit_if = expression("crit_if", false);
    r.title = text_template("title", true);
    r.evidence = text_template("evidence", true);
    r.remedy = text_template("remedy", true);
    r.verify = text_template("verify", true);
    if (const toml::node* list = t_.get("sysctl")) r.sysctl = sysctls(*list);
    if (const toml::node* support = t_.get("support")) r.support = supports(*support);
    return r;
  }

 private:
  void check_keys() const {
    static const char* const kKeys[] = {"id",     "cause",     "severity", "scope",       "enabled",
                                        "title",  "condition", "warn_if",  "crit_if",     "evidence",
                                        "remedy", "verify",    "sysctl",   "sysctl_only", "support"};
    for (auto&& [key, value] : t_) {
      const std::string_view name = key.str();  // clang cannot capture a structured binding
      if (std::none_of(std::begin(kKeys), std::end(kKeys), [name](const char* k) { return name == k; }))
        throw RuleError(line_of(value), fmt::format("unknown key '{}' in a rule", name));
    }
  }

  static void check_id(const std::string& id) {
    const bool ok = !id.empty() && id.size() <= 64 && std::isalnum(static_cast<unsigned char>(id[0])) &&
                    id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos;
    if (!ok) throw RuleError(0, fmt::format("id '{}': use lower-case letters, digits, '-', '_', '.' (at most 64)", id));
  }

  bool boolean(const toml::node& node, const char* key) const {
    if (!node.is_boolean()) throw RuleError(line_of(node), fmt::format("{} must be true or false", key));
    return node.as_boolean()->get();
  }

  std::string string(const char* key, bool required) const { return string_in(t_, key, required, "rule"); }

  std::string string_in(const toml::table& t, const char* key, bool required, const char* where) const {
    const toml::node* node = t.get(key);
    if (!node) {
      if (required) throw RuleError(line_of(t), fmt::format("{} has no '{}'", where, key));
      return "";
    }
    if (!node->is_string()) throw RuleError(line_of(*node), fmt::format("'{}' must be a string", key));
    return node->as_string()->get();
  }

  // The source line of `offset` bytes into a string value: a multi-line string starts on the
  // line after its opening quotes when they end their line (TOML drops that newline).
  uint32_t line_in_string(const toml::node& node, const std::string& value, size_t offset) const {
    uint32_t line = line_of(node);
    const auto begin = node.source().begin;
    size_t pos = 0;
    for (uint32_t l = 1; l < begin.line && pos != std::string_view::npos; ++l) {
      pos = text_.find('\n', pos);
      if (pos != std::string_view::npos) ++pos;
    }
    if (pos != std::string_view::npos) {
      std::string_view rest =
          text_.substr(pos + std::min<size_t>(begin.column ? begin.column - 1 : 0, text_.size() - pos));
      rest = rest.substr(0, rest.find('\n'));
      if ((rest.rfind("\"\"\"", 0) == 0 || rest.rfind("'''", 0) == 0) &&
          rest.substr(3).find_first_not_of(" \t\r") == std::string_view::npos)
        ++line;
    }
    return line +
           static_cast<uint32_t>(std::count(value.begin(), value.begin() + std::min(offset, value.size()), '\n'));
  }

  static std::string near(const std::string& value, size_t offset) {
    if (offset >= value.size()) return "at the end";
    std::string snippet = value.substr(offset, 24);
    snippet = snippet.substr(0, snippet.find('\n'));
    return fmt::format("near \"{}\"", snippet);
  }

  template <class Parse>
  auto parsed(const char* key, bool required, Parse parse) const -> std::optional<decltype(parse(std::string_view{}))> {
    const std::string value = string(key, required);
    const toml::node* node = t_.get(key);
    if (!node) return std::nullopt;
    try {
      return parse(value);
    } catch (const ExprError& e) {
      throw RuleError(line_in_string(*node, value, e.offset()),
                      fmt::format("{}: {} ({})", key, e.what(), near(value, e.offset())));
    }
  }

  std::optional<Expr> expression(const char* key, bool required) const {
    return parsed(key, required, [](std::string_view s) { return Expr::parse(s); });
  }

  Template text_template(const char* key, bool required) const {
    return *parsed(key, required, [](std::string_view s) { return Template::parse(s); });
  }

  std::vector<SysctlSpec> sysctls(const toml::node& node) const {
    const toml::array* list = node.as_array();
    if (!list) throw RuleError(line_of(node), "sysctl must be a list of {key, value, caveat} tables ([[rule.sysctl]])");
    std::vector<SysctlSpec> out;
    for (const toml::node& item : *list) {
      const toml::table* t = item.as_table();
      if (!t) throw RuleError(line_of(item), "each sysctl entry must be a table with key and value");
      for (auto&& [key, value] : *t)
        if (key.str() != "key" && key.str() != "value" && key.str() != "caveat" && key.str() != "accept")
          throw RuleError(line_of(value),
                          fmt::format("unknown key '{}' in a sysctl entry (key, value, caveat, accept)", key.str()));
      SysctlSpec s;
      s.key = string_in(*t, "key", true, "sysctl entry");
      if (s.key.empty() ||
          s.key.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
              std::string::npos)
        throw RuleError(line_of(*t->get("key")), fmt::format("sysctl key '{}' is not a dotted sysctl name", s.key));
      const toml::node* value = t->get("value");
      if (!value) throw RuleError(line_of(*t), "sysctl entry has no 'value'");
      if (value->is_integer()) s.value = std::to_string(value->as_integer()->get());
      else if (value->is_string()) s.value = value->as_string()->get();
      else throw RuleError(line_of(*value), "sysctl value must be an integer or a string");
      s.caveat = string_in(*t, "caveat", false, "sysctl entry");
      const std::string accept = string_in(*t, "accept", false, "sysctl entry");
      if (accept == "at_least") s.accept = Accept::kAtLeast;
      else if (accept == "at_most") s.accept = Accept::kAtMost;
      else if (!accept.empty() && accept != "exact")
        throw RuleError(line_of(*t->get("accept")), "accept must be exact, at_least or at_most");
      out.push_back(std::move(s));
    }
    return out;
  }

  // support = {slow_tokens = "cause.gil.slow_tokens"}, or a list of such tables (any one suffices).
  std::vector<SupportSet> supports(const toml::node& node) const {
    if (const toml::table* one = node.as_table()) return {support_set(*one)};
    const toml::array* list = node.as_array();
    if (!list || list->empty())
      throw RuleError(line_of(node),
                      "support must be a table of unit = \"count\", or a list of them (any one suffices)");
    std::vector<SupportSet> out;
    for (const toml::node& item : *list) {
      const toml::table* t = item.as_table();
      if (!t) throw RuleError(line_of(item), "each support entry must be a table of unit = \"count\"");
      out.push_back(support_set(*t));
    }
    return out;
  }

  SupportSet support_set(const toml::table& t) const {
    SupportSet set;
    for (auto&& [key, value] : t) {
      const std::string_view unit = key.str();
      const auto* info = std::find_if(kSupportUnits.begin(), kSupportUnits.end(),
                                      [unit](const SupportUnitInfo& u) { return u.name == unit; });
      if (info == kSupportUnits.end()) {
        std::string known;
        for (const SupportUnitInfo& u : kSupportUnits) known += fmt::format("{}{}", known.empty() ? "" : ", ", u.name);
        throw RuleError(line_of(value), fmt::format("support: unknown unit '{}' (known: {})", unit, known));
      }
      if (!value.is_string())
        throw RuleError(line_of(value), fmt::format("support.{} must be a string: an expression that counts", unit));
      const std::string text = value.as_string()->get();
      try {
        set.push_back({info->unit, Expr::parse(text)});
      } catch (const ExprError& e) {
        throw RuleError(line_of(value), fmt::format("support.{}: {} ({})", unit, e.what(), near(text, e.offset())));
      }
    }
    if (set.empty()) throw RuleError(line_of(t), "a support table needs at least one unit = \"count\"");
    return set;
  }

  const toml::table& t_;
  std::string_view text_;
};

// Names that no producer writes: a typo, or a report fact in a host rule.
void check_fact_names(const Rule& r, RuleSet& set) {
  std::vector<std::string> names = r.condition.fact_names();
  auto add = [&](const std::vector<std::string>& more) { names.insert(names.end(), more.begin(), more.end()); };
  if (r.warn_if) add(r.warn_if->fact_names());
  if (r.crit_if) add(r.crit_if->fact_names());
  for (const Template* t : {&r.title, &r.evidence, &r.remedy, &r.verify}) add(t->fact_names());
  for (const SupportSet& support : r.support)
    for (const SupportCount& count : support) add(count.count.fact_names());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& name : names) {
    const std::string first = name.substr(0, name.find('.'));
    const bool report_fact = contains(report_namespaces(), first);
    std::string problem;
    if (!report_fact && !contains(host_namespaces(), first))
      problem = fmt::format("fact '{}' is not in any known namespace (docs/rules.md): it is never present", name);
    else if (report_fact && r.scope == Scope::kHost)
      problem = fmt::format("fact '{}' is a report fact: a host rule never sees it", name);
    else if ((first == "cause" || first == "typical") && name != "typical.windows") {
      const size_t dot = name.find('.');
      const std::string cause = name.substr(dot + 1, name.find('.', dot + 1) - dot - 1);
      if (!model::parse_cause(cause)) problem = fmt::format("fact '{}': '{}' is not a cause id", name, cause);
    }
    if (!problem.empty()) set.warnings.push_back({r.file, r.line, fmt::format("rule {}: {}", r.id, problem)});
  }
}

// A report rule that states no evidence size rises to warn or crit on a single slow token.
void check_support(const Rule& r, RuleSet& set) {
  if (r.scope != Scope::kReport || !r.support.empty()) return;
  set.warnings.push_back({r.file, r.line,
                          fmt::format("rule {}: no 'support' (what its finding rests on): its finding is not "
                                      "held at info on thin evidence (docs/rules.md, \"Evidence size\")",
                                      r.id)});
}

void add_rule(RuleSet& set, Rule rule) {
  for (Rule& existing : set.rules) {
    if (existing.id != rule.id) continue;
    if (existing.layer == set.layer) {
      set.errors.push_back(
          {rule.file, rule.line,
           fmt::format("rule {} is already defined at {}:{} (skipped)", rule.id, existing.file, existing.line)});
      return;
    }
    existing = std::move(rule);  // a later directory overrides
    return;
  }
  set.rules.push_back(std::move(rule));
}

}  // namespace

void load_rules_text(RuleSet& set, std::string_view text, const std::string& file) {
  toml::table doc;
  try {
    doc = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    set.errors.push_back({file, e.source().begin.line, fmt::format("TOML: {} (file skipped)", e.description())});
    return;
  }
  for (auto&& [key, value] : doc) {
    if (key.str() != "rule")
      set.errors.push_back(
          {file, line_of(value), fmt::format("unknown top-level key '{}': rules are [[rule]] tables", key.str())});
  }
  const toml::node* rules = doc.get("rule");
  if (!rules) {
    set.warnings.push_back({file, 0, "no [[rule]] in this file"});
    return;
  }
  const toml::array* list = rules->as_array();
  if (!list || !list->is_array_of_tables()) {
    set.errors.push_back({file, line_of(*rules), "'rule' must be an array of tables: write [[rule]]"});
    return;
  }
  for (const toml::node& node : *list) {
    const toml::table& table = *node.as_table();
    try {
      Rule rule = RuleReader(table, text).read();
      rule.file = file;
      rule.layer = set.layer;
      if (rule.enabled) {
        check_fact_names(rule, set);
        check_support(rule, set);
      }
      add_rule(set, std::move(rule));
    } catch (const RuleError& e) {
      const auto* id = table.get("id");
      const std::string name = id && id->is_string() ? "rule " + id->as_string()->get() : "rule";
      set.errors.push_back(
          {file, e.line() ? e.line() : line_of(table), fmt::format("{}: {} (rule skipped)", name, e.what())});
    }
  }
}

void load_rules_path(RuleSet& set, const std::string& path) {
  namespace fs = std::filesystem;
  ++set.layer;
  set.sources.push_back(path);
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".toml" && it->is_regular_file(ec)) files.push_back(it->path());
    if (ec) throw std::runtime_error(fmt::format("cannot read rules directory {}: {}", path, ec.message()));
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    throw std::runtime_error(fmt::format("rules: {} is not a readable directory or file", path));
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in.is_open()) {
      set.errors.push_back({file.string(), 0, "cannot read this file (skipped)"});
      continue;
    }
    std::ostringstream text;
    text << in.rdbuf();
    load_rules_text(set, text.str(), file.string());
  }
}

std::optional<std::string> shipped_rules_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path dir = exe.parent_path();
  for (const fs::path& candidate :
       {dir / ".." / "share" / "latency-doctor" / "rules", dir / "rules", dir / ".." / "rules"}) {
    if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return std::nullopt;
}

RuleSet load_rules(const std::vector<std::string>& extra_paths) {
  RuleSet set;
  if (auto shipped = shipped_rules_dir()) load_rules_path(set, *shipped);
  else
    set.warnings.push_back({"", 0,
                            "no shipped rules found beside the binary (share/latency-doctor/rules, rules/, ../rules): "
                            "only --rules apply"});
  for (const std::string& path : extra_paths) load_rules_path(set, path);
  return set;
}

}  // namespace ld::rules
