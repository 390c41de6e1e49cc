// nginx.* facts: the SSE-relevant settings of the proxied blocks of the nginx config.
// With several proxied blocks, each fact holds the value that is worst for streaming (the
// block a rule should point at) and .at names its file:line.
#include <fmt/format.h>

#include "audit/fact_sink.hpp"
#include "audit/nginx_conf.hpp"
#include "util/parse.hpp"

namespace ld::audit {
namespace {

// The number a setting is compared by (bytes, ms), if it has one.
struct Measure {
  const char* suffix;  // "_bytes" / "_ms" / nullptr: nginx.proxy_read_timeout_ms
  bool larger_is_worse;
};

Measure measure_of(const std::string& name) {
  if (name == "proxy_buffer_size") return {"_bytes", true};
  if (name == "proxy_read_timeout") return {"_ms", false};  // a short timeout cuts long generations
  if (name == "keepalive_timeout") return {"_ms", true};    // idle connections pile up
  return {nullptr, false};
}

std::optional<double> number_of(const std::string& name, const std::string& value) {
  std::string first = value.substr(0, value.find(' '));  // keepalive_timeout 65 [header_timeout]
  if (name == "proxy_buffer_size") {
    auto bytes = util::parse_size(first);
    return bytes ? std::optional<double>(double(*bytes)) : std::nullopt;
  }
  return nginx_time_ms(first);
}

// proxy_buffering "on" holds tokens back; HTTP/1.0 to the upstream disables keep-alive there.
bool string_worse(const std::string& name, const std::string& a, const std::string& b) {
  if (name == "proxy_buffering") return a == "on" && b != "on";
  if (name == "proxy_http_version") return a < b;
  return false;
}

void set_setting(FactSink& sink, const std::string& name, const ProxiedBlock& block) {
  const NginxSetting& s = block.settings.at(name);
  std::string fact = "nginx." + name;
  sink.set(fact, s.value, s.at);
  sink.set(fact + ".at", s.at, s.at);
  sink.set(fact + ".default", s.is_default, s.at);
  // For rule text: where the value comes from, in words.
  sink.set(fact + ".origin", s.is_default ? "nginx's default; proxy_pass at " + s.at : "set at " + s.at, s.at);
  sink.set(fact + ".block", block.where, block.at);
  Measure m = measure_of(name);
  if (!m.suffix) return;
  if (auto n = number_of(name, s.value)) sink.set(fact + m.suffix, *n, s.at);
  else sink.warn(fmt::format("{}: {} {}: not a valid value", s.at, name, s.value));
}

}  // namespace

void read_nginx_facts(FactSink& sink, const std::string& nginx_conf) {
  const std::string main = nginx_conf.empty() ? "/etc/nginx/nginx.conf" : nginx_conf;
  FileText probe = sink.tree().read(main, 1);
  if (!probe.ok && probe.missing && nginx_conf.empty()) {
    sink.set("nginx.found", false, main);  // no nginx in front: nothing to check
    return;
  }
  if (!probe.ok) return sink.unknown("nginx.*", main, probe.error);
  NginxConfig config = load_nginx_config(sink.tree(), main);
  for (const auto& e : config.errors) sink.warn("nginx: " + e);
  sink.set("nginx.found", true, main);
  sink.set("nginx.config", main, main);
  sink.set("nginx.files", config.files.size(), main);
  sink.set("nginx.valid", config.errors.empty(), main);
  auto blocks = proxied_blocks(config);
  sink.set("nginx.proxied_blocks", blocks.size(), main);
  if (blocks.empty()) return;
  for (const auto& [name, _] : nginx_sse_directives()) {
    const ProxiedBlock* worst = &blocks[0];
    for (const auto& b : blocks) {
      const std::string& v = b.settings.at(name).value;
      const std::string& w = worst->settings.at(name).value;
      Measure m = measure_of(name);
      if (m.suffix) {
        // An invalid value is the worst of all: nginx -t rejects it.
        auto nv = number_of(name, v), nw = number_of(name, w);
        if (!nw) break;
        if (!nv || (m.larger_is_worse ? *nv > *nw : *nv < *nw)) worst = &b;
      } else if (string_worse(name, v, w)) {
        worst = &b;
      }
    }
    set_setting(sink, name, *worst);
  }
}

}  // namespace ld::audit
