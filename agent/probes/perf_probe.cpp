// perf: on-CPU samples of the target threads on every online CPU, with kernel stacks
// (bpf/perf.bpf.c): at the scheduler tick where this kernel allows it, else from a cpu-clock
// perf event per CPU.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "perf.skel.h"
#include "perf_maps.h"
#include "probes/kallsyms.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"

namespace ld::probes {
namespace {

int open_cpu_clock(int cpu, uint32_t sample_hz) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  // A fixed period, not freq mode: cpu-clock counts nanoseconds, so the period is the rate
  // exactly, and an event in freq mode is re-tuned by the kernel on every scheduler tick of
  // every CPU (perf_adjust_freq_unthr_context), work the target's CPUs would pay for.
  attr.sample_period = 1'000'000'000 / sample_hz;
  // pid = -1, cpu = N: every task on that CPU; the program keeps the targets.
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// FRED (x86 entry since 6.9, on CPUs that have it) delivers the timer interrupt through its own
// entry, not asm_sysvec_apic_timer_interrupt, where the tick program looks for the end of a
// user-mode sample's kernel stack: the cpu-clock source then.
bool fred_active() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" fred ") != std::string::npos;
  return false;
}

// Why the scheduler tick cannot be the sample source here ("" when it may be).
std::string tick_source_obstacle(uint64_t tick_fn, uint64_t irq_entry) {
#if !defined(__x86_64__)
  (void)tick_fn;
  (void)irq_entry;
  return "the tick source is x86-64 only";
#else
  if (fred_active()) return "FRED entry (not the APIC timer's interrupt entry the tick source knows)";
  if (!tick_fn) return "no tick_sched_timer/tick_nohz_handler in /proc/kallsyms";
  if (!irq_entry) return "no asm_sysvec_apic_timer_interrupt in /proc/kallsyms";
  return "";
#endif
}

class PerfProbe : public Probe {
 public:
  ~PerfProbe() override {
    for (bpf_link* link : links_) bpf_link__destroy(link);  // also closes the perf fd
  }

  const void* bpf_object_elf(size_t* size) const override { return perf_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    sample_hz_ = ctx.options.sample_hz;
    if (sample_hz_ == 0) throw ProbeUnavailable("perf: a sample rate of 0 Hz");
    // tick_nohz_handler is the tick's hrtimer function since 6.9; before, tick_sched_timer
    // was (and tick_nohz_handler the low-resolution mode's clockevent handler).
    // asm_sysvec_apic_timer_interrupt: where the tick's kernel stack ends when it interrupted
    // user code.
    const auto text = find_kernel_text({"tick_sched_timer", "tick_nohz_handler", "asm_sysvec_apic_timer_interrupt"});
    const uint64_t tick_fn = text[0].start ? text[0].start : text[1].start;
    irq_entry_ = {text[2].start, text[2].end};
    // Why the tick, not only the usual cpu-clock event: a cpu-clock sample is one more timer
    // interrupt (99 Hz: +100 local timer interrupts/s per CPU, +3 at the tick) that took 6-35 us
    // of the interrupted thread's time against ~0 at the tick (2-vCPU KVM guest, HZ=250,
    // 2026-12-04: bench/sample_cost.sh RATE:tick RATE:perf-event, stolen us/sample).
    const PerfSource source = ctx.options.hooks.perf;
    mode_by_walk_asked_ = ctx.options.hooks.perf_mode_by_walk;
    not_tick_ = source == PerfSource::PerfEvent ? "the cpu-clock source was asked for"
                                                : tick_source_obstacle(tick_fn, irq_entry_.first);
    load(ctx, not_tick_.empty() ? tick_fn : 0);
    if (not_tick_.empty()) attach_tick();
    if (!not_tick_.empty() && source == PerfSource::Tick)
      throw ProbeUnavailable("the tick source was asked for and cannot be used here: " + not_tick_);
    if (!not_tick_.empty()) attach_all_cpus();
    // Now, while privileged: the recorder drops CAP_SYSLOG after attaching, and kallsyms
    // then shows every address as 0 to a new reader.
    open_kernel_symbols(bpf_map__fd(skel_->maps.ld_perf_stacks));
  }

  void finish(const EmitFn& emit) override {
    if (!skel_) return;
    user_records_ += emit_kernel_stacks(bpf_map__fd(skel_->maps.ld_perf_stacks), LD_PROBE_PERF,
                                        emit, /*from_tick=*/tick_period_ns_ != 0);
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    if (tick_period_ns_)
      return fmt::format("scheduler tick (every {:.2f} ms) sampled at {} Hz per busy CPU, kernel stacks "
                         "in kernel mode, the mode told {}",
                         double(tick_period_ns_) / 1e6, sample_hz_,
                         mode_by_regs_ ? "from the saved registers"
                                       : fmt::format("by a stack walk ({})", not_by_regs_));
    return fmt::format("cpu-clock perf event at {} Hz on {} CPUs, kernel stacks in kernel mode (not the "
                       "scheduler tick: {})",
                       sample_hz_, links_.size(), not_tick_);
  }

 private:
  // tick_fn 0: the cpu-clock source only (the tick program is not loaded).
  void load(ProbeContext& ctx, uint64_t tick_fn) {
    skel_.reset(perf_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("perf", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_tick_fn = tick_fn;
    skel_->rodata->ld_irq_entry_lo = irq_entry_.first;
    skel_->rodata->ld_irq_entry_hi = irq_entry_.second;
    skel_->rodata->ld_sample_period_ns = 1'000'000'000ULL / sample_hz_;
    bpf_program__set_autoload(skel_->progs.ld_perf_tick, tick_fn != 0);
    int err = perf_bpf__load(skel_.get());
    if (err && tick_fn) {
      not_tick_ = fmt::format("its program did not load ({})", std::strerror(-err));
      return load(ctx, 0);
    }
    if (err) throw_libbpf_error("perf", "loading", err);
  }

  // Attaches the tick program, then watches it for up to kCalibrateNs on this (busy) thread:
  // the tick must show up in the hook (it does not where the tick is not an hrtimer, e.g.
  // with high-resolution timers off) and be at least as frequent as the asked rate (HZ is a
  // build option: 100 to 1000). Leaves not_tick_ empty on success.
  void attach_tick() {
    bpf_link* link = bpf_program__attach(skel_->progs.ld_perf_tick);
    if (!link) {
      not_tick_ = fmt::format("hrtimer_expire_entry: {}", std::strerror(errno));
      return;
    }
    skel_->links.ld_perf_tick = link;  // destroyed with the skeleton
    const uint64_t period = calibrate();
    const uint64_t sample_period = 1'000'000'000ULL / sample_hz_;
    if (period && period <= sample_period + sample_period / 20) {
      tick_period_ns_ = period;
      return;
    }
    not_tick_ = period ? fmt::format("{} Hz asked, the tick runs at {:.0f} Hz", sample_hz_, 1e9 / double(period))
                       : std::string("no tick seen through hrtimer_expire_entry");
    bpf_link__destroy(link);
    skel_->links.ld_perf_tick = nullptr;
  }

  // Watches the tick program for up to kCalibrateNs on this (busy) thread. Returns the
  // shortest mean interval between ticks of a CPU that ticked at least three times, or 0.
  // Meanwhile every tick of a task tells user from kernel mode both ways (bpf/perf.bpf.c);
  // the one-read registers check is kept only if it agreed with the stack walk on every
  // tick, a few of them in user mode (this spin), else samples use the walk.
  uint64_t calibrate() {
    constexpr uint64_t kCalibrateNs = 60'000'000;  // 3 ticks at HZ=100, with margin
    constexpr uint64_t kUserTicks = 3;
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return 0;
    std::vector<ld_tick_cpu> cpus(static_cast<size_t>(ncpu));
    const int fd = bpf_map__fd(skel_->maps.ld_tick_state);
    const uint32_t zero = 0;
    skel_->bss->ld_calibrating = 1;
    const uint64_t begin = host::monotonic_now_ns();
    uint64_t period = 0;
    ld_tick_cpu sum{};
    volatile uint64_t spin = 0;
    while (host::monotonic_now_ns() - begin < kCalibrateNs) {
      for (int i = 0; i < 100000; ++i) spin = spin + 1;  // stay on the CPU: it keeps ticking
      if (bpf_map_lookup_elem(fd, &zero, cpus.data()) != 0) break;
      sum = ld_tick_cpu{};
      for (const ld_tick_cpu& c : cpus) {
        if (c.ticks >= 3) {
          const uint64_t mean = (c.last_ns - c.first_ns) / (c.ticks - 1);
          if (!period || mean < period) period = mean;
        }
        sum.calib_ticks += c.calib_ticks;
        sum.calib_agree += c.calib_agree;
        sum.calib_user += c.calib_user;
      }
      if (period && sum.calib_user >= kUserTicks) break;
    }
    skel_->bss->ld_calibrating = 0;
    mode_by_regs_ = sum.calib_user >= kUserTicks && sum.calib_agree == sum.calib_ticks;
    if (!mode_by_regs_)
      not_by_regs_ = fmt::format("the registers check agreed with the stack walk on {} of {} ticks, {} in user mode",
                                 sum.calib_agree, sum.calib_ticks, sum.calib_user);
    // hooks.perf_mode_by_walk takes the walk, the other kernels' path, here (its root test).
    if (mode_by_regs_ && mode_by_walk_asked_) {
      mode_by_regs_ = false;
      not_by_regs_ = "the walk was asked for";
    }
    if (!mode_by_regs_) skel_->data->ld_mode_by_regs = 0;
    return period;
  }

  void attach_all_cpus() {
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) throw ProbeUnavailable("perf: cannot count the possible CPUs");
    for (int cpu = 0; cpu < ncpu; ++cpu) {
      int fd = open_cpu_clock(cpu, sample_hz_);
      if (fd < 0) {
        int err = errno;
        if (err == ENODEV) continue;  // possible but offline
        if (err == EACCES || err == EPERM) throw_libbpf_error("perf", "opening perf events", err);
        throw ProbeUnavailable(
            fmt::format("no cpu-clock perf events: perf_event_open on CPU {}: {}", cpu,
                        std::strerror(err)));
      }
      bpf_link* link = bpf_program__attach_perf_event(skel_->progs.ld_perf_sample, fd);
      if (!link) {
        int err = errno;
        close(fd);
        throw_libbpf_error("perf", "attaching", err);
      }
      links_.push_back(link);
    }
    if (links_.empty()) throw ProbeUnavailable("no cpu-clock perf events: no online CPU");
  }

  // Links are destroyed (in ~PerfProbe) before the skeleton frees the program.
  SkelPtr<perf_bpf, perf_bpf__destroy> skel_;
  std::vector<bpf_link*> links_;
  uint64_t user_records_ = 0;
  uint32_t sample_hz_ = 0;
  std::pair<uint64_t, uint64_t> irq_entry_{0, 0};
  uint64_t tick_period_ns_ = 0;  // the tick source is in use
  std::string not_tick_;          // why not, otherwise
  bool mode_by_regs_ = false;     // user/kernel mode from the registers check, not the walk
  bool mode_by_walk_asked_ = false;  // ProbeOptions::hooks.perf_mode_by_walk
  std::string not_by_regs_;       // why not
};

}  // namespace

std::unique_ptr<Probe> make_perf_probe() { return std::make_unique<PerfProbe>(); }

}  // namespace ld::probes
