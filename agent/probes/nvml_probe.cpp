// nvml: each GPU's utilisation, SM clock against its maximum, clocks event (throttle) reasons,
// memory, temperature and power, sampled through NVML every 200 ms once a target maps a CUDA
// library (looked for as the cuda probe looks: process_search.hpp). NVML is the driver's own library
// (libnvidia-ml.so.1): dlopen()ed, never linked, so the agent runs on hosts without it, where the probe says it is
// unavailable. No BPF: NVML reads the driver's counters, which no kernel hook sees.
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"
#include "probes/process_search.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

constexpr uint64_t kSampleEveryNs = 200 * util::kNsPerMs;
constexpr unsigned kMaxDevices = 16;
constexpr size_t kMaxProcs = 256;
constexpr int kNvmlSuccess = 0;
constexpr int kClockSm = 1;         // NVML_CLOCK_SM
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr uint32_t kUnknown32 = ~0u;

struct NvmlUtilization {
  unsigned int gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
using Device = void*;

// The entry points used, by their nvml.h names. The _v2 names are those of every driver since
// 2013; nvmlDeviceGetCurrentClocksEventReasons is the 535+ name of
// nvmlDeviceGetCurrentClocksThrottleReasons (same signature), looked up first.
struct Nvml {
  void* handle = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*by_index)(unsigned int, Device*) = nullptr;
  int (*name)(Device, char*, unsigned int) = nullptr;
  int (*utilization)(Device, NvmlUtilization*) = nullptr;
  int (*clock)(Device, int, unsigned int*) = nullptr;
  int (*max_clock)(Device, int, unsigned int*) = nullptr;
  int (*reasons)(Device, unsigned long long*) = nullptr;
  int (*memory)(Device, NvmlMemory*) = nullptr;
  int (*temperature)(Device, int, unsigned int*) = nullptr;
  int (*power)(Device, unsigned int*) = nullptr;
  int (*power_limit)(Device, unsigned int*) = nullptr;

  template <typename F>
  void find(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(dlsym(handle, symbol));
  }
};

class NvmlProbe : public Probe {
 public:
  ~NvmlProbe() override {
    if (nvml_.handle) {
      if (initialised_ && nvml_.shutdown) nvml_.shutdown();
      dlclose(nvml_.handle);
    }
  }

  void start(ProbeContext& ctx) override {
    load();
    const uint64_t now = host::monotonic_now_ns();
    for (uint32_t tgid : ctx.options.tgids) track(tgid, now);
  }

  void tick(uint64_t now, const EmitFn& emit) override {
    if (!cuda_seen_)
      for (auto& [tgid, p] : procs_)
        if (now >= p.look_at_ns) look(p, now);
    if (!cuda_seen_ || now < next_sample_) return;
    next_sample_ = now + kSampleEveryNs;
    sample(now, emit);
  }

  uint64_t next_tick_ns(uint64_t) const override { return cuda_seen_ ? next_sample_ : UINT64_MAX; }

  void finish(const EmitFn& emit) override {
    if (cuda_seen_) sample(host::monotonic_now_ns(), emit);
  }

  void add_target(uint32_t tgid) override { track(tgid, host::monotonic_now_ns()); }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    std::string names;
    for (const auto& n : names_) names += (names.empty() ? "" : ", ") + n;
    if (!cuda_seen_)
      return fmt::format("NVML: {} GPU(s) ({}); nothing sampled: no target mapped a CUDA library", devices_.size(),
                         names);
    return fmt::format(
        "NVML every 200 ms: {} GPU(s) ({}): utilisation, SM clock, throttle reasons, memory, "
        "temperature, power",
        devices_.size(), names);
  }

 private:
  void load() {
    nvml_.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml_.handle)
      throw ProbeUnavailable("no NVIDIA driver library (libnvidia-ml.so.1): no GPU state to sample on this host");
    nvml_.find(nvml_.init, "nvmlInit_v2");
    nvml_.find(nvml_.shutdown, "nvmlShutdown");
    nvml_.find(nvml_.count, "nvmlDeviceGetCount_v2");
    nvml_.find(nvml_.by_index, "nvmlDeviceGetHandleByIndex_v2");
    nvml_.find(nvml_.name, "nvmlDeviceGetName");
    nvml_.find(nvml_.utilization, "nvmlDeviceGetUtilizationRates");
    nvml_.find(nvml_.clock, "nvmlDeviceGetClockInfo");
    nvml_.find(nvml_.max_clock, "nvmlDeviceGetMaxClockInfo");
    nvml_.find(nvml_.reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!nvml_.reasons) nvml_.find(nvml_.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    nvml_.find(nvml_.memory, "nvmlDeviceGetMemoryInfo");
    nvml_.find(nvml_.temperature, "nvmlDeviceGetTemperature");
    nvml_.find(nvml_.power, "nvmlDeviceGetPowerUsage");
    nvml_.find(nvml_.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    if (!nvml_.init || !nvml_.count || !nvml_.by_index)
      throw ProbeUnavailable("libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2 (a driver before 2013?)");
    if (int err = nvml_.init(); err != kNvmlSuccess)
      throw ProbeUnavailable(fmt::format("nvmlInit_v2 failed (NVML error {}): no GPU driver loaded?", err));
    initialised_ = true;
    unsigned int n = 0;
    if (nvml_.count(&n) != kNvmlSuccess || n == 0) throw ProbeUnavailable("NVML sees no GPU");
    for (unsigned int i = 0; i < std::min(n, kMaxDevices); ++i) {
      Device d = nullptr;
      if (nvml_.by_index(i, &d) != kNvmlSuccess) continue;
      devices_.push_back({i, d});
      char name[96] = "";
      if (!nvml_.name || nvml_.name(d, name, sizeof name) != kNvmlSuccess)
        std::snprintf(name, sizeof name, "GPU %u", i);
      names_.emplace_back(name);
    }
    if (devices_.empty()) throw ProbeUnavailable("NVML gives no handle for any GPU");
  }

  // GPU state is for GPU servers: sampled only once a target maps libcuda/libcudart. A target is
  // looked at on the cuda probe's schedule (the same reads of its maps serve both), through
  // kSearchForNs after it is first seen.
  struct Proc {
    uint32_t tgid = 0;
    uint64_t added_ns = 0, look_at_ns = UINT64_MAX;
    uint32_t looks = 0;
  };

  void track(uint32_t tgid, uint64_t now) {
    if (Proc* p = add_process(procs_, tgid, now, kMaxProcs)) look(*p, now);
  }

  void look(Proc& p, uint64_t now) {
    if (!cuda_libraries(read_process_maps(p.tgid, now)).empty()) {
      cuda_seen_ = true;
      next_sample_ = now;
      return;
    }
    const uint64_t until = p.added_ns + kSearchForNs;
    p.look_at_ns = now < until ? next_look_ns(now, p.looks, until) : UINT64_MAX;
  }

  uint32_t first_target() const { return procs_.empty() ? 0 : procs_.begin()->first; }

  template <typename Fn, typename... Args>
  static uint32_t read_u32(Fn fn, Device d, Args... args) {
    unsigned int v = 0;
    return fn && fn(d, args..., &v) == kNvmlSuccess ? v : kUnknown32;
  }

  void sample(uint64_t now, const EmitFn& emit) {
    for (const auto& [index, d] : devices_) {
      ld_gpu_sample rec{};
      rec.hdr.type = LD_EV_GPU_SAMPLE;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = first_target();
      rec.hdr.ts_ns = now;
      rec.device = index;
      NvmlUtilization u{};
      const bool have_util = nvml_.utilization && nvml_.utilization(d, &u) == kNvmlSuccess;
      rec.util_gpu = have_util ? u.gpu : kUnknown32;
      rec.util_mem = have_util ? u.memory : kUnknown32;
      rec.sm_mhz = read_u32(nvml_.clock, d, kClockSm);
      rec.sm_max_mhz = read_u32(nvml_.max_clock, d, kClockSm);
      unsigned long long reasons = 0;
      rec.reasons = nvml_.reasons && nvml_.reasons(d, &reasons) == kNvmlSuccess ? reasons : ~0ULL;
      NvmlMemory m{};
      const bool have_mem = nvml_.memory && nvml_.memory(d, &m) == kNvmlSuccess;
      rec.mem_used = have_mem ? m.used : ~0ULL;
      rec.mem_total = have_mem ? m.total : ~0ULL;
      rec.temp_c = read_u32(nvml_.temperature, d, kTemperatureGpu);
      rec.power_mw = read_u32(nvml_.power, d);
      rec.power_limit_mw = read_u32(nvml_.power_limit, d);
      emit(rec.hdr, sizeof(rec));
      ++user_records_;
    }
  }

  Nvml nvml_;
  bool initialised_ = false;
  std::vector<std::pair<unsigned, Device>> devices_;
  std::vector<std::string> names_;
  std::map<uint32_t, Proc> procs_;
  bool cuda_seen_ = false;
  uint64_t next_sample_ = 0, user_records_ = 0;
};

}  // namespace

std::unique_ptr<Probe> make_nvml_probe() { return std::make_unique<NvmlProbe>(); }

}  // namespace ld::probes
