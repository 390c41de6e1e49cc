// The condition language and text templates of rule files (docs/rules.md).
#include <gtest/gtest.h>

#include "rules/expr.hpp"
#include "rules/template.hpp"

using namespace ld::rules;

namespace {

FactSet sample_facts() {
  FactSet f;
  f.set("cause.disk_io.max_ms", 240.0);
  f.set("cause.disk_io.calls", 3);
  f.set("cause.disk_io.syscall", "fsync");
  f.set("cause.disk_io.path", "/var/log/app's log.txt");
  f.set("cause.kv_alloc.mmap_bytes", 3.0 * 1024 * 1024 * 1024);
  f.set("window.cpu_khz_min", 1200000.0);
  f.set("window.cpu_khz_max", 3000000.0);
  f.set("cause.gil.share", 0.43);
  f.set("ttft.first_request_outlier", true);
  f.set("sysctl.net.core.somaxconn", "4096");
  f.set("cpu.governor", "powersave");
  return f;
}

Value eval(const std::string& text, const FactSet& facts = sample_facts()) { return Expr::parse(text).evaluate(facts); }

bool holds(const std::string& text, const FactSet& facts = sample_facts()) { return Expr::parse(text).holds(facts); }

size_t error_offset(const std::string& text) {
  try {
    Expr::parse(text);
  } catch (const ExprError& e) {
    return e.offset();
  }
  ADD_FAILURE() << "parsed without an error: " << text;
  return std::string::npos;
}

}  // namespace

TEST(RulesExpr, UnitsConvertToMillisecondsBytesAndFractions) {
  EXPECT_DOUBLE_EQ(eval("1.5s").number, 1500);
  EXPECT_DOUBLE_EQ(eval("250us").number, 0.25);
  EXPECT_DOUBLE_EQ(eval("2min").number, 120000);
  EXPECT_DOUBLE_EQ(eval("2MiB").number, 2 * 1048576.0);
  EXPECT_DOUBLE_EQ(eval("2MB").number, 2e6);
  EXPECT_DOUBLE_EQ(eval("80%").number, 0.8);
  EXPECT_DOUBLE_EQ(eval("1.2GHz").number, 1.2e6);
  EXPECT_DOUBLE_EQ(eval("1e3").number, 1000);
}

TEST(RulesExpr, ComparesFactsWithUnits) {
  EXPECT_TRUE(holds("cause.disk_io.max_ms >= 200ms"));
  EXPECT_FALSE(holds("cause.disk_io.max_ms > 0.5s"));
  EXPECT_TRUE(holds("cause.kv_alloc.mmap_bytes >= 1GiB and cause.kv_alloc.mmap_bytes < 4GiB"));
  EXPECT_TRUE(holds("cause.gil.share > 40%"));
  EXPECT_TRUE(holds("window.cpu_khz_min < 0.5 * window.cpu_khz_max"));
  EXPECT_TRUE(holds("window.cpu_khz_min / window.cpu_khz_max == 0.4"));
  EXPECT_TRUE(holds("cause.disk_io.calls + 1 == 4 and -cause.disk_io.calls == 0 - 3"));
}

TEST(RulesExpr, StringOperators) {
  EXPECT_TRUE(holds("cause.disk_io.syscall == 'fsync'"));
  EXPECT_TRUE(holds("cause.disk_io.syscall != \"fdatasync\""));
  EXPECT_TRUE(holds("cause.disk_io.syscall in (\"fdatasync\", \"fsync\")"));
  EXPECT_FALSE(holds("cause.disk_io.syscall in (\"write\")"));
  EXPECT_TRUE(holds("cause.disk_io.path startswith '/var/log'"));
  EXPECT_TRUE(holds("cause.disk_io.path contains 'app'"));
  EXPECT_TRUE(holds("cause.disk_io.path endswith '.txt'"));
  // A numeric string (a sysctl read as text) compares as a number.
  EXPECT_TRUE(holds("sysctl.net.core.somaxconn < 65535"));
}

TEST(RulesExpr, PrecedenceNotAndOr) {
  // and binds tighter than or; not tighter than and.
  EXPECT_TRUE(holds("true or false and false"));
  EXPECT_FALSE(holds("(true or false) and false"));
  EXPECT_TRUE(holds("not false and true"));
  EXPECT_FALSE(holds("not (false or true)"));
  EXPECT_DOUBLE_EQ(eval("2 + 3 * 4").number, 14);
  EXPECT_DOUBLE_EQ(eval("(2 + 3) * 4").number, 20);
  EXPECT_DOUBLE_EQ(eval("10 - 4 - 3").number, 3);  // left associative
}

TEST(RulesExpr, AbsentFactsNeverMakeAConditionHold) {
  // Whichever way a condition is written, an unobserved fact does not make it true.
  for (const char* text : {"missing.fact > 1", "missing.fact <= 1", "not (missing.fact > 1)",
                           "cpu.governor != 'performance' and missing.fact > 0", "missing.fact == missing.fact",
                           "not (missing.fact contains 'x')", "missing.fact in (1, 2)", "-missing.fact < 0"}) {
    EXPECT_FALSE(holds(text)) << text;
  }
  // But a known true or false decides alone.
  EXPECT_TRUE(holds("missing.fact > 1 or cause.disk_io.calls == 3"));
  EXPECT_TRUE(holds("not (missing.fact > 1 and false)"));
  EXPECT_EQ(eval("missing.fact > 1 and false").kind, Value::Kind::kBool);
}

TEST(RulesExpr, ExistsAndDefault) {
  EXPECT_TRUE(holds("exists(cpu.governor)"));
  EXPECT_FALSE(holds("exists(gpu.count)"));
  EXPECT_TRUE(holds("not exists(gpu.count) or gpu.count > 1"));
  EXPECT_TRUE(holds("default(gpu.count, 0) == 0"));
  EXPECT_TRUE(holds("default(cause.disk_io.calls, 0) == 3"));
  EXPECT_DOUBLE_EQ(eval("max(1, cause.disk_io.calls, 2)").number, 3);
  EXPECT_DOUBLE_EQ(eval("min(5, cause.disk_io.calls)").number, 3);
  EXPECT_DOUBLE_EQ(eval("abs(0 - 7)").number, 7);
  EXPECT_TRUE(eval("max(1, missing.x)").is_unknown());
  EXPECT_DOUBLE_EQ(eval("if(cause.gil.share >= 40%, 20, 0)").number, 20);
  EXPECT_DOUBLE_EQ(eval("if(cause.gil.share >= 50%, 20, 0)").number, 0);
  EXPECT_TRUE(eval("if(missing.x > 1, 20, 0)").is_unknown());  // an unknown condition decides nothing
  EXPECT_TRUE(eval("if(3, 1, 0)").is_unknown());               // a number is not a condition
  EXPECT_NE(error_offset("if(true, 1)"), std::string::npos);
  FactSet odd;
  odd.set("nginx.upstream.my-app.timeout_ms", 60000);
  EXPECT_TRUE(holds("fact(\"nginx.upstream.my-app.timeout_ms\") == 60s", odd));
}

TEST(RulesExpr, TypeMismatchAndDivisionByZeroAreUnknown) {
  EXPECT_TRUE(eval("cause.disk_io.syscall > 3").is_unknown());
  EXPECT_TRUE(eval("cause.disk_io.calls / 0").is_unknown());
  EXPECT_TRUE(eval("ttft.first_request_outlier + 1").is_unknown());
  EXPECT_TRUE(eval("not cause.disk_io.calls").is_unknown());
  EXPECT_FALSE(holds("cause.disk_io.calls"));  // a number is not a condition
  EXPECT_TRUE(holds("ttft.first_request_outlier"));
  EXPECT_TRUE(holds("ttft.first_request_outlier == true"));
}

TEST(RulesExpr, ReportsWhereTheSyntaxIsWrong) {
  EXPECT_EQ(error_offset("cause.gil.ms > 5mss"), 16u);  // at the unknown unit
  EXPECT_EQ(error_offset("a = 1"), 2u);                 // = is not ==
  EXPECT_EQ(error_offset("a > 1 &&  b"), 6u);
  EXPECT_EQ(error_offset("(a > 1"), 6u);     // not closed
  EXPECT_EQ(error_offset("a > 1 b"), 6u);    // trailing junk
  EXPECT_EQ(error_offset("1 < a < 3"), 6u);  // no chaining
  EXPECT_EQ(error_offset("a == 'open"), 5u);
  EXPECT_EQ(error_offset("nosuch(a)"), 0u);
  EXPECT_EQ(error_offset("exists('a')"), 7u);
  EXPECT_EQ(error_offset("a in 1, 2"), 5u);
  EXPECT_EQ(error_offset(""), 0u);
  EXPECT_EQ(error_offset("a. > 1"), 1u);
  EXPECT_EQ(error_offset("5ms.x"), 3u);
  EXPECT_EQ(error_offset("a > \x01"), 4u);
}

TEST(RulesExpr, NestingIsBounded) {
  EXPECT_NO_THROW(Expr::parse(std::string(20, '(') + "1" + std::string(20, ')')));
  EXPECT_THROW(Expr::parse(std::string(5000, '(') + "1" + std::string(5000, ')')), ExprError);
  EXPECT_THROW(Expr::parse(std::string(5000, '-') + "1"), ExprError);
  std::string long_sum = "1";
  for (int i = 0; i < 200; ++i) long_sum += " + 1";
  EXPECT_THROW(Expr::parse(long_sum), ExprError);  // a left-deep tree deeper than the limit
  EXPECT_THROW(Expr::parse(std::string(kMaxExprLength + 1, '1')), ExprError);
}

TEST(RulesExpr, FactNamesListsEveryFactRead) {
  auto names = Expr::parse("exists(a.b) and c.d > default(e.f, 1) or fact(\"g-h\") == 2").fact_names();
  EXPECT_EQ(names, (std::vector<std::string>{"a.b", "c.d", "e.f", "g-h"}));
}

TEST(RulesTemplate, QuotesFactsWithFormats) {
  const FactSet f = sample_facts();
  EXPECT_EQ(Template::parse("{cause.disk_io.syscall} took {cause.disk_io.max_ms:.1f} ms in {cause.disk_io.calls} calls")
                .render(f),
            "fsync took 240.0 ms in 3 calls");
  EXPECT_EQ(Template::parse("{cause.gil.share:.0%} of the time").render(f), "43% of the time");
  EXPECT_EQ(Template::parse("{cause.kv_alloc.mmap_bytes:bytes} mapped").render(f), "3.0 GiB mapped");
  EXPECT_EQ(Template::parse("{window.cpu_khz_min:khz} to {window.cpu_khz_max:khz}").render(f), "1.20 GHz to 3.00 GHz");
  EXPECT_EQ(Template::parse("{window.cpu_khz_min / window.cpu_khz_max:.0%}").render(f), "40%");
  EXPECT_EQ(Template::parse("{cause.gil.share}").render(f), "0.43");
  EXPECT_EQ(Template::parse("{{literal}} {ttft.first_request_outlier}").render(f), "{literal} true");
  EXPECT_EQ(Template::parse("{'a:b'}").render(f), "a:b");  // a colon inside a string is not a format
  FactSet tests;
  tests.set("frames.top_p", 0.0074);
  tests.set("frames.second_p", 0.00002);
  EXPECT_EQ(Template::parse("{frames.top_p:p}; {frames.second_p:p}").render(tests), "p = 0.007; p < 0.001");
}

TEST(RulesTemplate, MissingFactsAndOptionalSegments) {
  const FactSet f = sample_facts();
  EXPECT_EQ(Template::parse("governor {cpu.governor}, gpus {gpu.count}").render(f), "governor powersave, gpus ?");
  EXPECT_EQ(Template::parse("fsync{? on {cause.disk_io.syscall}?}{? ({gpu.count} GPUs)?}.").render(f),
            "fsync on fsync.");
  EXPECT_EQ(Template::parse("{default(gpu.count, 'no')} GPUs").render(f), "no GPUs");
}

TEST(RulesTemplate, ShellQuotingForVerifyCommands) {
  const FactSet f = sample_facts();
  const auto t = Template::parse("ls -l {cause.disk_io.path} && echo {cause.disk_io.syscall}");
  EXPECT_EQ(t.render(f, Template::Quoting::kShell), "ls -l '/var/log/app'\\''s log.txt' && echo fsync");
  EXPECT_EQ(Template::parse("cat {cause.disk_io.path:sh}").render(f), "cat '/var/log/app'\\''s log.txt'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
}

TEST(RulesTemplate, SyntaxErrorsCarryTheirOffset) {
  auto offset = [](const char* text) -> size_t {
    try {
      Template::parse(text);
    } catch (const ExprError& e) {
      return e.offset();
    }
    return std::string::npos;
  };
  EXPECT_EQ(offset("took {cause.x:.9z} ms"), 14u);  // unknown format
  EXPECT_EQ(offset("took {cause.x > } ms"), 16u);   // expression error, offset in the template
  EXPECT_EQ(offset("took {cause.x"), 5u);
  EXPECT_EQ(offset("a } b"), 2u);
  EXPECT_EQ(offset("{? a {? b ?} ?}"), 5u);
  EXPECT_EQ(offset("{? open"), 7u);
  EXPECT_EQ(offset("fine {x} {{ }}"), std::string::npos);
}
