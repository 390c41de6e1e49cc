// One probe = bpf/NAME.bpf.c (+ skeleton) + a Probe subclass here. A ProbeSession owns the
// maps every probe shares (targets, ring buffer, counters, wake-up state) and starts the
// probes the user asked for; a probe the kernel cannot support reports itself unavailable,
// with the reason, and the others go on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct bpf_object;
struct bpf_object_open_opts;
struct ld_hdr;

namespace ld::probes {

// The perf probe's default rate. An odd number, off the beat of periodic timers (and of other
// profilers' 100/1000 Hz). Each sample is a timer interrupt on the sampled CPU; see
// docs/performance.md for what a rate costs the target.
constexpr uint32_t kDefaultSampleHz = 99;

// Which kernel hook a probe takes where there is more than one way in. Auto takes the best this
// kernel loads and attaches and falls back as it must (the probes table says which way was
// taken); the others force one way on any kernel: a way back should a newer hook misbehave on
// some kernel, and how the root tests run, on this kernel, the paths older kernels take.
enum class SockHook {
  Auto,          // the socket layer's tracepoints where the kernel has them, else the syscall exits
  SocketLayer,   // tp_btf sock_send_length/sock_recv_length only (6.3+): unavailable elsewhere
  SyscallExits,  // the exits of read/write/readv/writev/sendto/recvfrom/sendmsg/recvmsg
};
enum class SchedHook {
  Auto,             // typed (tp_btf) sched_switch/sched_waking, else the raw tracepoints
  RawTracepoints,   // the raw tracepoints (kernels without tp_btf, or before 5.18)
  RawLegacySwitch,  // those, with the sched_switch program of kernels before 5.18 (no prev_state)
};

enum class PerfSource {
  Auto,       // the scheduler tick where it can be used at the asked rate, else cpu-clock events
  Tick,       // the tick only: unavailable where it cannot be used (the probes table says why)
  PerfEvent,  // a cpu-clock perf event per CPU, each sample an interrupt of its own
};

struct HookChoices {
  SockHook sock = SockHook::Auto;
  SchedHook sched = SchedHook::Auto;
  PerfSource perf = PerfSource::Auto;
  // At the tick: tell user from kernel mode by the stack walk even where the one-read
  // registers check agreed with it at attach (the path of kernels where it did not).
  bool perf_mode_by_walk = false;
  // The perf probe's user-space stacks (native and Python frames): --user-stacks on|off.
  bool user_stacks = true;
  // The cuda probe's launch hooks (kernel and graph launches, async copies): --cuda-launches
  // on|off. Off spares a launch-heavy eager server a uprobe hit per launch; syncs, copies and
  // allocations are still timed, and the GPU's queue is then not inferred.
  bool cuda_launches = true;
};

// The names the CLI shows: --sock-hook auto|socket-layer|syscall-exits,
// --sample-source auto|tick|perf-event.
const char* sock_hook_name(SockHook hook);
std::optional<SockHook> parse_sock_hook(std::string_view name);
const char* perf_source_name(PerfSource source);
std::optional<PerfSource> parse_perf_source(std::string_view name);

struct ProbeOptions;

// "This kernel/host cannot do that": shown as status "unavailable" with the message.
class ProbeUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// File descriptors of the maps declared in bpf/common.bpf.h, created once per session.
struct SharedMaps {
  int targets = -1;
  int events = -1;
  int counters = -1;
};

// Makes an opened (not yet loaded) BPF object use the session's shared maps. Call between
// NAME_bpf__open() and NAME_bpf__load(). Throws ProbeUnavailable on failure.
void use_shared_maps(bpf_object* obj, const SharedMaps& shared);

using EmitFn = std::function<void(const ld_hdr& record, size_t size)>;

struct ProbeContext {
  const ProbeOptions& options;
  SharedMaps shared;
  EmitFn emit;  // for records made in user space (samples, stack tables); thread-safe
  // For NAME_bpf__open_opts(): the session's shared CO-RE BTF (core_btf.hpp), or null.
  const bpf_object_open_opts* open_opts = nullptr;
};

class Probe {
 public:
  virtual ~Probe() = default;
  // The BPF object this probe loads (the skeleton's NAME_bpf__elf_bytes), or null: the session
  // reads its CO-RE relocations to build one shared kernel BTF before any probe starts.
  virtual const void* bpf_object_elf(size_t* size) const { return nullptr; }
  // Opens (with ctx.open_opts), loads and attaches. Throws ProbeUnavailable (kernel lacks it:
  // the session goes on without this probe) or ProbeError (e.g. permission: the session
  // fails). Probes start in parallel: start() may touch only its own probe and thread-safe
  // state.
  virtual void start(ProbeContext& ctx) = 0;
  // From the poll loop, every read interval or by next_tick_ns(): user-space sampling,
  // housekeeping.
  virtual void tick(uint64_t now_mono_ns, const EmitFn& emit) {}
  // When (CLOCK_MONOTONIC ns) this probe needs its next tick() at the latest, if sooner than
  // the read interval. Every wake-up of the agent takes a CPU from the server for a moment,
  // so only a probe with a deadline (a sampler, a temporary uprobe to remove) asks.
  virtual uint64_t next_tick_ns(uint64_t now_mono_ns) const { return UINT64_MAX; }
  // Once, after the ring buffer is drained: flush in-kernel aggregates, symbolise stacks.
  virtual void finish(const EmitFn& emit) {}
  // A new target process (fork of a target with --children, found by user space).
  virtual void add_target(uint32_t tgid) {}
  // Whether this probe may still attach a kernel hook of its own later (the GIL's learning
  // uprobe for a Python not yet learned): the agent keeps the capabilities attaching needs
  // (uprobes: CAP_SYS_ADMIN) until no probe says so.
  virtual bool attaches_later() const { return false; }
  // Records this probe made in user space (kernel-side ones are counted in ld_counters).
  virtual uint64_t user_records() const { return 0; }
  // Shown as the probe's `reason` when attached: how it works here, e.g. "GIL via take_gil".
  virtual std::string detail() const = 0;
};

struct ProbeInfo {
  const char* name;
  uint32_t id;          // enum ld_probe_id
  const char* summary;  // one line for --help and `--probes` errors
  bool in_all;          // false = opt-in only (costly deep probes): must be named in --probes
  std::function<std::unique_ptr<Probe>()> make;
};

// Every probe this build knows, in start order.
const std::vector<ProbeInfo>& probe_registry();

}  // namespace ld::probes
