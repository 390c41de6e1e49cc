#include "rules/template.hpp"

#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace ld::rules {
namespace {

// The first `stop` character of `s` from `pos` that is not inside a quoted string.
size_t find_unquoted(std::string_view s, size_t pos, char stop) {
  char quote = 0;
  for (; pos < s.size(); ++pos) {
    const char c = s[pos];
    if (quote) {
      if (c == '\\') ++pos;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == stop) {
      return pos;
    }
  }
  return std::string_view::npos;
}

// .Nf and .N% carry a digit count; the others are names.
std::optional<int> decimals(const std::string& format, char kind) {
  if (format.size() != 3 || format[0] != '.' || format[2] != kind || format[1] < '0' || format[1] > '9')
    return std::nullopt;
  return format[1] - '0';
}

bool valid_format(const std::string& format) {
  return format.empty() || format == "bytes" || format == "khz" || format == "sh" || format == "p" ||
         decimals(format, 'f') || decimals(format, '%');
}

std::string default_number(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 1) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2g}", v);
}

std::string human_bytes(double v) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t i = 0;
  while (std::fabs(v) >= 1024 && i + 1 < std::size(kUnits)) {
    v /= 1024;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.1f} {}", v, kUnits[i]);
}

std::string human_khz(double khz) {
  if (std::fabs(khz) >= 1e6) return fmt::format("{:.2f} GHz", khz / 1e6);
  if (std::fabs(khz) >= 1e3) return fmt::format("{:.0f} MHz", khz / 1e3);
  return fmt::format("{:.0f} kHz", khz);
}

std::string format_number(double v, const std::string& format) {
  if (auto n = decimals(format, 'f')) return fmt::format("{:.{}f}", v, *n);
  if (auto n = decimals(format, '%')) return fmt::format("{:.{}f}%", v * 100, *n);
  if (format == "bytes") return human_bytes(v);
  if (format == "khz") return human_khz(v);
  if (format == "p") return v < 0.001 ? "p < 0.001" : fmt::format("p = {:.3f}", v);  // a test's p-value
  return default_number(v);
}

std::string format_value(const Value& v, const std::string& format, Template::Quoting quoting) {
  switch (v.kind) {
    case Value::Kind::kUnknown: return "?";
    case Value::Kind::kBool: return v.flag ? "true" : "false";
    case Value::Kind::kNumber: return format_number(v.number, format);
    case Value::Kind::kString: break;
  }
  if (format == "sh" || quoting == Template::Quoting::kShell) return shell_quote(v.text);
  return v.text;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=+,-@%") ==
                                         std::string::npos;
  if (safe) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Template Template::parse(std::string_view s) {
  if (s.size() > kMaxExprLength)
    throw ExprError(kMaxExprLength, fmt::format("text longer than {} bytes", kMaxExprLength));
  Template t;
  t.text_ = std::string(s);
  std::string literal;
  int group = -1, groups = 0;
  auto flush = [&] {
    if (literal.empty()) return;
    Piece p;
    p.literal = std::move(literal);
    p.group = group;
    t.pieces_.push_back(std::move(p));
    literal.clear();
  };
  size_t pos = 0;
  while (pos < s.size()) {
    const char c = s[pos];
    const char next = pos + 1 < s.size() ? s[pos + 1] : '\0';
    if ((c == '{' && next == '{') || (c == '}' && next == '}')) {
      literal += c;
      pos += 2;
    } else if (c == '{' && next == '?') {
      if (group >= 0) throw ExprError(pos, "optional segments {? ... ?} do not nest");
      flush();
      group = groups++;
      pos += 2;
    } else if (c == '?' && next == '}' && group >= 0) {
      flush();
      group = -1;
      pos += 2;
    } else if (c == '{') {
      flush();
      const size_t end = find_unquoted(s, pos + 1, '}');
      if (end == std::string_view::npos) throw ExprError(pos, "'{' is not closed: write {{ for a brace");
      const std::string_view inside = s.substr(pos + 1, end - pos - 1);
      const size_t colon = find_unquoted(inside, 0, ':');
      Piece p;
      p.is_placeholder = true;
      p.group = group;
      if (colon != std::string_view::npos) {
        p.format = std::string(inside.substr(colon + 1));
        if (!valid_format(p.format))
          throw ExprError(pos + 1 + colon + 1,
                          fmt::format("unknown format '{}' (known: .Nf, .N%, bytes, khz, p, sh)", p.format));
      }
      try {
        p.expr = Expr::parse(inside.substr(0, colon));
      } catch (const ExprError& e) {
        throw ExprError(pos + 1 + e.offset(), e.what());
      }
      t.pieces_.push_back(std::move(p));
      pos = end + 1;
    } else if (c == '}') {
      throw ExprError(pos, "a lone '}': write }} for a brace");
    } else {
      literal += c;
      ++pos;
    }
  }
  if (group >= 0) throw ExprError(s.size(), "optional segment {? is not closed with ?}");
  flush();
  return t;
}

std::string Template::render(const FactSet& facts, Quoting quoting) const {
  std::vector<std::string> parts(pieces_.size());
  std::vector<bool> dropped;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    if (!p.is_placeholder) {
      parts[i] = p.literal;
      continue;
    }
    const Value v = p.expr.evaluate(facts);
    if (v.is_unknown() && p.group >= 0) {
      if (dropped.size() <= static_cast<size_t>(p.group)) dropped.resize(p.group + 1);
      dropped[p.group] = true;
    }
    parts[i] = format_value(v, p.format, quoting);
  }
  std::string out;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const int g = pieces_[i].group;
    if (g >= 0 && static_cast<size_t>(g) < dropped.size() && dropped[g]) continue;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> Template::fact_names() const {
  std::vector<std::string> names;
  for (const Piece& p : pieces_) {
    if (!p.is_placeholder) continue;
    auto more = p.expr.fact_names();
    names.insert(names.end(), more.begin(), more.end());
  }
  return names;
}

}  // namespace ld::rules
