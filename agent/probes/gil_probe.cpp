// gil: Python GIL waits of the targets, timed on the GIL's futex words.
//
// The futex words are learned per process with temporary uprobes on take_gil (or the exported
// PyEval_RestoreThread for stripped builds): a futex wait made inside that function is on the
// GIL. Once learned the uprobes are detached (a permanent uprobe on take_gil costs ~70% of an
// IO-heavy loop's throughput) and only the futex syscall tracepoints keep running. Those run
// on every futex call of every task (a syscall tracepoint turns on the slow path for all), so
// they are attached only while a target learns or has learned words: a server without Python
// (llama-server: ~3.6 futex calls a token) pays nothing for this probe.
//
// Per process: Searching (no Python mapped yet: a child may exec python later) -> Learning
// (uprobes attached) -> Learned (detached). A Python that never contends never waits on the
// GIL's futex, so after kLearnWindowNs without an address the uprobes are detached and
// re-armed briefly with exponential backoff (Idle), to bound the cost.
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "events.h"
#include "gil.skel.h"
#include "gil_maps.h"
#include "host/host_facts.hpp"
#include "probes/elf_symbols.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "probes/process_search.hpp"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

using util::kNsPerSec;
constexpr uint64_t kLearnWindowNs = 10 * kNsPerSec;  // first try: no contention in 10 s -> say so
constexpr uint64_t kSettleNs = kNsPerSec;            // after the first word: catch the others
constexpr size_t kWordsOfOneGil = 3;                 // condvar's 2 alternating words + the mutex
constexpr uint64_t kRearmWindowNs = 2 * kNsPerSec;
constexpr uint64_t kFirstIdleNs = 30 * kNsPerSec;
constexpr uint64_t kMaxIdleNs = 600 * kNsPerSec;
// A child may exec python after the fork: looked at again (process_search.hpp) through
// kSearchForNs.
constexpr uint64_t kLearningTickNs = kNsPerSec / 10;
constexpr size_t kMaxProcs = 256;

enum class Phase { Searching, NoPython, Learning, Idle, Learned, Gone };

struct Proc {
  uint32_t tgid = 0;
  Phase phase = Phase::Searching;
  PythonRuntime rt;
  uint32_t method = 0;
  bpf_link* enter = nullptr;
  bpf_link* leave = nullptr;
  uint64_t added_ns = 0, next_search_ns = 0;
  uint32_t searches = 0;  // /proc/PID/maps reads so far
  uint64_t armed_ns = 0, window_ns = kLearnWindowNs, idle_ns = kFirstIdleNs, rearm_at_ns = 0;
  uint64_t first_word_ns = 0;
  bool ever_timed_out = false;
  std::string attach_error;
  std::set<uint64_t> words;  // reported as ld_gil_addr
};

const char* method_name(uint32_t m) {
  return m == LD_GIL_TAKE_GIL ? "take_gil" : m == LD_GIL_RESTORE_THREAD ? "PyEval_RestoreThread" : "?";
}

class GilProbe : public Probe {
 public:
  ~GilProbe() override {
    for (auto& [tgid, p] : procs_) detach(p);
    detach_futex_hooks();
  }

  const void* bpf_object_elf(size_t* size) const override { return gil_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(gil_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("gil", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    if (int err = gil_bpf__load(skel_.get())) throw_libbpf_error("gil", "loading", err);
    // The uprobes are attached per process, the futex tracepoints with the first of them.
    uint64_t now = host::monotonic_now_ns();
    for (uint32_t tgid : ctx.options.tgids) track(tgid, now);
    // Uprobes refused for every target (e.g. no uprobe PMU): this probe cannot work here.
    bool all_failed = !procs_.empty() && std::all_of(procs_.begin(), procs_.end(),
                                                     [](auto& kv) { return !kv.second.attach_error.empty(); });
    if (all_failed) throw ProbeUnavailable(procs_.begin()->second.attach_error);
  }

  void tick(uint64_t now, const EmitFn& emit) override {
    report_new_words(now, emit);
    for (auto& [tgid, p] : procs_) step(p, now);
    if (!wants_futex_hooks()) detach_futex_hooks();
  }

  uint64_t next_tick_ns(uint64_t now) const override {
    // The uprobe costs the server on every GIL take: look for learned words often, so that
    // it comes off soon after they appear. The other phases' times (the next look at the
    // maps, the re-arm) wait for the read interval's tick: a wake-up of their own would
    // cost a server thread one more preemption for work that is not urgent.
    bool learning =
        std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) { return kv.second.phase == Phase::Learning; });
    return learning ? now + kLearningTickNs : UINT64_MAX;
  }

  void finish(const EmitFn& emit) override {
    report_new_words(host::monotonic_now_ns(), emit);
    flush_aggregates(emit);
  }

  void add_target(uint32_t tgid) override { track(tgid, host::monotonic_now_ns()); }

  // A process not yet learned may need the uprobe (again): one still being looked at (a
  // launcher that execs python later), one learning now (it may time out and be re-armed),
  // one idle until its re-arm.
  bool attaches_later() const override {
    return std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) {
      Phase ph = kv.second.phase;
      return ph == Phase::Searching || ph == Phase::Learning || ph == Phase::Idle;
    });
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    const char* hooks = enter_tp_ ? "futex tracepoints on learned GIL words"
                                  : "futex tracepoints off (no target learning or holding GIL words)";
    return per_process_detail(hooks, procs_, [&](const Proc& p) { return describe(p); });
  }

 private:
  void track(uint32_t tgid, uint64_t now) {
    if (Proc* p = add_process(procs_, tgid, now, kMaxProcs)) search(*p, now);
  }

  // Finds the Python runtime in the process's mappings and arms the learning uprobes.
  void search(Proc& p, uint64_t now) {
    std::string maps = read_process_maps(p.tgid, now);
    if (maps.empty()) {
      p.phase = Phase::Gone;
      return;
    }
    auto rt = find_python_runtime(maps, fmt::format("/proc/{}/root", p.tgid));
    if (!rt) {
      p.phase = now - p.added_ns < kSearchForNs ? Phase::Searching : Phase::NoPython;
      // The last look at the window's end: until then the agent keeps CAP_SYS_ADMIN for it.
      p.next_search_ns = next_look_ns(now, p.searches, p.added_ns + kSearchForNs);
      return;
    }
    p.rt = *rt;
    p.method = rt->symbol == "take_gil" ? LD_GIL_TAKE_GIL : LD_GIL_RESTORE_THREAD;
    arm(p, now);
  }

  // The futex tracepoints matter while a process learns its words or has some to time.
  bool wants_futex_hooks() const {
    return std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) {
      const Proc& p = kv.second;
      return p.phase == Phase::Learning || (p.phase != Phase::Gone && !p.words.empty());
    });
  }

  // 0 or a negative errno; both or neither attached.
  int attach_futex_hooks() {
    if (enter_tp_) return 0;
    enter_tp_ = bpf_program__attach(skel_->progs.ld_gil_futex_enter);
    if (!enter_tp_) return -errno;
    exit_tp_ = bpf_program__attach(skel_->progs.ld_gil_futex_exit);
    if (exit_tp_) return 0;
    int err = -errno;
    detach_futex_hooks();
    return err;
  }

  void detach_futex_hooks() {
    if (enter_tp_) bpf_link__destroy(enter_tp_);
    if (exit_tp_) bpf_link__destroy(exit_tp_);
    enter_tp_ = exit_tp_ = nullptr;
  }

  void arm(Proc& p, uint64_t now) {
    // First the tracepoints: a wait inside take_gil is how the words are learned.
    if (int err = attach_futex_hooks()) {
      p.attach_error = fmt::format("futex tracepoints failed: {}", std::strerror(-err));
      p.phase = Phase::Gone;
      return;
    }
    ld_gil_learn learn{p.method, static_cast<uint32_t>(p.words.size())};
    bpf_map_update_elem(bpf_map__fd(skel_->maps.ld_gil_learning), &p.tgid, &learn, BPF_ANY);
    std::string path = fmt::format("/proc/{}/root{}", p.tgid, p.rt.path);
    int pid = static_cast<int>(p.tgid);
    p.enter = bpf_program__attach_uprobe(skel_->progs.ld_gil_enter, false, pid, path.c_str(), p.rt.file_offset);
    int err = p.enter ? 0 : -errno;
    if (p.enter) {
      p.leave = bpf_program__attach_uprobe(skel_->progs.ld_gil_leave, true, pid, path.c_str(), p.rt.file_offset);
      err = p.leave ? 0 : -errno;
    }
    if (err) {
      detach(p);
      p.attach_error = fmt::format("uprobe on {} failed: {}", p.rt.symbol, std::strerror(-err));
      p.phase = Phase::Gone;
      return;
    }
    p.phase = Phase::Learning;
    p.armed_ns = now;
  }

  // Uprobes off; the learned words (if any) stay in ld_gil_addrs for the tracepoints.
  void detach(Proc& p) {
    if (!skel_) return;
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.ld_gil_learning), &p.tgid);
    if (p.enter) bpf_link__destroy(p.enter);
    if (p.leave) bpf_link__destroy(p.leave);
    bool was_armed = p.enter || p.leave;
    p.enter = p.leave = nullptr;
    if (was_armed) clear_intake(p.tgid);
  }

  // A thread inside take_gil at detach never runs the uretprobe: drop its flag so that a
  // later re-arm does not take its next unrelated futex wait for a GIL wait.
  void clear_intake(uint32_t tgid) {
    int fd = bpf_map__fd(skel_->maps.ld_gil_intake);
    std::vector<uint32_t> stale;
    for_each_map_key<uint32_t>(fd, [&](uint32_t tid) {
      if (access(fmt::format("/proc/{}/task/{}", tgid, tid).c_str(), F_OK) == 0) stale.push_back(tid);
    });
    for (uint32_t tid : stale) bpf_map_delete_elem(fd, &tid);
  }

  void step(Proc& p, uint64_t now) {
    switch (p.phase) {
      case Phase::Searching:
        if (now >= p.next_search_ns) search(p, now);
        break;
      case Phase::Learning:
        if (!p.words.empty()) {
          if (p.words.size() >= kWordsOfOneGil || now - p.first_word_ns >= kSettleNs) {
            detach(p);
            p.phase = Phase::Learned;
          }
        } else if (now - p.armed_ns >= p.window_ns) {
          detach(p);
          p.ever_timed_out = true;
          p.phase = Phase::Idle;
          p.rearm_at_ns = now + p.idle_ns;
          p.idle_ns = std::min(p.idle_ns * 2, kMaxIdleNs);
          p.window_ns = kRearmWindowNs;
        }
        break;
      case Phase::Idle:
        if (now >= p.rearm_at_ns) arm(p, now);
        break;
      default: break;
    }
    if (p.phase != Phase::Gone && access(fmt::format("/proc/{}", p.tgid).c_str(), F_OK) != 0) {
      detach(p);
      p.phase = Phase::Gone;
    }
  }

  // New words in ld_gil_addrs -> one ld_gil_addr record each.
  void report_new_words(uint64_t now, const EmitFn& emit) {
    int fd = bpf_map__fd(skel_->maps.ld_gil_addrs);
    for_each_map_key<ld_gil_key>(fd, [&](const ld_gil_key& key) {
      uint32_t method = 0;
      if (bpf_map_lookup_elem(fd, &key, &method)) return;
      auto it = procs_.find(key.tgid);
      if (it == procs_.end() || !it->second.words.insert(key.uaddr).second) return;
      if (it->second.words.size() == 1) it->second.first_word_ns = now;
      ld_gil_addr rec{};
      rec.hdr.type = LD_EV_GIL_ADDR;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = key.tgid;
      rec.hdr.ts_ns = now;
      rec.uaddr_lo = key.uaddr;
      rec.uaddr_hi = key.uaddr + 4;  // a futex word is 32 bits
      rec.method = method;
      emit(rec.hdr, sizeof(rec));
      ++user_records_;
    });
  }

  // Short waits still summed in the kernel, one record per thread.
  void flush_aggregates(const EmitFn& emit) {
    int fd = bpf_map__fd(skel_->maps.ld_gil_aggs);
    for_each_map_key<uint32_t>(fd, [&](uint32_t key) {
      ld_gil_agg a{};
      if (bpf_map_lookup_elem(fd, &key, &a) || !a.count) return;
      ld_gil_wait rec{};
      rec.hdr.type = LD_EV_GIL_WAIT;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = a.tgid;
      rec.hdr.tid = key;
      rec.hdr.ts_ns = a.last_end_ns;
      rec.start_ns = a.first_ns;
      rec.dur_ns = a.sum_ns;
      rec.uaddr = a.uaddr;
      rec.max_ns = a.max_ns;
      rec.count = a.count;
      rec.method = a.method;
      rec.kind = LD_GIL_WAIT_AGG;
      emit(rec.hdr, sizeof(rec));
      ++user_records_;
    });
  }

  std::string describe(const Proc& p) const {
    std::string where = p.rt.path.empty() ? "" : fmt::format(" in {}", p.rt.path);
    std::string words;
    for (uint64_t w : p.words) words += fmt::format("{}{:#x}", words.empty() ? "" : ",", w);
    switch (p.phase) {
      case Phase::Searching: return "no libpython/python in the target yet (re-checked for 10 s: a child may exec it)";
      case Phase::NoPython: return "no libpython/python in the target (idle)";
      case Phase::Learning:
        if (!words.empty())
          return fmt::format("GIL futex words {} learned via a {} uprobe{}", words, method_name(p.method), where);
        return fmt::format("{}learning the GIL address via a temporary {} uprobe{}",
                           p.ever_timed_out ? "GIL address not learned yet (no contention seen); " : "",
                           method_name(p.method), where);
      case Phase::Idle:
        return fmt::format(
            "GIL address not learned yet (no contention seen); {} uprobe{} "
            "re-armed periodically",
            method_name(p.method), where);
      case Phase::Learned:
        return fmt::format("GIL futex words {} learned via a {} uprobe{} (uprobes detached)", words,
                           method_name(p.method), where);
      case Phase::Gone:
        if (!p.attach_error.empty()) return p.attach_error;
        if (!words.empty()) return fmt::format("GIL futex words {}; exited", words);
        if (p.rt.path.empty()) return "no libpython/python in the target; process exited";
        return fmt::format("GIL address not learned (no contention seen){}; process exited", where);
    }
    return "";
  }

  SkelPtr<gil_bpf, gil_bpf__destroy> skel_;
  bpf_link* enter_tp_ = nullptr;
  bpf_link* exit_tp_ = nullptr;
  std::map<uint32_t, Proc> procs_;
  uint64_t user_records_ = 0;

 public:
  GilProbe() = default;
  GilProbe(const GilProbe&) = delete;
  GilProbe& operator=(const GilProbe&) = delete;
};

}  // namespace

std::unique_ptr<Probe> make_gil_probe() { return std::make_unique<GilProbe>(); }

}  // namespace ld::probes
