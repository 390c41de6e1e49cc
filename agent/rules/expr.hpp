// The condition language of rule files (docs/rules.md): comparisons, and/or/not, arithmetic,
// numbers with units, strings, and the names of facts.
//
//   cause.disk_io.max_ms >= 50ms and cause.disk_io.syscall in ("fsync", "fdatasync")
//   not exists(cpu.governor) or cpu.governor != "performance"
//
// A fact that is absent evaluates to *unknown*, and unknown propagates (three-valued logic:
// `false and unknown` is false, `true or unknown` is true, everything else with an unknown
// is unknown). A condition holds only when it is a known true, so a rule never fires on a
// fact that was not observed, whichever way its condition is written.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rules/facts.hpp"

namespace ld::rules {

// What an expression evaluates to.
struct Value {
  enum class Kind { kUnknown, kNumber, kString, kBool };
  Kind kind = Kind::kUnknown;
  double number = 0;
  std::string text;
  bool flag = false;

  static Value unknown() { return {}; }
  static Value of(double n) { return {Kind::kNumber, n, {}, false}; }
  static Value of(std::string s) { return {Kind::kString, 0, std::move(s), false}; }
  static Value of(bool b) { return {Kind::kBool, 0, {}, b}; }
  static Value of(const FactValue& fact);

  bool is_unknown() const { return kind == Kind::kUnknown; }
  bool is_true() const { return kind == Kind::kBool && flag; }
};

// A syntax error at `offset` (bytes into the expression text).
class ExprError : public std::runtime_error {
 public:
  ExprError(size_t offset, const std::string& what) : std::runtime_error(what), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

// Limits that keep a hostile rule file from exhausting the stack or memory.
inline constexpr size_t kMaxExprLength = 8192;
inline constexpr int kMaxExprDepth = 64;

class Expr {
 public:
  struct Node;

  // Throws ExprError.
  static Expr parse(std::string_view text);

  Value evaluate(const FactSet& facts) const;
  // True only when the expression evaluates to a known true.
  bool holds(const FactSet& facts) const { return evaluate(facts).is_true(); }
  // Every fact name the expression reads (for `rules check`).
  std::vector<std::string> fact_names() const;
  const std::string& text() const { return text_; }

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
};

// The unit suffixes numbers may carry, and what they multiply by (ms, bytes, kHz, fractions).
struct Unit {
  const char* name;
  double factor;
};
const std::vector<Unit>& units();

}  // namespace ld::rules
