// libcurl, loaded only when the load client first needs it.
#pragma once

#include <curl/curl.h>

namespace ld::bench {

// The libcurl functions the load client calls. `attach` and `record` run as root next to a
// production server and never need an HTTP client: linking libcurl made every run of the
// agent map libcurl and its ~30 dependencies (TLS, Kerberos, LDAP, SSH: ~5 MiB of mapped
// pages, code a privileged process had no use for, and a package a minimal host had to
// install). Only `bench` loads it now.
struct CurlApi {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
  decltype(&::curl_url) url;
  decltype(&::curl_url_set) url_set;
  decltype(&::curl_url_get) url_get;
  decltype(&::curl_url_cleanup) url_cleanup;
  decltype(&::curl_free) free;
};

// Loads libcurl on first use (thread-safe). Throws std::runtime_error with the library's
// name and the fix when it cannot be loaded or lacks a function.
const CurlApi& curl_lib();

}  // namespace ld::bench
