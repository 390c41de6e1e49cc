// sched: off-CPU intervals of the target threads (blocked / preempted, with waker, holder,
// syscall and kernel stack), short slices summed per thread, and migrations
// (bpf/sched.bpf.c).
#include <sys/utsname.h>

#include <algorithm>
#include <cstring>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "model/syscalls.hpp"
#include "probes/kallsyms.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"
#include "sched.skel.h"
#include "sched_maps.h"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// Defaults of the rodata knobs (see bpf/sched.bpf.c).
constexpr uint64_t kOffcpuMinNs = util::kNsPerMs;        // itemise off-CPU intervals of 1 ms or more
constexpr uint64_t kAggPeriodNs = 100 * util::kNsPerMs;  // shorter ones summed per thread per 100 ms
constexpr uint64_t kKstackGapNs = 10 * util::kNsPerMs;   // a fresh stack per (thread, syscall) per 10 ms

// Sets the bit of each syscall whose number names the cause of a block in it: the kernel takes
// no stack for those blocks (bpf/sched.bpf.c, ld_stackless_syscalls). Numbered by this host's
// table: a machine the table does not know sets none, and every block keeps its stack.
void mark_stackless_syscalls(__u64 (&words)[LD_STACKLESS_SYSCALL_WORDS]) {
  struct utsname host {};
  if (uname(&host) != 0) return;
  for (uint32_t nr = 0; nr < LD_STACKLESS_SYSCALL_WORDS * 64; ++nr)
    if (model::cause_of_blocking_syscall(nr, host.machine) != model::Cause::kUnknown)
      words[nr / 64] |= __u64{1} << (nr % 64);
}

class SchedProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return sched_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    // The typed programs where the kernel loads them (tp_btf, and sched_switch's prev_state
    // argument: 5.18), else the raw tracepoints. hooks.sched may ask for the raw ones (and for
    // the pre-5.18 sched_switch program) on any kernel: the root tests of those paths.
    const SchedHook hook = ctx.options.hooks.sched;
#ifdef LD_FAULT_INJECTION
    fail_typed_attach_ = ctx.options.faults.sched_typed_attach;
#endif
    if (hook == SchedHook::Auto) typed_ = start_typed(ctx);
    if (!typed_) {
      if (int err = open_and_load(ctx, false)) throw_libbpf_error("sched", "loading", err);
      if (int err = attach_all(false)) throw_libbpf_error("sched", "attaching", err);
      attach_switch(hook == SchedHook::RawLegacySwitch);
    }
    // Now, while privileged: the recorder drops CAP_SYSLOG after attaching, and kallsyms
    // then shows every address as 0 to a new reader.
    open_kernel_symbols(bpf_map__fd(skel_->maps.ld_sched_stacks));
  }

  // Short-slice sums of threads still alive (the kernel flushes them only at the thread's
  // next switch-in after the period, or at its exit), then the kernel stacks.
  void finish(const EmitFn& emit) override {
    if (!skel_) return;
    flush_aggregates(emit);
    user_records_ += emit_kernel_stacks(bpf_map__fd(skel_->maps.ld_sched_stacks), LD_PROBE_SCHED, emit);
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    std::string programs = typed_ ? "typed tracepoints (tp_btf) sched_switch/sched_waking, raw "
                                    "tracepoints sched_wakeup_new/sched_migrate_task"
                                  : "raw tracepoints sched_switch/sched_waking/sched_wakeup_new/"
                                    "sched_migrate_task";
    if (typed_error_)
      programs += fmt::format(" (typed ones did not {}: {})", typed_error_stage_, std::strerror(-typed_error_));
    return fmt::format(
        "{}; "
        "off-CPU >= {} ms itemised with waker, holder, syscall and (where the syscall does not name the cause) kernel "
        "stack, shorter "
        "ones summed per thread per {} ms{}",
        programs, kOffcpuMinNs / util::kNsPerMs, kAggPeriodNs / util::kNsPerMs,
        legacy_state_ ? "; kernel < 5.18: a block can read as a preemption when a wake-up races it" : "");
  }

 private:
  // Opens the object and loads either the typed sched_switch/sched_waking programs or the raw
  // ones; a libbpf error code, 0 when loaded.
  int open_and_load(ProbeContext& ctx, bool typed) {
    skel_.reset(sched_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("sched", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_offcpu_min_ns = kOffcpuMinNs;
    skel_->rodata->ld_agg_period_ns = kAggPeriodNs;
    skel_->rodata->ld_kstack_gap_ns = kKstackGapNs;
    mark_stackless_syscalls(skel_->rodata->ld_stackless_syscalls);
    skel_->rodata->ld_trace_migrations = true;
    bpf_program__set_autoload(skel_->progs.ld_sched_switch_btf, typed);
    bpf_program__set_autoload(skel_->progs.ld_sched_waking_btf, typed);
    bpf_program__set_autoload(skel_->progs.ld_sched_switch, !typed);
    bpf_program__set_autoload(skel_->progs.ld_sched_switch_legacy, !typed);
    bpf_program__set_autoload(skel_->progs.ld_sched_waking, !typed);
    // Without the typed ones, one of the two raw sched_switch programs is attached by
    // attach_switch(), by what the kernel offers.
    bpf_program__set_autoattach(skel_->progs.ld_sched_switch, false);
    bpf_program__set_autoattach(skel_->progs.ld_sched_switch_legacy, false);
    int err = sched_bpf__load(skel_.get());
    if (err) skel_.reset();
    return err;
  }

  // Loads and attaches the typed programs: true, or false (why in typed_error_) where this
  // kernel refuses to load or to attach them, with nothing of them left loaded (the skeleton's
  // reset detaches whatever part did attach). A permission error is fatal, not a fallback.
  bool start_typed(ProbeContext& ctx) {
    int err = open_and_load(ctx, true);
    const bool loaded = !err;
    if (loaded) err = attach_all(true);
    if (err == -EPERM || err == -EACCES) throw_libbpf_error("sched", loaded ? "attaching" : "loading", err);
    if (err) {
      skel_.reset();
      typed_error_ = err;
      typed_error_stage_ = loaded ? "attach" : "load";
    }
    return !err;
  }

  // The skeleton's auto-attached programs. In test builds a fault may make the typed set fail
  // after attaching (EOPNOTSUPP), as a kernel would that refused them: the root test of the
  // fallback.
  int attach_all(bool typed) {
    if (int err = sched_bpf__attach(skel_.get())) return err;
#ifdef LD_FAULT_INJECTION
    if (typed && fail_typed_attach_) return -EOPNOTSUPP;
#endif
    return 0;
  }

  // sched_switch has its prev_state argument since 5.18: the program that reads it fails to
  // attach (EINVAL: the raw tracepoint has fewer arguments) on older kernels. `legacy` takes
  // the older kernels' program at once (SchedHook::RawLegacySwitch: the root test of that path).
  void attach_switch(bool legacy) {
    int err = 0;
    if (!legacy) {
      skel_->links.ld_sched_switch = bpf_program__attach(skel_->progs.ld_sched_switch);
      if (skel_->links.ld_sched_switch) return;
      err = -errno;
    }
    skel_->links.ld_sched_switch_legacy = bpf_program__attach(skel_->progs.ld_sched_switch_legacy);
    if (!skel_->links.ld_sched_switch_legacy) throw_libbpf_error("sched", "attaching sched_switch", err ? err : -errno);
    legacy_state_ = true;
  }

  void flush_aggregates(const EmitFn& emit) {
    int fd = bpf_map__fd(skel_->maps.ld_sched_threads);
    uint64_t now = host::monotonic_now_ns();  // the period of a final flush ends now
    uint32_t key = 0, next = 0;
    const void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      key = next;
      prev = &key;
      ld_sched_thread st{};
      if (bpf_map_lookup_elem(fd, &key, &st) != 0) continue;
      if (!st.blocked_count && !st.runnable_count) continue;
      ld_sched_agg rec{};
      rec.hdr.type = LD_EV_SCHED_AGG;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = st.tgid;
      rec.hdr.tid = key;
      rec.hdr.ts_ns = std::max(now, st.period_start_ns);
      rec.period_start_ns = st.period_start_ns;
      rec.blocked_ns = st.blocked_ns;
      rec.runnable_ns = st.runnable_ns;
      rec.blocked_count = st.blocked_count;
      rec.runnable_count = st.runnable_count;
      std::memcpy(rec.wakers, st.agg_wakers, sizeof(rec.wakers));
      emit(rec.hdr, sizeof(rec));
      user_records_++;
    }
  }

  SkelPtr<sched_bpf, sched_bpf__destroy> skel_;
  uint64_t user_records_ = 0;
  bool typed_ = false;                  // the tp_btf programs run
  int typed_error_ = 0;                 // why they did not load or attach (a libbpf error code), if tried
  const char* typed_error_stage_ = "";  // "load" or "attach"
  bool legacy_state_ = false;           // pre-5.18 kernel: the switched-out state re-read from the task
#ifdef LD_FAULT_INJECTION
  bool fail_typed_attach_ = false;  // ProbeOptions::faults.sched_typed_attach
#endif
};

}  // namespace

std::unique_ptr<Probe> make_sched_probe() { return std::make_unique<SchedProbe>(); }

}  // namespace ld::probes
