// perf: on-CPU samples of the target threads on every online CPU, with kernel stacks and the
// user-space stacks (native, and Python's own frames in CPython processes) (bpf/perf.bpf.c): at
// the scheduler tick where this kernel allows it, else from a cpu-clock perf event per CPU.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
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
#include "probes/python_frames.hpp"
#include "probes/python_lines.hpp"
#include "probes/user_symbols.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

std::string read_link(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int open_cpu_clock(int cpu, uint32_t sample_hz) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  // A fixed period, not freq mode: cpu-clock counts nanoseconds, so the period is the rate
  // exactly, and an event in freq mode is re-tuned by the kernel on every scheduler tick of
  // every CPU (perf_adjust_freq_unthr_context), work the target's CPUs would pay for.
  attr.sample_period = util::kNsPerSec / sample_hz;
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
    // interrupt (99 Hz: +100 local timer interrupts/s per CPU, +3 at the tick), paid by the
    // interrupted thread, while the tick interrupts the CPU anyway (docs/performance.md,
    // "Samples at the scheduler tick"; bench/sample_cost.sh RATE:tick RATE:perf-event).
    const PerfSource source = ctx.options.hooks.perf;
    mode_by_walk_asked_ = ctx.options.hooks.perf_mode_by_walk;
    frames_ = ctx.options.hooks.user_stacks;
    if (!frames_) no_frames_ = "--user-stacks off";
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
    if (frames_)
      for (uint32_t tgid : ctx.options.tgids) watch(tgid);
  }

  void add_target(uint32_t tgid) override {
    if (frames_) watch(tgid);
  }

  // Every read interval: the targets' mappings again (a library loaded since is named, and a
  // process that exits keeps its last ones), and a look for Python in a target whose program
  // changed (a launcher that exec'd the interpreter).
  void tick(uint64_t, const EmitFn&) override {
    if (!frames_) return;
    for (auto& [tgid, t] : targets_) {
      usyms_.snapshot(tgid);
      if (t.python) continue;
      const std::string exe = read_link(fmt::format("/proc/{}/exe", tgid));
      if (!exe.empty() && exe != t.exe) watch(tgid);
    }
  }

  void finish(const EmitFn& emit) override {
    if (!skel_) return;
    user_records_ += emit_kernel_stacks(bpf_map__fd(skel_->maps.ld_perf_stacks), LD_PROBE_PERF, emit,
                                        /*from_tick=*/tick_period_ns_ != 0);
    if (!frames_) return;
    for (auto& [tgid, t] : targets_) usyms_.snapshot(tgid);
    user_records_ += emit_user_stacks(emit);
    user_records_ += emit_python_stacks(emit);
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    if (tick_period_ns_)
      return fmt::format(
          "scheduler tick (every {:.2f} ms) sampled at {} Hz per busy CPU, kernel stacks "
          "in kernel mode, the mode told {}; {}",
          util::ns_to_ms(tick_period_ns_), sample_hz_,
          mode_by_regs_ ? "from the saved registers" : fmt::format("by a stack walk ({})", not_by_regs_),
          frames_detail());
    return fmt::format(
        "cpu-clock perf event at {} Hz on {} CPUs, kernel stacks in kernel mode (not the "
        "scheduler tick: {}); {}",
        sample_hz_, links_.size(), not_tick_, frames_detail());
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
    skel_->rodata->ld_sample_period_ns = util::kNsPerSec / sample_hz_;
    skel_->rodata->ld_frames = frames_;
    bpf_program__set_autoload(skel_->progs.ld_perf_tick, tick_fn != 0);
    int err = perf_bpf__load(skel_.get());
    if (err && frames_) {
      // The user-stack and Python walk is the most the verifier sees here: without it, the
      // samples still come (kernel stacks only).
      frames_ = false;
      no_frames_ = fmt::format("the user-stack walk did not load ({})", std::strerror(-err));
      return load(ctx, tick_fn);
    }
    if (err && tick_fn) {
      not_tick_ = fmt::format("its program did not load ({})", std::strerror(-err));
      return load(ctx, 0);
    }
    if (err) throw_libbpf_error("perf", "loading", err);
  }

  // ---- user-space frames

  struct Target {
    std::string exe;      // /proc/PID/exe when last looked at
    bool python = false;  // its Python frames are walked
    uint32_t version = 0;
    std::string why;  // what was found, or why no Python frames
  };

  // A target to name frames of: its mappings, and its Python runtime if it has one.
  void watch(uint32_t tgid) {
    Target& t = targets_[tgid];
    usyms_.snapshot(tgid);
    t.exe = read_link(fmt::format("/proc/{}/exe", tgid));
    std::string why;
    auto py = find_python_process(tgid, &why);
    if (!py) {
      t.why = why;
      return;
    }
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.ld_py_procs), &tgid, &py->proc, BPF_ANY) != 0) {
      t.why = fmt::format("ld_py_procs: {}", std::strerror(errno));
      return;
    }
    t.python = true;
    t.version = py->version;
    t.why = fmt::format("Python {}.{} ({})", py->version >> 8, py->version & 0xff,
                        py->offsets == "table" ? "offsets by version" : py->offsets);
  }

  std::string frames_detail() const {
    if (!frames_) return no_frames_.empty() ? "no user stacks" : "no user stacks: " + no_frames_;
    std::string py;
    std::set<std::string> seen;
    for (const auto& [tgid, t] : targets_) {
      if (!t.python && t.why == "not a CPython process") continue;
      if (seen.insert(t.why).second) py += (py.empty() ? "" : "; ") + t.why;
    }
    return fmt::format("user stacks by frame pointers (depth {}){}", LD_USTACK_MAX_DEPTH,
                       py.empty() ? "" : ", Python frames: " + py);
  }

  uint64_t emit_user_stacks(const EmitFn& emit) {
    const int owners = bpf_map__fd(skel_->maps.ld_ustack_owners);
    const int stacks = bpf_map__fd(skel_->maps.ld_perf_ustacks);
    alignas(8) unsigned char buf[sizeof(ld_ustack) + LD_USTACK_MAX_DEPTH * sizeof(ld_uframe)];
    const uint64_t now = host::monotonic_now_ns();
    uint64_t emitted = 0;
    ld_ustack_owner key{}, next{};
    bool first = true;
    while (bpf_map_get_next_key(owners, first ? nullptr : &key, &next) == 0) {
      first = false;
      key = next;
      uint64_t ips[LD_USTACK_MAX_DEPTH] = {};
      uint32_t id = static_cast<uint32_t>(key.stack_id);
      if (bpf_map_lookup_elem(stacks, &id, ips) != 0) continue;
      const auto named = usyms_.symbolize(key.tgid, ips, LD_USTACK_MAX_DEPTH);
      std::memset(buf, 0, sizeof(buf));
      auto* rec = reinterpret_cast<ld_ustack*>(buf);
      const uint32_t depth = static_cast<uint32_t>(named.frames.size());
      rec->hdr.type = LD_EV_USTACK;
      rec->hdr.size = static_cast<uint16_t>(sizeof(ld_ustack) + depth * sizeof(ld_uframe));
      rec->hdr.tgid = key.tgid;
      rec->hdr.ts_ns = now;
      rec->stack_id = key.stack_id;
      rec->depth = depth;
      rec->flags = named.flags;
      std::memcpy(buf + sizeof(ld_ustack), named.frames.data(), depth * sizeof(ld_uframe));
      emit(rec->hdr, rec->hdr.size);
      emitted++;
    }
    return emitted;
  }

  uint64_t emit_python_stacks(const EmitFn& emit) {
    const int stacks = bpf_map__fd(skel_->maps.ld_py_stacks);
    const int codes = bpf_map__fd(skel_->maps.ld_py_codes);
    std::map<std::pair<uint32_t, uint64_t>, std::optional<ld_py_code>> names;
    alignas(8) unsigned char buf[sizeof(ld_pystack) + LD_PY_MAX_DEPTH * sizeof(ld_pyframe)];
    const uint64_t now = host::monotonic_now_ns();
    uint64_t emitted = 0, key = 0, next = 0;
    bool first = true;
    auto copy = [](char* dst, size_t cap, const char* src, size_t src_cap) {
      const size_t len = strnlen(src, src_cap);
      const size_t n = std::min(len, cap - 1);
      std::memcpy(dst, src + (len - n), n);  // the tail: a path's file name is its end
      dst[n] = 0;
      return n < len;
    };
    while (bpf_map_get_next_key(stacks, first ? nullptr : &key, &next) == 0) {
      first = false;
      key = next;
      ld_py_stack stack{};
      if (bpf_map_lookup_elem(stacks, &key, &stack) != 0) continue;
      const auto target = targets_.find(stack.tgid);
      const uint32_t version = target == targets_.end() ? 0 : target->second.version;
      const uint32_t depth = std::min<uint32_t>(stack.depth, LD_PY_MAX_DEPTH);
      std::memset(buf, 0, sizeof(buf));
      auto* rec = reinterpret_cast<ld_pystack*>(buf);
      rec->hdr.type = LD_EV_PYSTACK;
      rec->hdr.size = static_cast<uint16_t>(sizeof(ld_pystack) + depth * sizeof(ld_pyframe));
      rec->hdr.tgid = stack.tgid;
      rec->hdr.ts_ns = now;
      rec->stack_id = key;
      rec->depth = depth;
      rec->flags = stack.flags;
      auto* frames = reinterpret_cast<ld_pyframe*>(buf + sizeof(ld_pystack));
      for (uint32_t i = 0; i < depth; ++i) {
        const ld_py_frame_ref& ref = stack.frames[i];
        auto [it, added] = names.try_emplace({stack.tgid, ref.code});
        if (added) {
          ld_py_code_key ck{stack.tgid, 0, ref.code};
          ld_py_code code{};
          if (bpf_map_lookup_elem(codes, &ck, &code) == 0) it->second = code;
        }
        ld_pyframe& f = frames[i];
        f.line = -1;
        const auto& code = it->second;
        if (!code || (code->flags & LD_PY_CODE_NOT_CODE) || !code->name[0]) {
          f.flags |= LD_PYFRAME_UNNAMED;
          std::strcpy(f.func, "?");
          continue;
        }
        copy(f.func, sizeof(f.func), code->name, sizeof(code->name));
        if (copy(f.file, sizeof(f.file), code->file, sizeof(code->file)) || (code->flags & LD_PY_CODE_FILE_CUT))
          f.flags |= LD_PYFRAME_FILE_CUT;
        f.line = python_line(version, code->firstlineno, code->linetable,
                             std::min<size_t>(code->linetable_len, LD_PY_LINETABLE_LEN), ref.instr);
      }
      emit(rec->hdr, rec->hdr.size);
      emitted++;
    }
    return emitted;
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
    const uint64_t sample_period = util::kNsPerSec / sample_hz_;
    if (period && period <= sample_period + sample_period / 20) {
      tick_period_ns_ = period;
      return;
    }
    not_tick_ = period ? fmt::format("{} Hz asked, the tick runs at {:.0f} Hz", sample_hz_, util::per_second(period))
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
    constexpr uint64_t kCalibrateNs = 60 * util::kNsPerMs;  // 3 ticks at HZ=100, with margin
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
            fmt::format("no cpu-clock perf events: perf_event_open on CPU {}: {}", cpu, std::strerror(err)));
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
  bool frames_ = true;     // user stacks and Python frames (ld_cpu_frames)
  std::string no_frames_;  // why not, when not
  std::map<uint32_t, Target> targets_;
  UserSymbolizer usyms_;
  std::vector<bpf_link*> links_;
  uint64_t user_records_ = 0;
  uint32_t sample_hz_ = 0;
  std::pair<uint64_t, uint64_t> irq_entry_{0, 0};
  uint64_t tick_period_ns_ = 0;      // the tick source is in use
  std::string not_tick_;             // why not, otherwise
  bool mode_by_regs_ = false;        // user/kernel mode from the registers check, not the walk
  bool mode_by_walk_asked_ = false;  // ProbeOptions::hooks.perf_mode_by_walk
  std::string not_by_regs_;          // why not
};

}  // namespace

std::unique_ptr<Probe> make_perf_probe() { return std::make_unique<PerfProbe>(); }

}  // namespace ld::probes
