#include "bench/curl_api.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace ld::bench {
namespace {

// libcurl4 (OpenSSL) and libcurl3-gnutls install the same API under these sonames; the
// unversioned name exists only with a -dev package.
constexpr const char* kSonames[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};

template <typename Fn>
void resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!out) throw std::runtime_error(fmt::format("bench: libcurl has no {} (libcurl 7.62 or newer is needed)", name));
}

CurlApi load() {
  void* handle = nullptr;
  std::string errors;
  for (const char* soname : kSonames) {
    // RTLD_NODELETE: the library stays for the process's life, as a linked one would.
    if ((handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))) break;
    if (const char* e = dlerror()) errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e);
  }
  if (!handle)
    throw std::runtime_error(
        fmt::format("bench: the load client needs libcurl, which could not be loaded ({}); install it "
                    "(Debian/Ubuntu: apt-get install libcurl4)",
                    errors));
  CurlApi api{};
  resolve(handle, "curl_global_init", api.global_init);
  resolve(handle, "curl_easy_init", api.easy_init);
  resolve(handle, "curl_easy_setopt", api.easy_setopt);
  resolve(handle, "curl_easy_getinfo", api.easy_getinfo);
  resolve(handle, "curl_easy_perform", api.easy_perform);
  resolve(handle, "curl_easy_cleanup", api.easy_cleanup);
  resolve(handle, "curl_easy_strerror", api.easy_strerror);
  resolve(handle, "curl_slist_append", api.slist_append);
  resolve(handle, "curl_slist_free_all", api.slist_free_all);
  resolve(handle, "curl_url", api.url);
  resolve(handle, "curl_url_set", api.url_set);
  resolve(handle, "curl_url_get", api.url_get);
  resolve(handle, "curl_url_cleanup", api.url_cleanup);
  resolve(handle, "curl_free", api.free);
  return api;
}

}  // namespace

const CurlApi& curl_lib() {
  static std::once_flag once;
  static CurlApi api{};
  std::call_once(once, [] { api = load(); });  // a throw leaves the flag unset: the next call retries
  return api;
}

}  // namespace ld::bench
