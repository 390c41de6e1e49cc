#include "audit/nginx_conf.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include <fmt/format.h>

namespace ld::audit {
namespace {

// Bounds that keep a hostile or broken config from exhausting the stack or the disk.
constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxIncludeDepth = 16;
constexpr size_t kMaxFiles = 512;

enum class TokenKind { kWord, kSemicolon, kOpen, kClose, kEnd, kError };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;  // the word, or the error message
  int line = 0;
};

class Tokenizer {
 public:
  explicit Tokenizer(std::string_view text) : text_(text) {}

  Token next() {
    skip_blanks_and_comments();
    Token t;
    t.line = line_;
    if (pos_ >= text_.size()) return t;
    char c = text_[pos_];
    if (c == ';' || c == '{' || c == '}') {
      ++pos_;
      t.kind = c == ';' ? TokenKind::kSemicolon : c == '{' ? TokenKind::kOpen : TokenKind::kClose;
      return t;
    }
    if (c == '"' || c == '\'') return quoted(c);
    return word();
  }

 private:
  void skip_blanks_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') ++line_;
      if (c == '#') {  // a comment only where a token could start
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
        continue;
      }
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return;
      ++pos_;
    }
  }

  Token quoted(char quote) {
    Token t{TokenKind::kWord, "", line_};
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c == '\n') ++line_;
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        if (e == '\n') ++line_;
        t.text.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
        continue;
      }
      t.text.push_back(c);
    }
    if (pos_ >= text_.size()) return {TokenKind::kError, "unterminated quoted string", t.line};
    ++pos_;  // closing quote
    return t;
  }

  Token word() {
    Token t{TokenKind::kWord, "", line_};
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '}') break;
      if (c == '{') {
        // "${var}" is a variable, not a block.
        if (t.text.empty() || t.text.back() != '$') break;
        auto close = text_.find('}', pos_);
        if (close == std::string_view::npos) return {TokenKind::kError, "unterminated ${...} variable", t.line};
        t.text.append(text_.substr(pos_, close + 1 - pos_));
        pos_ = close + 1;
        continue;
      }
      if (c == '\\' && pos_ + 1 < text_.size()) {
        t.text.push_back(c);
        t.text.push_back(text_[pos_ + 1]);
        if (text_[pos_ + 1] == '\n') ++line_;
        pos_ += 2;
        continue;
      }
      t.text.push_back(c);
      ++pos_;
    }
    return t;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, std::vector<std::string>& errors)
      : tokens_(text), file_(file), errors_(errors) {}

  std::vector<NginxDirective> parse() {
    std::vector<NginxDirective> top;
    block(top, 0);
    return top;
  }

 private:
  // Fills `into` until the matching '}' (depth > 0) or the end of the file (depth 0).
  // false after an error: the caller stops too.
  bool block(std::vector<NginxDirective>& into, size_t depth) {
    std::vector<Token> words;
    while (true) {
      Token t = tokens_.next();
      switch (t.kind) {
        case TokenKind::kError: return fail(t.line, t.text);
        case TokenKind::kWord: words.push_back(std::move(t)); break;
        case TokenKind::kSemicolon:
          if (words.empty()) return fail(t.line, "unexpected \";\"");
          into.push_back(directive(words, false));
          words.clear();
          break;
        case TokenKind::kOpen: {
          if (words.empty()) return fail(t.line, "unexpected \"{\"");
          if (depth + 1 >= kMaxDepth) return fail(t.line, "blocks nested too deeply");
          into.push_back(directive(words, true));
          words.clear();
          if (!block(into.back().children, depth + 1)) return false;
          break;
        }
        case TokenKind::kClose:
          if (!words.empty()) return fail(t.line, "unexpected \"}\" (missing \";\" before it?)");
          if (depth == 0) return fail(t.line, "unexpected \"}\"");
          return true;
        case TokenKind::kEnd:
          if (!words.empty())
            return fail(t.line, fmt::format("unexpected end of file after \"{}\" (missing \";\"?)", words[0].text));
          if (depth > 0) return fail(t.line, "unexpected end of file, expecting \"}\"");
          return true;
      }
    }
  }

  NginxDirective directive(const std::vector<Token>& words, bool is_block) {
    NginxDirective d;
    d.name = words[0].text;
    for (size_t i = 1; i < words.size(); ++i) d.args.push_back(words[i].text);
    d.file = file_;
    d.line = words[0].line;
    d.is_block = is_block;
    return d;
  }

  bool fail(int line, const std::string& what) {
    errors_.push_back(fmt::format("{}:{}: {}", file_, line, what));
    return false;
  }

  Tokenizer tokens_;
  const std::string& file_;
  std::vector<std::string>& errors_;
};

// ---- includes

class Loader {
 public:
  Loader(const HostTree& tree, NginxConfig& config, std::string conf_dir)
      : tree_(tree), config_(config), conf_dir_(std::move(conf_dir)) {}

  std::vector<NginxDirective> load(const std::string& path, const std::string& included_at) {
    if (config_.files.size() >= kMaxFiles) {
      error(included_at, fmt::format("include {}: more than {} files, stopped", path, kMaxFiles));
      return {};
    }
    if (std::find(chain_.begin(), chain_.end(), path) != chain_.end()) {
      error(included_at, fmt::format("include {}: includes itself", path));
      return {};
    }
    FileText file = tree_.read(path);
    if (!file.ok) {
      error(included_at, fmt::format("cannot read {}: {}", path, file.error));
      return {};
    }
    config_.files.push_back(path);
    auto directives = parse_nginx(file.text, path, config_.errors);
    chain_.push_back(path);
    expand(directives);
    chain_.pop_back();
    return directives;
  }

 private:
  void expand(std::vector<NginxDirective>& directives) {
    std::vector<NginxDirective> out;
    for (auto& d : directives) {
      if (d.name == "include" && !d.is_block) {
        std::string at = fmt::format("{}:{}", d.file, d.line);
        if (d.args.size() != 1) {
          error(at, "include takes one file or pattern");
          continue;
        }
        if (chain_.size() > kMaxIncludeDepth) {
          error(at, "includes nested too deeply");
          continue;
        }
        for (const auto& path : resolve(d.args[0], at))
          for (auto& inc : load(path, at)) out.push_back(std::move(inc));
        continue;
      }
      expand(d.children);
      out.push_back(std::move(d));
    }
    directives = std::move(out);
  }

  std::vector<std::string> resolve(const std::string& pattern, const std::string& at) {
    std::string path = pattern.empty() || pattern[0] == '/' ? pattern : conf_dir_ + "/" + pattern;
    if (path.find_first_of("*?[") != std::string::npos) return tree_.glob(path);  // none is fine
    return {path};  // a missing plain file is reported by load()
  }

  void error(const std::string& at, const std::string& what) {
    config_.errors.push_back(at.empty() ? what : at + ": " + what);
  }

  const HostTree& tree_;
  NginxConfig& config_;
  std::string conf_dir_;
  std::vector<std::string> chain_;
};

// ---- effective settings

bool is_context(const std::string& name) {
  return name == "http" || name == "server" || name == "location" || name == "if" || name == "limit_except";
}

std::string describe(const NginxDirective& block) {
  std::string args;
  for (const auto& a : block.args) args += " " + a;
  return block.name + args;
}

struct Scope {
  std::string where;  // "server example.com, location /v1/"
  std::map<std::string, const NginxDirective*> set;
};

void collect(const std::vector<NginxDirective>& directives, std::vector<Scope>& scopes,
             std::vector<ProxiedBlock>& out) {
  Scope& scope = scopes.back();
  const NginxDirective* proxy_pass = nullptr;
  std::string server_name;
  for (const auto& d : directives) {
    if (d.is_block) continue;
    if (d.name == "proxy_pass") proxy_pass = &d;
    if (d.name == "server_name" && !d.args.empty()) server_name = d.args[0];
    for (const auto& [name, _] : nginx_sse_directives())
      if (d.name == name) scope.set[name] = &d;  // the last one wins, as in nginx
  }
  if (!server_name.empty()) scope.where += " " + server_name;
  const std::string where = scope.where;  // scopes grows below: no reference into it
  if (proxy_pass) {
    ProxiedBlock block;
    block.where = scope.where;
    block.at = fmt::format("{}:{}", proxy_pass->file, proxy_pass->line);
    for (const auto& [name, default_value] : nginx_sse_directives()) {
      NginxSetting s{default_value, block.at, true};
      for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
        auto found = it->set.find(name);
        if (found == it->set.end()) continue;
        const NginxDirective& d = *found->second;
        s.value.clear();
        for (const auto& a : d.args) s.value += (s.value.empty() ? "" : " ") + a;
        s.at = fmt::format("{}:{}", d.file, d.line);
        s.is_default = false;
        break;
      }
      block.settings[name] = s;
    }
    out.push_back(std::move(block));
  }
  for (const auto& d : directives) {
    if (!d.is_block || !is_context(d.name)) continue;
    Scope inner;
    inner.where = where.empty() ? describe(d) : where + ", " + describe(d);
    if (d.name == "http") inner.where.clear();  // every proxied block is inside http
    scopes.push_back(std::move(inner));
    collect(d.children, scopes, out);
    scopes.pop_back();
  }
}

}  // namespace

std::vector<NginxDirective> parse_nginx(std::string_view text, const std::string& file,
                                        std::vector<std::string>& errors) {
  return Parser(text, file, errors).parse();
}

NginxConfig load_nginx_config(const HostTree& tree, const std::string& main_path) {
  NginxConfig config;
  std::string conf_dir = main_path.substr(0, main_path.rfind('/'));
  if (main_path.find('/') == std::string::npos) conf_dir = ".";
  config.directives = Loader(tree, config, conf_dir).load(main_path, "");
  return config;
}

const std::vector<std::pair<std::string, std::string>>& nginx_sse_directives() {
  // nginx's defaults (proxy_buffer_size is one memory page: 4k on x86-64).
  static const std::vector<std::pair<std::string, std::string>> directives{
      {"proxy_buffering", "on"},    {"proxy_buffer_size", "4k"},   {"proxy_read_timeout", "60s"},
      {"keepalive_timeout", "75s"}, {"proxy_http_version", "1.0"},
  };
  return directives;
}

std::vector<ProxiedBlock> proxied_blocks(const NginxConfig& config) {
  std::vector<ProxiedBlock> out;
  std::vector<Scope> scopes(1);
  collect(config.directives, scopes, out);
  return out;
}

std::optional<double> nginx_time_ms(std::string_view text) {
  static const std::pair<std::string_view, double> kUnits[] = {
      {"ms", 1},      {"s", 1e3},         {"m", 60e3},         {"h", 3600e3},
      {"d", 86400e3}, {"w", 7 * 86400e3}, {"M", 30 * 86400e3}, {"y", 365 * 86400e3}};
  double total = 0;
  bool any = false;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    size_t digits = pos;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == pos || digits - pos > 12) return std::nullopt;
    double number = 0;
    std::from_chars(text.data() + pos, text.data() + digits, number);
    size_t unit_end = digits;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end]))) ++unit_end;
    std::string_view unit = text.substr(digits, unit_end - digits);
    double scale = unit.empty() ? 1e3 : 0;
    for (const auto& [name, ms] : kUnits)
      if (unit == name) scale = ms;
    if (scale == 0) return std::nullopt;
    total += number * scale;
    any = true;
    pos = unit_end;
  }
  if (!any) return std::nullopt;
  return total;
}

}  // namespace ld::audit
