// libFuzzer target: any bytes as a rule file, as a condition and as a text template. Loading
// never throws or crashes, every problem has a message, and whatever loads evaluates.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rules/engine.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Facts of every type, so comparisons, arithmetic and string tests all get exercised.
const ld::rules::FactSet& sample_facts() {
  static const ld::rules::FactSet facts = [] {
    ld::rules::FactSet f;
    f.set("cause.disk_io.max_ms", 240.0);
    f.set("cause.disk_io.ms", 480.0);
    f.set("cause.disk_io.syscall", "fsync");
    f.set("cause.disk_io.path", "/var/log/a'b\n.log");
    f.set("summary.requests", 40);
    f.set("ttft.first_request_outlier", true);
    f.set("sysctl.net.core.somaxconn", 4096);
    f.set("sysctl.vm.swappiness", "60");
    f.set("cpu.governor", "powersave");
    f.set("target.pid", 4242);
    return f;
  }();
  return facts;
}

bool valid_severity(const std::string& s) { return s == "info" || s == "warn" || s == "crit"; }

void fuzz_rule_file(std::string_view text) {
  ld::rules::RuleSet set;
  ld::rules::load_rules_text(set, text, "fuzz.toml");
  for (const auto& p : set.errors) check(!p.message.empty() && p.file == "fuzz.toml");
  for (const auto& r : set.rules) check(!r.id.empty() && (!r.enabled || valid_severity(r.severity)));
  for (auto scope : {ld::rules::Scope::kReport, ld::rules::Scope::kHost}) {
    for (const auto& f : ld::rules::evaluate(set, sample_facts(), scope)) {
      check(valid_severity(f.severity) && !f.rule.empty());
      check(set.find(f.rule) != nullptr);
    }
  }
}

void fuzz_expression(std::string_view text) {
  try {
    const auto e = ld::rules::Expr::parse(text);
    e.evaluate(sample_facts());
    e.evaluate(ld::rules::FactSet{});
    e.fact_names();
  } catch (const ld::rules::ExprError& e) {
    check(e.offset() <= std::max(text.size(), ld::rules::kMaxExprLength));
  }
}

void fuzz_template(std::string_view text) {
  try {
    const auto t = ld::rules::Template::parse(text);
    t.render(sample_facts(), ld::rules::Template::Quoting::kShell);
    t.render(ld::rules::FactSet{});
  } catch (const ld::rules::ExprError& e) {
    check(e.offset() <= std::max(text.size(), ld::rules::kMaxExprLength));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz_rule_file(text);
  fuzz_expression(text);
  fuzz_template(text);
  return 0;
}
