#include "probes/probe_session.hpp"

#include <sys/mount.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"

namespace ld::probes {
namespace {

struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
};

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { if (fd_ >= 0) close(fd_); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept { std::swap(fd_, o.fd_); return *this; }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

Fd create_map(bpf_map_type type, const char* name, uint32_t key, uint32_t value, uint32_t max) {
  int fd = bpf_map_create(type, name, key, value, max, nullptr);
  if (fd < 0) throw_libbpf_error("shared maps", "creating", fd);
  return Fd(fd);
}

// The 100 ms tick for user-space sampling.
constexpr uint64_t kTickNs = 100'000'000;

struct RunningProbe {
  const ProbeInfo* info;
  std::unique_ptr<Probe> probe;
  std::string status;  // attached | unavailable | disabled
  std::string reason;
};

}  // namespace

void use_shared_maps(bpf_object* obj, const SharedMaps& shared) {
  const std::pair<const char*, int> maps[] = {{"ld_targets", shared.targets},
                                              {"ld_events", shared.events},
                                              {"ld_counters", shared.counters},
                                              {"ld_wakeup", shared.wakeup}};
  for (const auto& [name, fd] : maps) {
    bpf_map* map = bpf_object__find_map_by_name(obj, name);
    if (!map) continue;
    if (int err = bpf_map__reuse_fd(map, fd))
      throw ProbeUnavailable(fmt::format("sharing map {} failed: {}", name, std::strerror(-err)));
  }
}

struct ProbeSession::Impl {
  ProbeOptions options;
  RecordCallback on_record;
  Fd targets, events, counters, wakeup;
  std::vector<RunningProbe> probes;
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring;
  uint64_t malformed_records = 0;
  uint64_t next_tick = 0;
  bool delivering = true;

  static int handle(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    auto* hdr = static_cast<const ld_hdr*>(data);
    if (size < sizeof(ld_hdr) || hdr->size > size || hdr->size < sizeof(ld_hdr)) {
      self->malformed_records++;
      return 0;
    }
    if (self->delivering) self->on_record(*hdr, hdr->size);
    return 0;
  }

  EmitFn emitter() {
    return [this](const ld_hdr& rec, size_t size) {
      if (delivering) on_record(rec, size);
    };
  }

  bool requested(const ProbeInfo& info, bool extra) const {
    if (options.probes.empty()) return info.in_all && !extra;
    return std::find(options.probes.begin(), options.probes.end(), info.name) != options.probes.end();
  }

  void create_shared_maps() {
    targets = create_map(BPF_MAP_TYPE_HASH, "ld_targets", 4, 1, 1024);
    events = create_map(BPF_MAP_TYPE_RINGBUF, "ld_events", 0, 0, options.ringbuf_bytes);
    counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, "ld_counters", 4, sizeof(ld_probe_counters),
                          LD_PROBE_MAX);
    wakeup = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, "ld_wakeup", 4, 8, 1);
    uint8_t one = 1;
    for (uint32_t tgid : options.tgids)
      if (bpf_map_update_elem(targets.get(), &tgid, &one, BPF_ANY))
        throw_libbpf_error("shared maps", "configuring", -errno);
  }

  void start_probes() {
    ProbeContext ctx{options, {targets.get(), events.get(), counters.get(), wakeup.get()}, emitter()};
    std::vector<const ProbeInfo*> all;
    for (const auto& info : probe_registry()) all.push_back(&info);
    const size_t registry_size = all.size();
    for (const auto& info : options.extra_probes) all.push_back(&info);  // options outlives probes
    for (size_t i = 0; i < all.size(); ++i) {
      const ProbeInfo& info = *all[i];
      RunningProbe running{&info, nullptr, "disabled", "not selected by --probes"};
      if (requested(info, i >= registry_size)) {
        auto probe = info.make();
        try {
          probe->start(ctx);
          running.status = "attached";
          running.reason = probe->detail();
          running.probe = std::move(probe);
        } catch (const ProbeUnavailable& e) {
          running.status = "unavailable";
          running.reason = e.what();
        }
      }
      probes.push_back(std::move(running));
    }
  }

  std::vector<ld_probe_counters> read_counters() const {
    int ncpu = libbpf_num_possible_cpus();
    std::vector<ld_probe_counters> per_cpu(ncpu > 0 ? ncpu : 1);
    std::vector<ld_probe_counters> totals(LD_PROBE_MAX);
    for (uint32_t id = 0; id < LD_PROBE_MAX; ++id) {
      if (bpf_map_lookup_elem(counters.get(), &id, per_cpu.data())) continue;
      for (const auto& c : per_cpu) {
        totals[id].submitted += c.submitted;
        totals[id].dropped += c.dropped;
      }
    }
    return totals;
  }
};

ProbeSession::ProbeSession(const ProbeOptions& options, RecordCallback on_record)
    : impl_(std::make_unique<Impl>()) {
  set_libbpf_verbose(options.verbose);
  impl_->options = options;
  impl_->on_record = std::move(on_record);
  if (options.ringbuf_bytes < 4096 || (options.ringbuf_bytes & (options.ringbuf_bytes - 1)))
    throw ProbeError(ProbeError::Kind::Other, "--ringbuf-size must be a power of two >= 4 KiB");
  try {
    impl_->create_shared_maps();
  } catch (const ProbeUnavailable& e) {
    throw ProbeError(ProbeError::Kind::Other, e.what());
  }
  impl_->start_probes();
  bool any = std::any_of(impl_->probes.begin(), impl_->probes.end(),
                         [](const RunningProbe& p) { return p.probe != nullptr; });
  if (!any) {
    std::string why;
    for (const auto& p : impl_->probes)
      if (p.status == "unavailable") why += fmt::format("; {}: {}", p.info->name, p.reason);
    throw ProbeError(ProbeError::Kind::Unsupported, "no probe could be attached" + why);
  }
  impl_->ring.reset(ring_buffer__new(impl_->events.get(), &Impl::handle, impl_.get(), nullptr));
  if (!impl_->ring)
    throw ProbeError(ProbeError::Kind::Other,
                     fmt::format("opening the ring buffer failed: {}", std::strerror(errno)));
}

ProbeSession::~ProbeSession() = default;

int ProbeSession::poll(int timeout_ms) {
  int n = ring_buffer__poll(impl_->ring.get(), timeout_ms);
  if (n < 0 && n != -EINTR) return n;
  // The kernel side wakes us only every N records; take what is there regardless.
  int more = ring_buffer__consume(impl_->ring.get());
  uint64_t now = host::monotonic_now_ns();
  if (now >= impl_->next_tick) {
    impl_->next_tick = now + kTickNs;
    auto emit = impl_->emitter();
    for (auto& p : impl_->probes)
      if (p.probe) p.probe->tick(now, emit);
  }
  return std::max(n, 0) + std::max(more, 0);
}

void ProbeSession::finish() {
  while (poll(0) > 0) {}
  auto emit = impl_->emitter();
  for (auto& p : impl_->probes)
    if (p.probe) p.probe->finish(emit);
  while (poll(0) > 0) {}
}

void ProbeSession::stop_delivery() { impl_->delivering = false; }

void ProbeSession::add_target(uint32_t tgid) {
  uint8_t one = 1;
  bpf_map_update_elem(impl_->targets.get(), &tgid, &one, BPF_ANY);
  for (auto& p : impl_->probes)
    if (p.probe) p.probe->add_target(tgid);
}

std::vector<report::ProbeStatus> ProbeSession::status() const {
  auto totals = impl_->read_counters();
  std::vector<report::ProbeStatus> out;
  for (const auto& p : impl_->probes) {
    report::ProbeStatus s{p.info->name, p.status, p.reason, 0, 0};
    if (p.probe) {
      s.reason = p.probe->detail();  // probes learn as they run (e.g. the GIL address)
      const auto& c = totals[p.info->id];
      s.events = c.submitted - c.dropped + p.probe->user_records();
      s.lost = c.dropped;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ProbeSession::known_probes() {
  std::vector<std::string> names;
  for (const auto& info : probe_registry()) names.push_back(info.name);
  return names;
}

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
