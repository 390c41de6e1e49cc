// cgroup: CFS quota throttling and memory state of the targets' cgroups, sampled from the
// cgroup filesystem (v1 cpu / memory hierarchies or the v2 unified tree). User space only: the
// kernel already keeps these counters, there is nothing to trace.
//
// Without a CPU quota nothing can throttle, and the session's once-a-second tick samples (the
// memory numbers, and a quota set during the run): no thread of its own, whose wake-ups would
// be a second disturbance a second for the server's CPUs. Under a quota a period is typically
// 100 ms, too short for that tick to place a throttled stretch: a sampler thread then reads
// every 50 ms and buffers the samples, for as long as a quota exists; tick()/finish() emit
// them on the session thread (the EmitFn is not thread-safe).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "events.h"
#include "host/cgroup.hpp"
#include "host/host_facts.hpp"
#include "probes/privileges.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// Every 50 ms while a watched cgroup has a CPU quota (throttling is only possible then); every
// second otherwise, which still notices a quota set during the run. The memory files change
// meaning slowly and are read once a second. At 50 ms for everything, the sampler read ~160
// files a second, the largest part of an idle agent's CPU.
constexpr auto kSampleEvery = std::chrono::milliseconds(50);
constexpr uint64_t kMemoryEveryNs = util::kNsPerSec;
// Membership can change (a process moved into another cgroup): re-read /proc/PID/cgroup.
constexpr uint64_t kResolveEveryNs = 500 * util::kNsPerMs;
// Nothing changed on the CPU side: still one sample a second, for the memory numbers.
constexpr uint64_t kIdleEmitEveryNs = util::kNsPerSec;
// If the session stops ticking, do not grow without bound (20 s of samples per cgroup).
constexpr size_t kMaxBuffered = 4096;

struct Watched {
  uint32_t tgid = 0;  // the first target found in this cgroup
  host::CgroupDirs dirs;
  ld_cgroup_sample last{};
  uint64_t last_emit_ns = 0;
  host::CgroupMemory memory;
  uint64_t memory_read_ns = 0;  // 0: never read
};

std::string unavailable_reason(uint32_t tgid, const std::optional<host::CgroupDirs>& dirs) {
  if (!dirs) return fmt::format("cannot read /proc/{}/cgroup: the target's cgroup is unknown", tgid);
  return fmt::format(
      "no cpu cgroup controller reachable for pid {}: no mounted cgroup v1 hierarchy has the "
      "cpu controller and its cgroup v2 directory does not enable cpu (cgroup.controllers)",
      tgid);
}

class CgroupProbe : public Probe {
 public:
  ~CgroupProbe() override { stop(); }

  void start(ProbeContext& ctx) override {
    targets_.assign(ctx.options.tgids.begin(), ctx.options.tgids.end());
    std::string reason = "no target process";
    for (uint32_t tgid : targets_) {
      auto dirs = host::find_cgroup_dirs("", int(tgid));
      if (dirs && !dirs->cpu.empty()) {
        reason.clear();
        detail_ = fmt::format(
            "cgroup {} cpu {} (memory {}), sampled every 50 ms under a CPU quota, "
            "else every read interval",
            dirs->cpu_v2 ? "v2" : "v1", dirs->cpu, dirs->memory.empty() ? "unreachable" : dirs->memory);
        break;
      }
      reason = unavailable_reason(tgid, dirs);
    }
    if (!reason.empty()) throw ProbeUnavailable(reason);
    // The baseline sample, taken before start() returns (the sampler thread may be scheduled
    // late): counters are cumulative, and a reader wants their value at attach.
    sample_all();
    if (quota_watched()) start_sampler();
  }

  void tick(uint64_t, const EmitFn& emit) override {
    if (sampler_done_ && sampler_.joinable()) {  // the quota went away: back to sampling here
      sampler_.join();
      sampler_done_ = false;
    }
    if (!sampler_.joinable()) {
      sample_all();
      if (quota_watched()) start_sampler();
    }
    drain(emit);
  }

  void finish(const EmitFn& emit) override {
    stop();
    sample_all(true);  // the state at the end of the recording, changed or not
    drain(emit);
  }

  void add_target(uint32_t tgid) override {
    std::lock_guard lock(mu_);
    targets_.push_back(tgid);
    next_resolve_ = 0;
  }

  uint64_t user_records() const override { return user_records_; }
  std::string detail() const override { return detail_; }

 private:
  // Only while the sampler thread is not running (or from it).
  bool quota_watched() const {
    return std::any_of(watched_.begin(), watched_.end(),
                       [](const Watched& w) { return w.last.quota_us != host::kCgroupUnknown; });
  }

  void start_sampler() {
    sampler_done_ = false;
    sampler_ = std::thread([this] { run(); });
  }

  // While a watched cgroup has a quota; then hands sampling back to tick().
  void run() {
    // Capabilities are per thread: the recorder's drop after attach covers only its own thread,
    // and this one reads world-readable cgroup files, so it gives up loading privileges at once.
    (void)drop_capabilities(/*keep_attach=*/false);
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      sample_all();
      const bool quota = quota_watched();
      lock.lock();
      if (!quota) break;
      cv_.wait_for(lock, kSampleEvery, [this] { return stopping_; });
    }
    sampler_done_ = true;
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (sampler_.joinable()) sampler_.join();
  }

  // Only the sampler thread while it runs, else the session thread (tick(), finish()), touches
  // watched_.
  void resolve() {
    std::vector<uint32_t> targets;
    {
      std::lock_guard lock(mu_);
      targets = targets_;
    }
    std::vector<Watched> next;
    util::FileReader read = files_.reader();
    for (uint32_t tgid : targets) {
      // Membership as the kernel shows it; the directories are derived again (reading the
      // mount table, which costs more than the rest of a sample) only when it changed.
      std::string membership = read(fmt::format("/proc/{}/cgroup", tgid));
      Membership& known = memberships_[tgid];
      if (membership.empty() || membership != known.text)
        known = {membership, host::find_cgroup_dirs_from("", membership)};
      const std::optional<host::CgroupDirs>& dirs = known.dirs;
      // Read after the cgroup file: an exiting task is moved to the root cgroup, so dirs read
      // from a zombie would name the root's (unlimited) quota.
      bool alive = host::process_alive(int(tgid), read);
      if (!alive || !dirs || dirs->cpu.empty()) {
        // Gone (exited): keep sampling its last cgroup, so the final sample at finish() still
        // covers the end of its run.
        for (const auto& w : watched_)
          if (w.tgid == tgid) next.push_back(w);
        continue;
      }
      auto same = [&](const Watched& w) { return w.dirs == *dirs; };
      if (std::any_of(next.begin(), next.end(), same)) continue;
      auto old = std::find_if(watched_.begin(), watched_.end(), same);
      next.push_back(old != watched_.end() ? *old : Watched{tgid, *dirs, {}, 0, {}, 0});
    }
    watched_ = std::move(next);
  }

  void sample_all(bool force = false) {
    uint64_t now = host::monotonic_now_ns();
    bool due;
    {
      std::lock_guard lock(mu_);
      due = now >= next_resolve_;
      if (due) next_resolve_ = now + kResolveEveryNs;
    }
    if (due) resolve();
    for (auto& w : watched_) sample(w, host::monotonic_now_ns(), force);
  }

  void sample(Watched& w, uint64_t now, bool force) {
    auto cpu = host::read_cgroup_cpu(w.dirs.cpu, w.dirs.cpu_v2, files_.reader());
    if (force || w.memory_read_ns == 0 || now - w.memory_read_ns >= kMemoryEveryNs) {
      w.memory = host::read_cgroup_memory(w.dirs.memory, w.dirs.memory_v2, files_.reader());
      w.memory_read_ns = now;
    }
    const host::CgroupMemory& mem = w.memory;
    ld_cgroup_sample rec{};
    rec.hdr.type = LD_EV_CGROUP_SAMPLE;
    rec.hdr.size = sizeof(rec);
    rec.hdr.tgid = w.tgid;
    rec.hdr.tid = w.tgid;
    rec.hdr.ts_ns = now;
    rec.nr_periods = cpu.nr_periods;
    rec.nr_throttled = cpu.nr_throttled;
    rec.throttled_ns = cpu.throttled_ns;
    rec.quota_us = cpu.quota_us;
    rec.period_us = cpu.period_us;
    rec.mem_usage_now = mem.usage;
    rec.mem_limit = mem.limit;
    rec.mem_events_high = mem.events_high;
    rec.mem_events_oom = mem.events_oom;
    // Emit on any CPU-side change (each quota period while busy), else once a second.
    bool changed = rec.nr_periods != w.last.nr_periods || rec.nr_throttled != w.last.nr_throttled ||
                   rec.quota_us != w.last.quota_us || rec.period_us != w.last.period_us ||
                   rec.mem_limit != w.last.mem_limit || rec.mem_events_oom != w.last.mem_events_oom ||
                   rec.mem_events_high != w.last.mem_events_high;
    if (!force && !changed && now - w.last_emit_ns < kIdleEmitEveryNs) return;
    w.last = rec;
    w.last_emit_ns = now;
    std::lock_guard lock(mu_);
    if (buffered_.size() < kMaxBuffered) buffered_.push_back(rec);
    else dropped_++;
  }

  void drain(const EmitFn& emit) {
    std::vector<ld_cgroup_sample> out;
    {
      std::lock_guard lock(mu_);
      out.swap(buffered_);
    }
    for (const auto& rec : out) emit(rec.hdr, sizeof(rec));
    user_records_ += out.size();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<uint32_t> targets_;           // guarded by mu_
  std::vector<ld_cgroup_sample> buffered_;  // guarded by mu_
  uint64_t next_resolve_ = 0;               // guarded by mu_
  uint64_t dropped_ = 0;                    // guarded by mu_
  std::vector<Watched> watched_;            // the sampling thread only (see resolve())
  util::FileCache files_;                   // the cgroup files and /proc/PID/cgroup: as watched_
  struct Membership {
    std::string text;                      // /proc/PID/cgroup as last read
    std::optional<host::CgroupDirs> dirs;  // found for that text
  };
  std::map<uint32_t, Membership> memberships_;  // by tgid; the sampling thread only
  std::thread sampler_;                         // runs only while a quota exists
  std::atomic<bool> sampler_done_{false};       // it returned: tick() joins it
  uint64_t user_records_ = 0;                   // session thread only
  std::string detail_;
};

}  // namespace

std::unique_ptr<Probe> make_cgroup_probe() { return std::make_unique<CgroupProbe>(); }

}  // namespace ld::probes
