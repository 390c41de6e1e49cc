// cpufreq: the CPU frequency of every CPU, from power:cpu_frequency where the kernel reports
// changes, and from sysfs (scaling_cur_freq) every 100 ms -- hardware-managed P-states (HWP,
// amd-pstate active) never fire the tracepoint. A host without cpufreq (most VMs) cannot
// show the frequency at all: the probe says so instead of failing.
#include <bpf/libbpf.h>

#include <map>

#include <fmt/format.h>

#include "cpufreq.skel.h"
#include "events.h"
#include "host/cpufreq.hpp"
#include "host/host_facts.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

constexpr uint64_t kSampleEveryNs = 100 * util::kNsPerMs;
// Unchanged frequencies are re-emitted this often so a reader sees the value in any window.
constexpr uint64_t kRepeatEveryNs = util::kNsPerSec;

class CpufreqProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return cpufreq_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    if (!host::has_cpufreq(""))
      throw ProbeUnavailable(
          "no cpufreq on this host (no /sys/devices/system/cpu/cpu0/cpufreq): CPU frequency "
          "cannot be observed");
    attach_tracepoint(ctx);
  }

  void tick(uint64_t now, const EmitFn& emit) override {
    if (now < next_sample_) return;
    next_sample_ = now + kSampleEveryNs;
    sample(now, emit);
  }

  uint64_t next_tick_ns(uint64_t) const override { return next_sample_; }

  void finish(const EmitFn& emit) override { sample(host::monotonic_now_ns(), emit); }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    return tracepoint_ ? "power:cpu_frequency (changes) + sysfs scaling_cur_freq every 100 ms"
                       : fmt::format("sysfs scaling_cur_freq every 100 ms (tracepoint: {})", tracepoint_error_);
  }

 private:
  // The tracepoint is a bonus: without it the sysfs sampler still works.
  void attach_tracepoint(ProbeContext& ctx) {
    skel_.reset(cpufreq_bpf__open_opts(ctx.open_opts));
    if (!skel_) {
      tracepoint_error_ = "cannot open the BPF object";
      return;
    }
    try {
      use_shared_maps(skel_->obj, ctx.shared);
    } catch (const ProbeUnavailable& e) {
      tracepoint_error_ = e.what();
      skel_.reset();
      return;
    }
    if (int err = cpufreq_bpf__load(skel_.get())) {
      tracepoint_error_ = fmt::format("load failed ({})", err);
      skel_.reset();
      return;
    }
    if (int err = cpufreq_bpf__attach(skel_.get())) {
      tracepoint_error_ = fmt::format("attach failed ({})", err);
      skel_.reset();
      return;
    }
    tracepoint_ = true;
  }

  struct Last {
    uint32_t khz = 0;
    uint64_t ts = 0;
  };

  void sample(uint64_t now, const EmitFn& emit) {
    for (const auto& r : host::read_cpu_freqs("")) {
      Last& last = last_[r.cpu];
      if (r.khz == last.khz && now - last.ts < kRepeatEveryNs) continue;
      last = {r.khz, now};
      ld_cpu_freq rec{};
      rec.hdr.type = LD_EV_CPU_FREQ;
      rec.hdr.size = sizeof(rec);
      rec.hdr.cpu = r.cpu;
      rec.hdr.ts_ns = now;
      rec.cpu_id = r.cpu;
      rec.khz = r.khz;
      rec.max_khz = r.max_khz;
      rec.sampled = 1;
      emit(rec.hdr, sizeof(rec));
      user_records_++;
    }
  }

  SkelPtr<cpufreq_bpf, cpufreq_bpf__destroy> skel_;
  bool tracepoint_ = false;
  std::string tracepoint_error_;
  std::map<uint32_t, Last> last_;
  uint64_t next_sample_ = 0;
  uint64_t user_records_ = 0;
};

}  // namespace

std::unique_ptr<Probe> make_cpufreq_probe() { return std::make_unique<CpufreqProbe>(); }

}  // namespace ld::probes
