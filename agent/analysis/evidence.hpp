// The evidence of a recording, indexed for attribution: every evidence record (bpf/events.h)
// kept per thread and sorted by time, so that "what was thread T doing in [a, b]" is a few
// binary searches. Pure analysis: knows nothing of libbpf.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "model/cause.hpp"
#include "util/big_vector.hpp"
#include "util/time.hpp"

struct ld_hdr;

namespace ld::analysis {

using model::Cause;

// Kernel stacks (symbolised, innermost first) classified by the code they were in.
Cause classify_kernel_stack(const std::vector<std::string>& frames);

struct OffCpu {
  uint64_t off_ns = 0, wake_ns = 0, on_ns = 0;
  int64_t kstack_id = -1;
  uint32_t syscall_nr = ~0u;
  uint32_t waker_tid = 0, waker_tgid = 0;
  uint32_t holder_tid = 0, holder_tgid = 0;
  // Task names as interned ids (EvidenceStore::comm_name): an OffCpu per context switch is the
  // bulk of a trace's evidence, and a few dozen distinct names repeat millions of times.
  uint32_t waker_comm = 0, holder_comm = 0;
  bool preempted = false;
  uint16_t cpu = 0;  // where it ran after on_ns (the record is written at the switch-in)
};

struct SchedAgg {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t blocked_ns = 0, runnable_ns = 0;
  // Who ended the period's short blocked slices (the first two distinct wakers; tid 0 = none;
  // traces of record layout 2 carry none).
  struct Waker {
    uint32_t tid = 0, tgid = 0, count = 0;
  };
  std::array<Waker, 2> wakers{};
};

struct Syscall {
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t kind = 0;  // enum ld_syscall_kind
  uint64_t arg0 = 0, arg1 = 0;
  int64_t ret = 0;
  std::string path;
};

struct GilWait {
  uint64_t start_ns = 0, end_ns = 0, dur_ns = 0;
  uint32_t count = 0;
};

struct Faults {
  uint64_t first_ns = 0, last_ns = 0;
  uint32_t count = 0;
};

struct CpuSample {  // 16 bytes: a third of a trace's records are samples
  uint64_t ts_ns = 0;
  int32_t kstack_id = -1;         // classified in finish(): stacks come at the end of a trace
  Cause cause = Cause::kCompute;  // compute for user mode or an ordinary kernel path
  bool user_mode = true;
  uint16_t frames = 0;  // EvidenceStore::sample_frames() id; 0 = no user-space frames
};
static_assert(sizeof(CpuSample) == 16, "a third of a trace's records are samples");

// A named user-space frame (ld_ustack / ld_pystack), innermost first in its stack.
struct UserFrame {
  std::string func;   // "ld_wl::slow_detokenize", "Handler.do_POST"; "" = no symbol
  std::string where;  // native: the mapped file's name; Python: the file (its tail)
  int32_t line = -1;  // Python only
  bool python = false;
};

// What one sample's thread ran in user space: the stacks of its process (ids per tgid).
struct SampleFrames {
  uint32_t tgid = 0;
  int32_t ustack_id = -1;   // < 0: none
  uint64_t pystack_id = 0;  // 0: none
  bool operator<(const SampleFrames& o) const {
    return std::tie(tgid, ustack_id, pystack_id) < std::tie(o.tgid, o.ustack_id, o.pystack_id);
  }
};

struct Reclaim {
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t kind = 0;
};

// CUDA calls of a thread (the cuda probe): launches summed per burst, the rest itemised.
struct CudaCall {
  uint64_t start_ns = 0, end_ns = 0;  // LAUNCH: first entry -> last return
  uint64_t dur_ns = 0;                // time in the calls (LAUNCH: summed)
  uint64_t arg = 0;                   // SYNC: stream/event; MEMCPY, ALLOC: bytes
  uint32_t count = 0;
  uint16_t kind = 0;  // enum ld_cuda_kind
  uint16_t api = 0;   // enum ld_cuda_api
  // A call the host thread waits in: for the GPU (sync, synchronous copy) or an allocation.
  bool blocks() const;
};

// Everything known of one thread, each list sorted by start time after finish().
struct ThreadEvidence {
  uint32_t tid = 0, tgid = 0;
  size_t index = 0;  // 0..threads()-1, set by finish(): for side tables indexed by thread
  std::string comm;  // when some record named it (as a waker or holder)
  util::BigVector<OffCpu> offcpu;
  util::BigVector<SchedAgg> aggs;
  std::vector<Syscall> syscalls;
  util::BigVector<GilWait> gil_waits;
  util::BigVector<Faults> faults;
  util::BigVector<CpuSample> samples;
  util::BigVector<Reclaim> reclaims;
  std::vector<CudaCall> cuda;
  uint64_t migrations = 0;
  // The longest item (end - start) of each list, set by finish(): how far before a window a
  // search must look for items that overlap it. Per list: one 300 ms fsync must not make every
  // window scan 300 ms of short sched periods.
  struct Longest {
    uint64_t aggs = 0, syscalls = 0, gil_waits = 0, faults = 0, reclaims = 0, cuda = 0;
  } longest;
};

struct CgroupSample {
  uint64_t ts_ns = 0;
  uint64_t nr_throttled = 0, throttled_ns = 0;
  uint64_t quota_us = ~0ULL, period_us = ~0ULL;
};

struct NetSample {
  uint64_t ts_ns = 0;
  uint64_t listen_overflows = 0, listen_drops = 0, time_wait = 0, retrans_segs = 0;
  uint64_t passive_opens = 0, active_opens = 0;
};

struct TcpEvent {
  uint64_t ts_ns = 0;
  uint16_t oldstate = 0, newstate = 0, lport = 0;
  bool time_wait = false;  // entered TIME_WAIT (inferred)
  bool established = false;
};

struct FreqSample {
  uint64_t ts_ns = 0;
  uint32_t cpu = 0, khz = 0, max_khz = 0;
};

// One GPU's state (the nvml probe); ~0 = not reported.
struct GpuSample {
  uint64_t ts_ns = 0;
  uint32_t device = 0, util = ~0u, sm_mhz = ~0u, sm_max_mhz = ~0u, temp_c = ~0u, power_mw = ~0u;
  uint64_t reasons = ~0ULL, mem_used = ~0ULL, mem_total = ~0ULL;
  // Its SM clock held below 90% of the maximum by a power or thermal limit (not by idleness or
  // an application clock setting): the GPU ran slower than it can.
  bool throttled() const;
};

class EvidenceStore {
 public:
  // Returns false for records that are not evidence (socket IO is the timeline's).
  bool add(const ld_hdr& rec, size_t size);
  void finish();  // sort; classify samples with the kernel stacks; call once

  bool empty() const { return evidence_records_ == 0; }
  uint64_t records() const { return evidence_records_; }
  bool has_sched() const { return has_sched_; }
  bool has_samples() const { return has_samples_; }

  const ThreadEvidence* thread(uint32_t tid) const;
  const std::unordered_map<uint32_t, ThreadEvidence>& threads() const { return threads_; }
  std::string comm_of(uint32_t tid) const;  // "" when no record named it
  bool is_gil_address(uint32_t tgid, uint64_t uaddr) const;
  std::string gil_method(uint32_t tgid) const;
  const std::vector<CgroupSample>& cgroup_samples() const { return cgroup_; }
  const std::vector<NetSample>& net_samples() const { return net_; }
  const std::vector<TcpEvent>& tcp_events() const { return tcp_; }
  const std::vector<FreqSample>& freq_samples() const { return freq_; }
  // One CPU's frequency samples in time order (null when none): the clock a span ran at.
  const std::vector<FreqSample>* freq_of(uint32_t cpu) const;
  const std::vector<GpuSample>& gpu_samples() const { return gpu_; }
  uint64_t retransmits_between(uint64_t a, uint64_t b) const;
  // CUDA (the cuda probe): whether a thread called CUDA (an engine thread), and the spans in
  // which process `tgid` had work queued on the GPU, inferred from its calls: a burst of
  // launches to the return of the next call that waited for the GPU on the same thread (or to
  // its last launch, when none followed within kGpuQueueHorizonNs). Sorted, merged.
  bool has_cuda() const { return !cuda_threads_.empty(); }
  bool uses_cuda(uint32_t tid) const;
  const std::vector<uint32_t>* cuda_threads(uint32_t tgid) const;  // null when none
  const std::vector<std::pair<uint64_t, uint64_t>>* gpu_queued(uint32_t tgid) const;
  static constexpr uint64_t kGpuQueueHorizonNs = util::kNsPerSec;
  const std::vector<std::string>* kstack(uint32_t source, int64_t id) const;
  // The syscall an on-CPU sample's kernel stack is inside ("getrandom", from its
  // __x64_sys_getrandom frame), or "" (user mode, or no syscall frame).
  const std::string& sample_syscall(const CpuSample& s) const;
  const std::string& comm_name(uint32_t id) const { return comm_names_[id]; }  // OffCpu comms
  // classify_kernel_stack() of the sched probe's stack `id` (kUnknown when the trace lacks it),
  // classified once in finish(): blocked intervals ask for the same few stacks again and again.
  Cause blocked_stack_cause(int64_t id) const;

  // User-space frames of the samples (the perf probe with user stacks): a CpuSample's `frames`
  // id -> its stacks (nullptr for 0 or an unknown id), and the named stacks themselves.
  bool has_frames() const { return frame_keys_.size() > 1; }
  const SampleFrames* sample_frames(uint16_t id) const;
  const std::vector<UserFrame>* ustack(uint32_t tgid, int64_t id) const;
  const std::vector<UserFrame>* pystack(uint32_t tgid, uint64_t id) const;

 private:
  // add()'s decoder of record type Type (ld_event_type), one specialisation each in
  // evidence.cpp, where a table indexed by the type holds them: checks the record's size,
  // keeps its evidence, and says whether the record was usable.
  template <int Type>
  bool decode(const ld_hdr& rec, size_t size);

  uint16_t intern_frames(const SampleFrames& key);
  std::vector<SampleFrames> frame_keys_{SampleFrames{}};  // [0]: none
  std::map<SampleFrames, uint16_t> frame_ids_;
  std::map<std::pair<uint32_t, int64_t>, std::vector<UserFrame>> ustacks_;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<UserFrame>> pystacks_;

  ThreadEvidence& thread_of(const ld_hdr& rec);
  // Threads by tid modulo 256, in front of the map: a server's few busy threads answer nearly
  // every record without a hash lookup.
  std::array<ThreadEvidence*, 256> thread_cache_{};
  std::array<uint32_t, 2> recently_named_{~0u, ~0u};
  uint32_t intern_comm(const char* comm);  // LD_COMM_LEN bytes -> id into comm_names_
  std::vector<std::string> comm_names_{""};
  std::unordered_map<std::string, uint32_t> comm_ids_{{"", 0}};
  std::array<std::pair<std::array<char, 16>, uint32_t>, 2> last_comms_{};  // id 0 is "" (zeros)
  void name(uint32_t tid, uint32_t tgid, const char* comm);

  std::unordered_map<uint32_t, ThreadEvidence> threads_;
  std::unordered_map<uint32_t, std::string> comms_;
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> gil_ranges_;
  std::map<uint32_t, uint32_t> gil_methods_;
  std::map<std::pair<uint32_t, int64_t>, std::vector<std::string>> kstacks_;
  std::unordered_map<int64_t, Cause> sched_stack_causes_;
  std::unordered_map<int64_t, std::string> perf_stack_syscalls_;
  std::vector<CgroupSample> cgroup_;
  std::vector<NetSample> net_;
  std::vector<TcpEvent> tcp_;
  std::vector<FreqSample> freq_;
  std::map<uint32_t, std::vector<FreqSample>> freq_by_cpu_;
  std::vector<GpuSample> gpu_;
  std::vector<uint64_t> retransmits_;
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> gpu_queued_;  // by tgid
  std::map<uint32_t, std::vector<uint32_t>> cuda_threads_;                     // by tgid
  void infer_gpu_queued();
  uint64_t evidence_records_ = 0;
  bool has_sched_ = false;
  bool has_samples_ = false;
};

}  // namespace ld::analysis
