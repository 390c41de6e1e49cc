// Text templates of rule files (title, evidence, remedy, verify): plain text with
// placeholders that quote facts (docs/rules.md).
//
//   "{cause.disk_io.syscall} took {cause.disk_io.max_ms:.0f} ms{? on {cause.disk_io.path}?}"
//
// {EXPR} or {EXPR:FORMAT} renders an expression of the condition language; FORMAT is .Nf,
// .N% (a fraction as a percentage), bytes (IEC units), khz (a frequency in kHz) or sh (shell
// quoting). An unknown value renders as "?", except inside an optional segment {? ... ?},
// which is left out whole when any of its placeholders is unknown. {{ and }} are braces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/expr.hpp"

namespace ld::rules {

class Template {
 public:
  // Where the rendered text goes: verify commands shell-quote every string they quote.
  enum class Quoting { kNone, kShell };

  // Throws ExprError (offset into `text`).
  static Template parse(std::string_view text);

  std::string render(const FactSet& facts, Quoting quoting = Quoting::kNone) const;
  std::vector<std::string> fact_names() const;
  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }

  struct Piece {
    std::string literal;  // text, when expr is unset
    bool is_placeholder = false;
    Expr expr;
    std::string format;
    int group = -1;  // index of the optional segment it belongs to, -1 = none
  };

 private:
  std::vector<Piece> pieces_;
  std::string text_;
};

// 'it'\''s' style quoting for a POSIX shell; words of safe characters stay as they are.
std::string shell_quote(const std::string& word);

}  // namespace ld::rules
