// libFuzzer target: any bytes as an nginx config. The parser and the effective-settings walk
// must never throw or crash; every error names the file and a line inside the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "audit/nginx_conf.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  ld::audit::NginxConfig config;
  config.directives = ld::audit::parse_nginx(text, "fuzz.conf", config.errors);
  check(config.errors.size() <= 1);  // parsing stops at the first error
  for (const auto& e : config.errors) check(e.rfind("fuzz.conf:", 0) == 0);
  for (const auto& block : ld::audit::proxied_blocks(config))
    check(block.settings.size() == ld::audit::nginx_sse_directives().size());
  ld::audit::nginx_time_ms(text.substr(0, 64));
  return 0;
}
