// nginx configuration: a tokenizer/parser for nginx's syntax (comments, quotes, escapes,
// blocks), `include` with globs resolved under the audited tree, and the settings that decide
// whether SSE tokens reach the client one by one: the effective proxy_buffering,
// proxy_buffer_size, proxy_read_timeout, keepalive_timeout and proxy_http_version of every
// block that proxies (has proxy_pass), with the file:line each value comes from.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/host_tree.hpp"

namespace ld::audit {

struct NginxDirective {
  std::string name;
  std::vector<std::string> args;
  std::string file;  // host path
  int line = 0;
  bool is_block = false;
  std::vector<NginxDirective> children;
};

// One file's text (includes not followed). Problems are appended to `errors` as
// "file:line: what"; parsing stops at the first one (nginx would refuse the file too) and
// keeps what came before.
std::vector<NginxDirective> parse_nginx(std::string_view text, const std::string& file,
                                        std::vector<std::string>& errors);

struct NginxConfig {
  std::vector<NginxDirective> directives;  // the main context, includes expanded in place
  std::vector<std::string> files;          // every file read, the main one first
  std::vector<std::string> errors;         // "file:line: what"
};
// Reads `main_path` (a host path) and its includes: relative include paths are relative to
// the main file's directory (nginx's conf prefix), absolute ones are under the tree.
NginxConfig load_nginx_config(const HostTree& tree, const std::string& main_path);

struct NginxSetting {
  std::string value;  // as written (args joined by ' '), or nginx's default
  std::string at;     // file:line of the directive, or of proxy_pass when defaulted
  bool is_default = false;
};

struct ProxiedBlock {
  std::string where;                             // "server example.com, location /v1/"
  std::string at;                                // file:line of its proxy_pass
  std::map<std::string, NginxSetting> settings;  // every name in nginx_sse_directives()
};
std::vector<ProxiedBlock> proxied_blocks(const NginxConfig& config);

// The directives proxied_blocks() resolves, with nginx's defaults.
const std::vector<std::pair<std::string, std::string>>& nginx_sse_directives();

// nginx time ("60s", "1m30s", "500ms", "75" = seconds) in ms; nullopt when malformed.
std::optional<double> nginx_time_ms(std::string_view text);

}  // namespace ld::audit
