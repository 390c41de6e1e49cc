#include "probes/probe_session.hpp"

#include <sys/mount.h>
#include <sys/random.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "events.h"
#include "sock.skel.h"

namespace ld::probes {
namespace {

// libbpf's log: kept quiet unless --verbose, but the last lines are remembered so that a
// failure can be explained in one line.
bool g_libbpf_verbose = false;
std::string g_libbpf_last_error;
std::mutex g_libbpf_log_mutex;

int libbpf_log(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  vsnprintf(line, sizeof(line), format, args);
  if (g_libbpf_verbose) fputs(line, stderr);
  if (level == LIBBPF_WARN) {
    std::lock_guard lock(g_libbpf_log_mutex);
    g_libbpf_last_error = line;
    while (!g_libbpf_last_error.empty() && g_libbpf_last_error.back() == '\n')
      g_libbpf_last_error.pop_back();
  }
  return 0;
}

struct SockSkelDeleter {
  void operator()(sock_bpf* skel) const { sock_bpf__destroy(skel); }
};
struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
};

uint64_t random_u64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) value = 0x5bd1e9955bd1e995ULL;
  return value;
}

ProbeError load_error(const char* step, int err) {
  err = err < 0 ? -err : err;
  if (err == EPERM || err == EACCES)
    return ProbeError(ProbeError::Kind::Permission,
                      fmt::format("permission denied {} BPF programs: run as root or grant "
                                  "CAP_BPF, CAP_PERFMON (and CAP_SYS_ADMIN for uprobes)",
                                  step));
  std::string detail;
  {
    std::lock_guard lock(g_libbpf_log_mutex);
    detail = g_libbpf_last_error;
  }
  return ProbeError(ProbeError::Kind::Other,
                    fmt::format("{} BPF programs failed: {}{}{}", step, std::strerror(err),
                                detail.empty() ? "" : " (libbpf: ", detail.empty() ? "" : detail + ")"));
}

}  // namespace

struct ProbeSession::Impl {
  ProbeOptions options;
  RecordCallback on_record;
  std::unique_ptr<sock_bpf, SockSkelDeleter> sock;
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring;
  uint64_t malformed_records = 0;
  bool delivering = true;

  static int handle(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    auto* hdr = static_cast<const ld_hdr*>(data);
    if (size < sizeof(ld_hdr) || hdr->size > size) {
      self->malformed_records++;
      return 0;
    }
    if (self->delivering) self->on_record(*hdr, hdr->size);
    return 0;
  }

  bool probe_enabled(const std::string& name) const {
    return options.probes.empty() ||
           std::find(options.probes.begin(), options.probes.end(), name) != options.probes.end() ||
           std::find(options.probes.begin(), options.probes.end(), "all") != options.probes.end();
  }

  void open_sock() {
    sock.reset(sock_bpf__open());
    if (!sock) throw load_error("opening", errno);
    sock->rodata->ld_sock_id_key = random_u64();
    sock->rodata->ld_follow_children = options.follow_children;
    int err = bpf_map__set_max_entries(sock->maps.ld_events, options.ringbuf_bytes);
    if (err) throw load_error("sizing the ring buffer for", err);
    err = sock_bpf__load(sock.get());
    if (err) throw load_error("loading", err);
    uint8_t one = 1;
    for (uint32_t tgid : options.tgids) {
      if (bpf_map__update_elem(sock->maps.ld_targets, &tgid, sizeof(tgid), &one, sizeof(one),
                               BPF_ANY))
        throw load_error("configuring", errno);
    }
    err = sock_bpf__attach(sock.get());
    if (err) throw load_error("attaching", err);
    ring.reset(ring_buffer__new(bpf_map__fd(sock->maps.ld_events), &Impl::handle, this, nullptr));
    if (!ring) throw load_error("opening the ring buffer of", errno);
  }
};

ProbeSession::ProbeSession(const ProbeOptions& options, RecordCallback on_record)
    : impl_(std::make_unique<Impl>()) {
  g_libbpf_verbose = options.verbose;
  libbpf_set_print(libbpf_log);
  impl_->options = options;
  impl_->on_record = std::move(on_record);
  if (options.ringbuf_bytes < 4096 || (options.ringbuf_bytes & (options.ringbuf_bytes - 1)))
    throw ProbeError(ProbeError::Kind::Other, "--ringbuf-size must be a power of two >= 4 KiB");
  if (!impl_->probe_enabled("sock"))
    throw ProbeError(ProbeError::Kind::Other,
                     "the sock probe is required for a token timeline (--probes must include sock)");
  impl_->open_sock();
}

ProbeSession::~ProbeSession() = default;

int ProbeSession::poll(int timeout_ms) {
  int n = ring_buffer__poll(impl_->ring.get(), timeout_ms);
  if (n < 0 && n != -EINTR) return n;
  // The kernel side wakes us only every N records; take what is there regardless.
  int more = ring_buffer__consume(impl_->ring.get());
  return std::max(n, 0) + std::max(more, 0);
}

void ProbeSession::stop_delivery() { impl_->delivering = false; }

void ProbeSession::add_target(uint32_t tgid) {
  uint8_t one = 1;
  bpf_map__update_elem(impl_->sock->maps.ld_targets, &tgid, sizeof(tgid), &one, sizeof(one),
                       BPF_ANY);
}

std::vector<report::ProbeStatus> ProbeSession::status() const {
  int ncpu = libbpf_num_possible_cpus();
  std::vector<ld_probe_counters> per_cpu(ncpu > 0 ? ncpu : 1);
  uint32_t key = LD_PROBE_SOCK;
  report::ProbeStatus sock{"sock", "attached", "socket send/recv syscall tracepoints", 0, 0};
  if (bpf_map__lookup_elem(impl_->sock->maps.ld_counters, &key, sizeof(key), per_cpu.data(),
                           per_cpu.size() * sizeof(ld_probe_counters), 0) == 0) {
    for (const auto& c : per_cpu) {
      sock.events += c.submitted - c.dropped;
      sock.lost += c.dropped;
    }
  }
  return {sock};
}

std::vector<std::string> ProbeSession::known_probes() { return {"sock"}; }

std::string ensure_tracefs() {
  if (access("/sys/kernel/tracing/events", F_OK) == 0 ||
      access("/sys/kernel/debug/tracing/events", F_OK) == 0)
    return "";
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0)
    return "mounted tracefs at /sys/kernel/tracing (tracepoints need it)";
  return fmt::format("tracefs is not mounted and mounting it failed ({}): run "
                     "'mount -t tracefs nodev /sys/kernel/tracing'",
                     std::strerror(errno));
}

}  // namespace ld::probes
