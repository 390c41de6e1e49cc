#include "probes/probe_session.hpp"

#include <libelf.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "probes/core_btf.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

struct RingBufferDeleter {
  void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
};

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

Fd create_map(bpf_map_type type, const char* name, uint32_t key, uint32_t value, uint32_t max, uint32_t flags = 0) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
  int fd = bpf_map_create(type, name, key, value, max, &opts);
  if (fd < 0) throw_libbpf_error("shared maps", "creating", fd);
  return Fd(fd);
}

// The traced tgids as the programs read them (ld_targets, bpf/common.bpf.h): one bit per tgid
// in an mmapped array map. Bits are set with atomic ORs: the fork hook sets bits of the same
// words from the kernel meanwhile.
class TargetBitmap {
 public:
  static constexpr size_t kBytes = LD_TARGET_WORDS * sizeof(uint64_t);

  TargetBitmap()
      : fd_(create_map(BPF_MAP_TYPE_ARRAY, "ld_targets", 4, sizeof(uint64_t), LD_TARGET_WORDS, BPF_F_MMAPABLE)) {
    void* words = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (words == MAP_FAILED) throw_libbpf_error("shared maps", "mapping the target set", -errno);
    words_ = static_cast<uint64_t*>(words);
  }
  ~TargetBitmap() { munmap(words_, kBytes); }
  TargetBitmap(const TargetBitmap&) = delete;
  TargetBitmap& operator=(const TargetBitmap&) = delete;

  // Every pid fits: LD_TARGET_WORDS covers PID_MAX_LIMIT.
  void add(uint32_t tgid) {
    if (LD_TARGET_WORD(tgid) < LD_TARGET_WORDS)
      __atomic_fetch_or(&words_[LD_TARGET_WORD(tgid)], LD_TARGET_BIT(tgid), __ATOMIC_RELAXED);
  }
  int fd() const { return fd_.get(); }

 private:
  Fd fd_;
  uint64_t* words_ = nullptr;
};

// The tick for user-space sampling: every ProbeOptions::tick_ns unless a probe asks sooner
// (Probe::next_tick_ns).
constexpr uint64_t kMinTickNs = 10 * util::kNsPerMs;  // a probe's deadline in the past: not a busy loop

// SIGINT/SIGTERM go to the main thread (the recorder's handler); the helper threads that load
// or detach probes only do that.
void block_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

struct RunningProbe {
  const ProbeInfo* info;
  std::unique_ptr<Probe> probe;
  model::ProbeState status = model::ProbeState::kDisabled;
  std::string reason;
  double start_ms = 0;  // open + load + attach of this probe
  double began_ms = 0;  // when that began, from the session's start (for --verbose)
};

}  // namespace

void use_shared_maps(bpf_object* obj, const SharedMaps& shared) {
  const std::pair<const char*, int> maps[] = {
      {"ld_targets", shared.targets}, {"ld_events", shared.events}, {"ld_counters", shared.counters}};
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
  std::unique_ptr<TargetBitmap> targets;
  Fd events, counters;
  std::vector<RunningProbe> probes;
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring;
  uint64_t malformed_records = 0;
  uint64_t next_tick = 0;
  bool delivering = true;
  bool finished = false;  // the probes' finish() ran: no tick after it

  static int handle(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    auto* hdr = static_cast<const ld_hdr*>(data);
    if (size < sizeof(ld_hdr) || hdr->size > size || hdr->size < sizeof(ld_hdr)) self->malformed_records++;
    else if (self->delivering) self->on_record(*hdr, hdr->size);
    return 0;
  }

  // Waits up to timeout_ms for the ring buffer to wake us (its own epoll fd: a target's pidfd
  // can be in the set too), then takes all it holds; returns the records taken or an error.
  // All at once: the deployed agent is alone in its scheduling group, where yielding between
  // pieces seldom lets another task run (docs/performance.md, "One stretch per wake-up").
  int drain(int timeout_ms) {
    if (timeout_ms != 0) {
      epoll_event ev{};
      if (epoll_wait(ring_buffer__epoll_fd(ring.get()), &ev, 1, timeout_ms) < 0 && errno != EINTR)
        return -errno;  // EINTR: a signal ended the wait; still take what is there
    }
    return ring_buffer__consume(ring.get());
  }

  // The earliest of `next` and the probes' own deadlines (Probe::next_tick_ns), such as the
  // GIL's learning uprobe, which the server pays for on every GIL take until it comes off.
  uint64_t earliest_deadline(uint64_t now, uint64_t next) const {
    for (const auto& p : probes)
      if (p.probe) next = std::min(next, std::max(p.probe->next_tick_ns(now), now + kMinTickNs));
    return next;
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
    targets = std::make_unique<TargetBitmap>();
    events = create_map(BPF_MAP_TYPE_RINGBUF, "ld_events", 0, 0, options.ringbuf_bytes);
    counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, "ld_counters", 4, sizeof(ld_probe_counters), LD_PROBE_MAX);
    for (uint32_t tgid : options.tgids) targets->add(tgid);
  }

  // Starts the requested probes on a few threads: loading is mostly the kernel's verifier and
  // libbpf's relocation, CPU work that is independent per object (the sock object alone
  // verifies for ~200 ms). Statuses stay in registry order; a probe that cannot run here is
  // unavailable with its own reason (libbpf's log is per thread) while the others go on; a
  // fatal error (permission) stops further starts and is rethrown once all threads are done,
  // so the probes already attached are detached by the session's destruction.
  void start_probes() {
    // The registry, then the caller's extra probes (bench-only; options outlives the probes).
    std::vector<const ProbeInfo*> all;
    for (const auto& info : probe_registry()) all.push_back(&info);
    const size_t registry_size = all.size();
    for (const auto& info : options.extra_probes) all.push_back(&info);
    const uint64_t session_begin = host::monotonic_now_ns();
    // Made first, so that one kernel BTF parse serves every object they load.
    std::vector<std::unique_ptr<Probe>> made;
    for (size_t i = 0; i < all.size(); ++i)
      made.push_back(requested(*all[i], i >= registry_size) ? all[i]->make() : nullptr);
    CoreBtf core = options.shared_core_btf ? build_core_btf(all, made) : CoreBtf();
    if (options.verbose && options.shared_core_btf) fmt::print(stderr, "latency-doctor: {}\n", core.note());

    probes.clear();
    for (const ProbeInfo* info : all)
      probes.push_back(RunningProbe{info, nullptr, model::ProbeState::kDisabled, "not selected by --probes"});
    std::vector<std::exception_ptr> fatal(made.size());
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    // Records made in user space while starting (tcp's baseline sample) may come from any of
    // the threads; the sinks see them one at a time.
    std::mutex emit_mutex;
    EmitFn emit = [&emit_mutex, deliver = emitter()](const ld_hdr& rec, size_t size) {
      std::lock_guard lock(emit_mutex);
      deliver(rec, size);
    };
    auto work = [&] {
      for (size_t i; (i = next++) < made.size();)
        if (made[i] && !failed) {
          probes[i].began_ms = util::ns_to_ms(host::monotonic_now_ns() - session_begin);
          start_one(made[i], probes[i], core, emit, fatal[i], failed);
        }
    };

    elf_version(EV_CURRENT);  // libelf's one-time setup, before libbpf calls it from threads
    size_t wanted = std::count_if(made.begin(), made.end(), [](const auto& p) { return p != nullptr; });
    size_t threads_max = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 4);
    std::vector<std::thread> threads;
    try {
      while (threads.size() < std::min(wanted, threads_max))
        threads.emplace_back([&work] {
          block_stop_signals();
          work();
        });
    } catch (...) {
      // No (more) threads: the ones made do the work, or this thread does it all.
    }
    if (threads.empty()) work();
    for (auto& t : threads) t.join();
    for (auto& e : fatal)
      if (e) std::rethrow_exception(e);

    if (options.verbose)
      for (const auto& p : probes)
        if (p.status != model::ProbeState::kDisabled)
          fmt::print(stderr, "latency-doctor: probe {} {} in {:.1f} ms (at +{:.1f} ms)\n", p.info->name,
                     model::probe_state_name(p.status), p.start_ms, p.began_ms);
  }

  void start_one(std::unique_ptr<Probe>& probe, RunningProbe& running, const CoreBtf& core, const EmitFn& emit,
                 std::exception_ptr& fatal, std::atomic<bool>& failed) {
    LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = core.path_for(running.info->name));
    ProbeContext ctx{options, {targets->fd(), events.get(), counters.get()}, emit, &open_opts};
    uint64_t begin = host::monotonic_now_ns();
    try {
      probe->start(ctx);
      running.status = model::ProbeState::kAttached;
      running.reason = probe->detail();
      running.probe = std::move(probe);
    } catch (const ProbeUnavailable& e) {
      running.status = model::ProbeState::kUnavailable;
      running.reason = e.what();
    } catch (...) {
      fatal = std::current_exception();
      failed = true;
    }
    probe.reset();  // one that did not start is torn down here: nothing of it stays attached
    running.start_ms = util::ns_to_ms(host::monotonic_now_ns() - begin);
  }

  static CoreBtf build_core_btf(const std::vector<const ProbeInfo*>& infos,
                                const std::vector<std::unique_ptr<Probe>>& made) {
    std::vector<CoreObject> objects;
    for (size_t i = 0; i < made.size(); ++i) {
      size_t size = 0;
      const void* elf = made[i] ? made[i]->bpf_object_elf(&size) : nullptr;
      if (elf) objects.push_back({infos[i]->name, elf, size});
    }
    return CoreBtf::build(objects);
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

std::string missing_kernel_feature() {
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return "BTF (/sys/kernel/btf/vmlinux: a kernel built with CONFIG_DEBUG_INFO_BTF)";
  // Every program reads the traced task's saved user registers with it (common.bpf.h); a
  // kernel that has it has the older features too (ring buffers: 5.8). libbpf answers "no"
  // only when the verifier names the helper unknown: a load refused for want of privilege
  // counts as "yes", and the loaders then say what permission is missing.
  if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_task_pt_regs, nullptr) == 0)
    return "the BPF helper bpf_task_pt_regs (Linux 5.15)";
  return "";
}

ProbeSession::ProbeSession(const ProbeOptions& options, RecordCallback on_record) : impl_(std::make_unique<Impl>()) {
  set_libbpf_verbose(options.verbose);
  impl_->options = options;
  impl_->on_record = std::move(on_record);
  if (options.tick_ns == 0) throw ProbeError(ProbeError::Kind::Other, "the read interval must be positive");
  if (options.ringbuf_bytes < 4096 || (options.ringbuf_bytes & (options.ringbuf_bytes - 1)))
    throw ProbeError(ProbeError::Kind::Other, "--ringbuf-size must be a power of two >= 4 KiB");
  if (std::string missing = missing_kernel_feature(); !missing.empty())
    throw ProbeError(ProbeError::Kind::Unsupported,
                     fmt::format("this kernel ({}) lacks {}: latency-doctor needs Linux 5.15 or newer with BTF",
                                 host::kernel_release(), missing));
  try {
    impl_->create_shared_maps();
  } catch (const ProbeUnavailable& e) {
    throw ProbeError(ProbeError::Kind::Other, e.what());
  }
  impl_->start_probes();
  bool any =
      std::any_of(impl_->probes.begin(), impl_->probes.end(), [](const RunningProbe& p) { return p.probe != nullptr; });
  if (!any) {
    std::string why;
    for (const auto& p : impl_->probes)
      if (p.status == model::ProbeState::kUnavailable) why += fmt::format("; {}: {}", p.info->name, p.reason);
    throw ProbeError(ProbeError::Kind::Unsupported, "no probe could be attached" + why);
  }
  impl_->ring.reset(ring_buffer__new(impl_->events.get(), &Impl::handle, impl_.get(), nullptr));
  if (!impl_->ring)
    throw ProbeError(ProbeError::Kind::Other, fmt::format("opening the ring buffer failed: {}", std::strerror(errno)));
  uint64_t now = host::monotonic_now_ns();
  impl_->next_tick = impl_->earliest_deadline(now, now + options.tick_ns);
}

// Detaching waits in the kernel: each tracepoint link's or perf event's close() waits for an
// RCU grace period (tens of ms), and there are ~50 of them: one after another they hold the
// agent's exit for seconds after the report. Each probe detaches on a thread of its own and the
// waits overlap.
ProbeSession::~ProbeSession() {
  if (!impl_) return;
  std::vector<std::thread> threads;
  for (auto& p : impl_->probes) {
    if (!p.probe) continue;
    try {
      threads.emplace_back([&p] {
        block_stop_signals();
        p.probe.reset();
      });
    } catch (...) {
      p.probe.reset();  // no thread: this one detaches it
    }
  }
  for (auto& t : threads) t.join();
}

int ProbeSession::poll(int timeout_ms) {
  uint64_t now = host::monotonic_now_ns();
  if (timeout_ms != 0 && !impl_->finished) {
    // A tick already due: no wait (a tick a whole read interval late leaves, e.g., the GIL
    // probe's costly learning uprobe on that much longer). Otherwise round up: waking a little
    // after the tick is due beats waking twice.
    uint64_t until_tick_ms =
        impl_->next_tick > now ? (impl_->next_tick - now + util::kNsPerMs - 1) / util::kNsPerMs : 0;
    if (timeout_ms < 0 || until_tick_ms < static_cast<uint64_t>(timeout_ms))
      timeout_ms = static_cast<int>(until_tick_ms);
  }
  int n = impl_->drain(timeout_ms);
  if (n < 0) return n;
  now = host::monotonic_now_ns();
  if (now >= impl_->next_tick && !impl_->finished) {
    auto emit = impl_->emitter();
    for (auto& p : impl_->probes) {
      if (!p.probe) continue;
      p.probe->tick(now, emit);
    }
    impl_->next_tick = impl_->earliest_deadline(now, now + impl_->options.tick_ns);
  }
  return n;
}

void ProbeSession::finish() {
  while (poll(0) > 0) {
  }
  auto emit = impl_->emitter();
  for (auto& p : impl_->probes)
    if (p.probe) p.probe->finish(emit);
  impl_->finished = true;  // a tick now would sample again what finish() closed
  while (poll(0) > 0) {
  }
}

void ProbeSession::stop_delivery() { impl_->delivering = false; }

void ProbeSession::add_target(uint32_t tgid) {
  impl_->targets->add(tgid);
  for (auto& p : impl_->probes)
    if (p.probe) p.probe->add_target(tgid);
  // A new process may give a probe a deadline (the GIL's uprobe).
  impl_->next_tick = impl_->earliest_deadline(host::monotonic_now_ns(), impl_->next_tick);
}

bool ProbeSession::attaches_later() const {
  return std::any_of(impl_->probes.begin(), impl_->probes.end(),
                     [](const RunningProbe& p) { return p.probe && p.probe->attaches_later(); });
}

void ProbeSession::wake_when_readable(int fd) {
  // Added to the ring buffer's own epoll set, which only drain() waits on (ring_buffer__poll,
  // which maps events to rings, is never called). One-shot: a pidfd stays readable once the
  // process is gone, and with other targets still alive every wait would end at once.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.fd = fd;
  const int epfd = ring_buffer__epoll_fd(impl_->ring.get());
  // Asked again for an fd it has seen (a terminal's keys): re-arm it.
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

std::vector<model::ProbeStatus> ProbeSession::status() const {
  auto totals = impl_->read_counters();
  std::vector<model::ProbeStatus> out;
  for (const auto& p : impl_->probes) {
    model::ProbeStatus s{p.info->name, p.status, p.reason, 0, 0};
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

const char* sock_hook_name(SockHook hook) {
  switch (hook) {
    case SockHook::Auto: return "auto";
    case SockHook::SocketLayer: return "socket-layer";
    case SockHook::SyscallExits: return "syscall-exits";
  }
  return "?";
}

std::optional<SockHook> parse_sock_hook(std::string_view name) {
  for (SockHook hook : {SockHook::Auto, SockHook::SocketLayer, SockHook::SyscallExits})
    if (name == sock_hook_name(hook)) return hook;
  return std::nullopt;
}

const char* perf_source_name(PerfSource source) {
  switch (source) {
    case PerfSource::Auto: return "auto";
    case PerfSource::Tick: return "tick";
    case PerfSource::PerfEvent: return "perf-event";
  }
  return "?";
}

std::optional<PerfSource> parse_perf_source(std::string_view name) {
  for (PerfSource source : {PerfSource::Auto, PerfSource::Tick, PerfSource::PerfEvent})
    if (name == perf_source_name(source)) return source;
  return std::nullopt;
}

std::string ensure_tracefs() {
  if (access("/sys/kernel/tracing/events", F_OK) == 0 || access("/sys/kernel/debug/tracing/events", F_OK) == 0)
    return "";
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0)
    return "mounted tracefs at /sys/kernel/tracing (tracepoints need it)";
  return fmt::format(
      "tracefs is not mounted and mounting it failed ({}): run "
      "'mount -t tracefs nodev /sys/kernel/tracing'",
      std::strerror(errno));
}

}  // namespace ld::probes
