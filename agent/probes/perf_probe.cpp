// perf: cpu-clock samples of the target threads on every online CPU, with kernel stacks
// (bpf/perf.bpf.c).
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "events.h"
#include "perf.skel.h"
#include "probes/kallsyms.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"

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

class PerfProbe : public Probe {
 public:
  ~PerfProbe() override {
    for (bpf_link* link : links_) bpf_link__destroy(link);  // also closes the perf fd
  }

  const void* bpf_object_elf(size_t* size) const override { return perf_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(perf_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("perf", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    if (int err = perf_bpf__load(skel_.get())) throw_libbpf_error("perf", "loading", err);
    sample_hz_ = ctx.options.sample_hz;
    if (sample_hz_ == 0) throw ProbeUnavailable("perf: a sample rate of 0 Hz");
    attach_all_cpus();
    // Now, while privileged: the recorder drops CAP_SYSLOG after attaching, and kallsyms
    // then shows every address as 0 to a new reader.
    open_kernel_symbols();
  }

  void finish(const EmitFn& emit) override {
    if (!skel_) return;
    user_records_ += emit_kernel_stacks(bpf_map__fd(skel_->maps.ld_perf_stacks), LD_PROBE_PERF,
                                        emit);
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    return fmt::format("cpu-clock perf event at {} Hz on {} CPUs, kernel stacks in kernel mode",
                       sample_hz_, links_.size());
  }

 private:
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
};

}  // namespace

std::unique_ptr<Probe> make_perf_probe() { return std::make_unique<PerfProbe>(); }

}  // namespace ld::probes
