#include "probes/libbpf_util.hpp"

#include <unistd.h>

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include <fmt/format.h>

#include "probes/probe.hpp"

namespace ld::probes {
namespace {

bool g_verbose = false;
// Per thread: probes may load in parallel, and a probe's error must be its own libbpf warning.
thread_local std::string g_last_error;

int libbpf_log(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  va_list for_stderr;
  va_copy(for_stderr, args);
  // Whole to stderr: a verifier log is one message of up to megabytes, and its end says why.
  if (g_verbose) vfprintf(stderr, format, for_stderr);
  va_end(for_stderr);
  vsnprintf(line, sizeof(line), format, args);
  if (level == LIBBPF_WARN) {
    g_last_error = line;
    while (!g_last_error.empty() && g_last_error.back() == '\n') g_last_error.pop_back();
  }
  return 0;
}

}  // namespace

bool tracepoint_exists(const std::string& category, const std::string& name) {
  for (const char* root : {"/sys/kernel/tracing/events/", "/sys/kernel/debug/tracing/events/"})
    if (access((root + category + "/" + name).c_str(), F_OK) == 0) return true;
  return false;
}

void set_libbpf_verbose(bool verbose) {
  g_verbose = verbose;
  libbpf_set_print(libbpf_log);
}

std::string libbpf_last_error() { return g_last_error; }

void throw_libbpf_error(const std::string& probe, const char* step, int err) {
  err = err < 0 ? -err : err;
  if (err == EPERM || err == EACCES)
    throw ProbeError(ProbeError::Kind::Permission,
                     fmt::format("permission denied {} BPF programs: run as root or grant "
                                 "CAP_BPF, CAP_PERFMON (and CAP_SYS_ADMIN for uprobes)",
                                 step));
  std::string detail = libbpf_last_error();
  throw ProbeUnavailable(fmt::format("{} {} failed: {}{}", step, probe, std::strerror(err),
                                     detail.empty() ? "" : " (libbpf: " + detail + ")"));
}

}  // namespace ld::probes
