#include "rules/expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

namespace ld::rules {

const std::vector<Unit>& units() {
  // Facts are in ms, bytes, kHz and fractions (rules/facts.hpp): a unit converts to those.
  static const std::vector<Unit> table{
      {"ns", 1e-6}, {"us", 1e-3}, {"ms", 1},   {"s", 1e3},      {"min", 60e3},      {"h", 3600e3},         {"B", 1},
      {"KB", 1e3},  {"MB", 1e6},  {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"kHz", 1},
      {"MHz", 1e3}, {"GHz", 1e6}, {"%", 0.01},
  };
  return table;
}

Value Value::of(const FactValue& fact) {
  if (const double* n = std::get_if<double>(&fact)) return std::isfinite(*n) ? of(*n) : unknown();
  if (const std::string* s = std::get_if<std::string>(&fact)) return of(*s);
  return of(std::get<bool>(fact));
}

struct Expr::Node {
  enum class Op {
    kLiteral,
    kFact,
    kExists,
    kNot,
    kNeg,
    kAnd,
    kOr,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kContains,
    kStartsWith,
    kEndsWith,
    kIn,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kDefault,
    kMin,
    kMax,
    kAbs,
    kIf,
  };
  Op op = Op::kLiteral;
  Value literal;
  std::string fact;  // kFact, kExists
  std::vector<Node> kids;
  int depth = 1;
};

namespace {

using Node = Expr::Node;
using Op = Node::Op;

// ---------------------------------------------------------------- lexer

enum class Tok {
  kEnd,
  kNumber,
  kString,
  kName,
  kLParen,
  kRParen,
  kComma,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kPlus,
  kMinus,
  kStar,
  kSlash
};

struct Token {
  Tok type = Tok::kEnd;
  size_t offset = 0;
  double number = 0;
  std::string text;  // name or string contents
};

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (pos_ >= s_.size()) break;
      out.push_back(next());
    }
    out.push_back({Tok::kEnd, s_.size(), 0, {}});
    return out;
  }

 private:
  Token next() {
    const size_t start = pos_;
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))))
      return number();
    if (c == '"' || c == '\'') return string();
    if (is_name_start(c)) return name();
    auto two = [&](char second) { return pos_ + 1 < s_.size() && s_[pos_ + 1] == second; };
    auto tok = [&](Tok t, size_t len) {
      pos_ += len;
      return Token{t, start, 0, {}};
    };
    switch (c) {
      case '(': return tok(Tok::kLParen, 1);
      case ')': return tok(Tok::kRParen, 1);
      case ',': return tok(Tok::kComma, 1);
      case '+': return tok(Tok::kPlus, 1);
      case '-': return tok(Tok::kMinus, 1);
      case '*': return tok(Tok::kStar, 1);
      case '/': return tok(Tok::kSlash, 1);
      case '=':
        if (two('=')) return tok(Tok::kEq, 2);
        throw ExprError(start, "'=' is not an operator: compare with '=='");
      case '!':
        if (two('=')) return tok(Tok::kNe, 2);
        throw ExprError(start, "'!' is not an operator: negate with 'not'");
      case '<': return two('=') ? tok(Tok::kLe, 2) : tok(Tok::kLt, 1);
      case '>': return two('=') ? tok(Tok::kGe, 2) : tok(Tok::kGt, 1);
      case '&':
      case '|': throw ExprError(start, fmt::format("'{}' is not an operator: use 'and' / 'or'", c));
      default: break;
    }
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isprint(u)) throw ExprError(start, fmt::format("unexpected character '{}'", c));
    throw ExprError(start, fmt::format("unexpected byte 0x{:02x}", u));
  }

  Token number() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.')) ++pos_;
    // An exponent (1e6), but not the start of a unit name.
    if (pos_ + 1 < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) {
        pos_ = p;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      }
    }
    const std::string digits(s_.substr(start, pos_ - start));
    char* end = nullptr;
    double value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size() || !std::isfinite(value))
      throw ExprError(start, fmt::format("bad number '{}'", digits));
    // A unit follows its number directly: 50ms, 2MiB, 80%.
    size_t unit_end = pos_;
    if (unit_end < s_.size() && s_[unit_end] == '%') ++unit_end;
    else
      while (unit_end < s_.size() && std::isalpha(static_cast<unsigned char>(s_[unit_end]))) ++unit_end;
    if (unit_end > pos_) {
      const std::string_view unit = s_.substr(pos_, unit_end - pos_);
      auto it = std::find_if(units().begin(), units().end(), [&](const Unit& u) { return unit == u.name; });
      if (it == units().end()) {
        std::string known;
        for (const Unit& u : units()) known += std::string(known.empty() ? "" : " ") + u.name;
        throw ExprError(pos_, fmt::format("unknown unit '{}' (known: {})", unit, known));
      }
      value *= it->factor;
      pos_ = unit_end;
    }
    if (pos_ < s_.size() && (is_name_char(s_[pos_]) || s_[pos_] == '.'))
      throw ExprError(pos_, "a number must end before a name: put a space or an operator in between");
    return {Tok::kNumber, start, value, {}};
  }

  Token string() {
    const size_t start = pos_;
    const char quote = s_[pos_++];
    std::string text;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        c = s_[pos_++];
        if (c == 'n') c = '\n';
        else if (c == 't') c = '\t';
      }
      text += c;
    }
    if (pos_ >= s_.size()) throw ExprError(start, "string is not closed");
    ++pos_;
    return {Tok::kString, start, 0, std::move(text)};
  }

  // Dotted names: a segment after a dot may start with a digit (irq.0.count).
  Token name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    while (pos_ + 1 < s_.size() && s_[pos_] == '.' && is_name_char(s_[pos_ + 1])) {
      ++pos_;
      while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') throw ExprError(pos_, "a name cannot end with '.'");
    return {Tok::kName, start, 0, std::string(s_.substr(start, pos_ - start))};
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool is_keyword(const std::string& word) {
  static const char* const kWords[] = {"and", "or", "not", "true", "false", "in", "contains", "startswith", "endswith"};
  return std::any_of(std::begin(kWords), std::end(kWords), [&](const char* k) { return word == k; });
}

// ---------------------------------------------------------------- parser

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Node parse() {
    if (peek().type == Tok::kEnd) throw ExprError(0, "empty expression");
    Node root = parse_or();
    if (peek().type != Tok::kEnd) throw ExprError(peek().offset, "unexpected " + describe(peek()));
    return root;
  }

 private:
  const Token& peek() const { return t_[i_]; }
  const Token& take() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool at_word(const char* word) const { return peek().type == Tok::kName && peek().text == word; }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kEnd: return "end of expression";
      case Tok::kNumber: return "number";
      case Tok::kString: return "string \"" + t.text + "\"";
      case Tok::kName: return "'" + t.text + "'";
      case Tok::kLParen: return "'('";
      case Tok::kRParen: return "')'";
      case Tok::kComma: return "','";
      default: return "operator";
    }
  }

  void expect(Tok type, const char* what) {
    if (peek().type != type)
      throw ExprError(peek().offset, fmt::format("expected {}, found {}", what, describe(peek())));
    take();
  }

  // Guards the recursion of nested parentheses and prefix operators.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser, size_t offset) : p(parser) {
      if (++p.nesting_ > kMaxExprDepth) throw ExprError(offset, "expression nested too deeply");
    }
    ~Nest() { --p.nesting_; }
  };

  static Node make(Op op, std::vector<Node> kids, size_t offset) {
    Node n;
    n.op = op;
    for (const Node& k : kids) n.depth = std::max(n.depth, k.depth + 1);
    if (n.depth > kMaxExprDepth) throw ExprError(offset, "expression nested too deeply");
    n.kids = std::move(kids);
    return n;
  }

  // One precedence level of left-associative binary operators: NEXT (OP NEXT)*.
  template <class OpOf>
  Node binary_level(OpOf op_of, Node (Parser::*next)()) {
    Node left = (this->*next)();
    while (const std::optional<Op> op = op_of(peek())) {
      const size_t at = take().offset;
      left = make(*op, {std::move(left), (this->*next)()}, at);
    }
    return left;
  }

  static std::optional<Op> word_op(const Token& t, const char* word, Op op) {
    return t.type == Tok::kName && t.text == word ? std::optional<Op>(op) : std::nullopt;
  }

  Node parse_or() {
    return binary_level([](const Token& t) { return word_op(t, "or", Op::kOr); }, &Parser::parse_and);
  }

  Node parse_and() {
    return binary_level([](const Token& t) { return word_op(t, "and", Op::kAnd); }, &Parser::parse_not);
  }

  Node parse_not() {
    if (!at_word("not")) return parse_comparison();
    const size_t at = take().offset;
    Nest nest(*this, at);
    return make(Op::kNot, {parse_not()}, at);
  }

  static std::optional<Op> comparison_op(const Token& t) {
    switch (t.type) {
      case Tok::kEq: return Op::kEq;
      case Tok::kNe: return Op::kNe;
      case Tok::kLt: return Op::kLt;
      case Tok::kLe: return Op::kLe;
      case Tok::kGt: return Op::kGt;
      case Tok::kGe: return Op::kGe;
      case Tok::kName:
        if (t.text == "contains") return Op::kContains;
        if (t.text == "startswith") return Op::kStartsWith;
        if (t.text == "endswith") return Op::kEndsWith;
        if (t.text == "in") return Op::kIn;
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  Node parse_comparison() {
    Node left = parse_sum();
    auto op = comparison_op(peek());
    if (!op) return left;
    const size_t at = take().offset;
    Node result;
    if (*op == Op::kIn) {
      std::vector<Node> kids{std::move(left)};
      expect(Tok::kLParen, "'(' after 'in'");
      kids.push_back(parse_sum());
      while (peek().type == Tok::kComma) {
        take();
        kids.push_back(parse_sum());
      }
      expect(Tok::kRParen, "')' closing the 'in' list");
      result = make(Op::kIn, std::move(kids), at);
    } else {
      result = make(*op, {std::move(left), parse_sum()}, at);
    }
    if (comparison_op(peek())) throw ExprError(peek().offset, "comparisons do not chain: join them with 'and'");
    return result;
  }

  static std::optional<Op> symbol_op(const Token& t, Tok first, Op first_op, Tok second, Op second_op) {
    if (t.type == first) return first_op;
    if (t.type == second) return second_op;
    return std::nullopt;
  }

  Node parse_sum() {
    return binary_level([](const Token& t) { return symbol_op(t, Tok::kPlus, Op::kAdd, Tok::kMinus, Op::kSub); },
                        &Parser::parse_product);
  }

  Node parse_product() {
    return binary_level([](const Token& t) { return symbol_op(t, Tok::kStar, Op::kMul, Tok::kSlash, Op::kDiv); },
                        &Parser::parse_unary);
  }

  Node parse_unary() {
    if (peek().type != Tok::kMinus) return parse_primary();
    const size_t at = take().offset;
    Nest nest(*this, at);
    return make(Op::kNeg, {parse_unary()}, at);
  }

  static Node literal(Value v) {
    Node n;
    n.literal = std::move(v);
    return n;
  }

  Node parse_primary() {
    const Token& t = peek();
    switch (t.type) {
      case Tok::kNumber: return literal(Value::of(take().number));
      case Tok::kString: return literal(Value::of(take().text));
      case Tok::kLParen: {
        const size_t at = take().offset;
        Nest nest(*this, at);
        Node inner = parse_or();
        expect(Tok::kRParen, "')'");
        return inner;
      }
      case Tok::kName: break;
      default: throw ExprError(t.offset, "expected a value, found " + describe(t));
    }
    if (t.text == "true" || t.text == "false") return literal(Value::of(take().text == "true"));
    if (is_keyword(t.text)) throw ExprError(t.offset, "expected a value, found " + describe(t));
    const Token name = take();
    if (peek().type == Tok::kLParen) return call(name);
    Node n;
    n.op = Op::kFact;
    n.fact = name.text;
    return n;
  }

  // exists(NAME), fact("NAME"), default(a, b), min(a, ...), max(a, ...), abs(a), if(c, a, b)
  Node call(const Token& name) {
    Nest nest(*this, name.offset);
    take();  // (
    if (name.text == "exists" || name.text == "fact") {
      const Token arg = take();
      const bool ok = name.text == "exists" ? arg.type == Tok::kName && !is_keyword(arg.text)
                                            : arg.type == Tok::kString && !arg.text.empty();
      if (!ok)
        throw ExprError(arg.offset, name.text == "exists" ? "exists() takes a fact name: exists(cpu.governor)"
                                                          : "fact() takes a quoted fact name: fact(\"a-b.c\")");
      expect(Tok::kRParen, "')'");
      Node n;
      n.op = name.text == "exists" ? Op::kExists : Op::kFact;
      n.fact = arg.text;
      return n;
    }
    std::vector<Node> args;
    if (peek().type != Tok::kRParen) {
      args.push_back(parse_or());
      while (peek().type == Tok::kComma) {
        take();
        args.push_back(parse_or());
      }
    }
    expect(Tok::kRParen, "')'");
    struct Fn {
      const char* name;
      Op op;
      size_t min_args, max_args;
    };
    static const Fn kFunctions[] = {{"default", Op::kDefault, 2, 2},
                                    {"min", Op::kMin, 1, 16},
                                    {"max", Op::kMax, 1, 16},
                                    {"abs", Op::kAbs, 1, 1},
                                    {"if", Op::kIf, 3, 3}};
    for (const Fn& fn : kFunctions) {
      if (name.text != fn.name) continue;
      if (args.size() < fn.min_args || args.size() > fn.max_args)
        throw ExprError(name.offset,
                        fmt::format("{}() takes {} argument{}", fn.name,
                                    fn.min_args == fn.max_args ? std::to_string(fn.min_args)
                                                               : fmt::format("{} to {}", fn.min_args, fn.max_args),
                                    fn.max_args == 1 ? "" : "s"));
      return make(fn.op, std::move(args), name.offset);
    }
    throw ExprError(name.offset,
                    fmt::format("unknown function '{}' (known: exists, fact, default, min, max, abs, if)", name.text));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int nesting_ = 0;
};

// ---------------------------------------------------------------- evaluation

// Strings that spell a number compare as numbers with numbers (a sysctl read as text).
std::optional<double> as_number(const Value& v) {
  if (v.kind == Value::Kind::kNumber) return v.number;
  if (v.kind != Value::Kind::kString || v.text.empty()) return std::nullopt;
  const char* begin = v.text.c_str();
  char* end = nullptr;
  const double n = std::strtod(begin, &end);
  while (*end && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (end == begin || *end != '\0' || !std::isfinite(n)) return std::nullopt;
  return n;
}

Value compare(Op op, const Value& a, const Value& b) {
  if (a.is_unknown() || b.is_unknown()) return Value::unknown();
  using K = Value::Kind;
  if (a.kind == K::kString && b.kind == K::kString) {
    if (op == Op::kEq) return Value::of(a.text == b.text);
    if (op == Op::kNe) return Value::of(a.text != b.text);
    if (op == Op::kContains) return Value::of(a.text.find(b.text) != std::string::npos);
    if (op == Op::kStartsWith) return Value::of(a.text.rfind(b.text, 0) == 0);
    if (op == Op::kEndsWith)
      return Value::of(a.text.size() >= b.text.size() &&
                       a.text.compare(a.text.size() - b.text.size(), b.text.size(), b.text) == 0);
  }
  if (a.kind == K::kBool && b.kind == K::kBool) {
    if (op == Op::kEq) return Value::of(a.flag == b.flag);
    if (op == Op::kNe) return Value::of(a.flag != b.flag);
    return Value::unknown();
  }
  if (op == Op::kContains || op == Op::kStartsWith || op == Op::kEndsWith) return Value::unknown();
  auto x = as_number(a), y = as_number(b);
  if (!x || !y) return Value::unknown();
  switch (op) {
    case Op::kEq: return Value::of(*x == *y);
    case Op::kNe: return Value::of(*x != *y);
    case Op::kLt: return Value::of(*x < *y);
    case Op::kLe: return Value::of(*x <= *y);
    case Op::kGt: return Value::of(*x > *y);
    case Op::kGe: return Value::of(*x >= *y);
    default: return Value::unknown();
  }
}

Value arithmetic(Op op, const Value& a, const Value& b) {
  if (a.kind != Value::Kind::kNumber || b.kind != Value::Kind::kNumber) return Value::unknown();
  double r = 0;
  switch (op) {
    case Op::kAdd: r = a.number + b.number; break;
    case Op::kSub: r = a.number - b.number; break;
    case Op::kMul: r = a.number * b.number; break;
    default:
      if (b.number == 0) return Value::unknown();
      r = a.number / b.number;
  }
  return std::isfinite(r) ? Value::of(r) : Value::unknown();
}

Value eval(const Node& n, const FactSet& facts);

// Three-valued and/or: a known false (and) or a known true (or) decides alone.
Value logic(bool is_and, const Node& n, const FactSet& facts) {
  const Value a = eval(n.kids[0], facts);
  auto decides = [&](const Value& v) { return v.kind == Value::Kind::kBool && v.flag != is_and; };
  if (decides(a)) return a;
  const Value b = eval(n.kids[1], facts);
  if (decides(b)) return b;
  if (a.kind == Value::Kind::kBool && b.kind == Value::Kind::kBool) return Value::of(is_and);
  return Value::unknown();
}

Value in_list(const Node& n, const FactSet& facts) {
  const Value needle = eval(n.kids[0], facts);
  bool unknown = needle.is_unknown();
  for (size_t i = 1; i < n.kids.size() && !unknown; ++i) {
    const Value match = compare(Op::kEq, needle, eval(n.kids[i], facts));
    if (match.is_true()) return match;
    if (match.is_unknown()) unknown = true;
  }
  return unknown ? Value::unknown() : Value::of(false);
}

Value extreme(bool want_max, const Node& n, const FactSet& facts) {
  std::optional<double> best;
  for (const Node& kid : n.kids) {
    const Value v = eval(kid, facts);
    if (v.kind != Value::Kind::kNumber) return Value::unknown();
    if (!best || (want_max ? v.number > *best : v.number < *best)) best = v.number;
  }
  return Value::of(*best);
}

Value eval(const Node& n, const FactSet& facts) {
  switch (n.op) {
    case Op::kLiteral: return n.literal;
    case Op::kFact: {
      const FactValue* v = facts.get(n.fact);
      return v ? Value::of(*v) : Value::unknown();
    }
    case Op::kExists: return Value::of(facts.has(n.fact));
    case Op::kNot: {
      const Value v = eval(n.kids[0], facts);
      return v.kind == Value::Kind::kBool ? Value::of(!v.flag) : Value::unknown();
    }
    case Op::kNeg: {
      const Value v = eval(n.kids[0], facts);
      return v.kind == Value::Kind::kNumber ? Value::of(-v.number) : Value::unknown();
    }
    case Op::kAnd: return logic(true, n, facts);
    case Op::kOr: return logic(false, n, facts);
    case Op::kIn: return in_list(n, facts);
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv: return arithmetic(n.op, eval(n.kids[0], facts), eval(n.kids[1], facts));
    case Op::kDefault: {
      Value v = eval(n.kids[0], facts);
      return v.is_unknown() ? eval(n.kids[1], facts) : v;
    }
    case Op::kMin: return extreme(false, n, facts);
    case Op::kMax: return extreme(true, n, facts);
    case Op::kAbs: {
      const Value v = eval(n.kids[0], facts);
      return v.kind == Value::Kind::kNumber ? Value::of(std::fabs(v.number)) : Value::unknown();
    }
    case Op::kIf: {  // an unknown condition leaves the value unknown
      const Value c = eval(n.kids[0], facts);
      if (c.kind != Value::Kind::kBool) return Value::unknown();
      return eval(n.kids[c.flag ? 1 : 2], facts);
    }
    default: return compare(n.op, eval(n.kids[0], facts), eval(n.kids[1], facts));
  }
}

void collect_names(const Node& n, std::vector<std::string>& out) {
  if (n.op == Op::kFact || n.op == Op::kExists) out.push_back(n.fact);
  for (const Node& kid : n.kids) collect_names(kid, out);
}

}  // namespace

Expr Expr::parse(std::string_view text) {
  if (text.size() > kMaxExprLength)
    throw ExprError(kMaxExprLength, fmt::format("expression longer than {} bytes", kMaxExprLength));
  Expr e;
  e.root_ = std::make_shared<const Node>(Parser(Lexer(text).run()).parse());
  e.text_ = std::string(text);
  return e;
}

Value Expr::evaluate(const FactSet& facts) const { return root_ ? eval(*root_, facts) : Value::unknown(); }

std::vector<std::string> Expr::fact_names() const {
  std::vector<std::string> names;
  if (root_) collect_names(*root_, names);
  return names;
}

}  // namespace ld::rules
