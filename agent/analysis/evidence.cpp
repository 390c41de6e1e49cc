#include "analysis/evidence.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "analysis/record_view.hpp"
#include "events.h"
#include "util/spans.hpp"

namespace ld::analysis {

using namespace model;
namespace {

// The syscall a kernel stack is inside: its entry frame (__x64_sys_NAME, __arm64_sys_NAME,
// __ia32_sys_NAME), innermost first so the outermost such frame wins.
std::string syscall_of_stack(const std::vector<std::string>& frames) {
  std::string found;
  for (const std::string& f : frames) {
    for (const char* prefix : {"__x64_sys_", "__arm64_sys_", "__ia32_sys_"}) {
      const size_t n = std::strlen(prefix);
      if (f.compare(0, n, prefix) == 0)
        found = f.substr(n, f.find('+') == std::string::npos ? std::string::npos : f.find('+') - n);
    }
  }
  return found;
}

// Stable, and a no-op on the common case: a thread's records arrive nearly in time order, and
// an ordered list then costs one comparison per item instead of a sort.
template <class V, class Key>
void sort_by(V& items, Key key) {
  auto less = [&](const auto& a, const auto& b) { return key(a) < key(b); };
  if (!std::is_sorted(items.begin(), items.end(), less)) std::stable_sort(items.begin(), items.end(), less);
}

template <class V, class Start, class End>
uint64_t longest(const V& items, Start start, End end) {
  uint64_t most = 0;
  for (const auto& item : items)
    if (end(item) > start(item)) most = std::max<uint64_t>(most, end(item) - start(item));
  return most;
}

bool contains(const std::string& frame, const char* needle) { return frame.find(needle) != std::string::npos; }

}  // namespace

Cause classify_kernel_stack(const std::vector<std::string>& frames) {
  // Reclaim and swap first: they run inside page faults and allocations.
  for (const std::string& f : frames) {
    if (contains(f, "try_to_free_pages") || contains(f, "shrink_node") || contains(f, "shrink_lruvec") ||
        contains(f, "try_to_free_mem_cgroup_pages") || contains(f, "compact_zone") || contains(f, "swap_readpage") ||
        contains(f, "do_swap_page") || contains(f, "swap_read_folio") || contains(f, "__alloc_pages_direct"))
      return Cause::kSwapReclaim;
  }
  for (const std::string& f : frames) {
    if (contains(f, "vfs_fsync") || contains(f, "do_fsync") || contains(f, "sync_file") ||
        contains(f, "file_write_and_wait") || contains(f, "jbd2") || contains(f, "blkdev_issue_flush") ||
        contains(f, "io_schedule") || contains(f, "balance_dirty_pages") || contains(f, "ksys_sync") ||
        contains(f, "folio_wait_bit") || contains(f, "wait_on_page_bit") || contains(f, "submit_bio_wait") ||
        // On-CPU work of buffered file IO (page-cache copies, block allocation): a logger's
        // write() is part of what its fsync makes the token wait for. Socket writes take
        // sock_write_iter, not these.
        contains(f, "generic_perform_write") || contains(f, "iomap_file_buffered_write") ||
        contains(f, "ext4_buffered_write_iter") || contains(f, "xfs_file_buffered_write") ||
        contains(f, "btrfs_buffered_write") || contains(f, "filemap_read"))
      return Cause::kDiskIo;
    if (contains(f, "exc_page_fault") || contains(f, "handle_mm_fault") || contains(f, "clear_page") ||
        contains(f, "clear_huge_page") || contains(f, "folio_zero") || contains(f, "do_anonymous_page") ||
        contains(f, "__do_munmap") || contains(f, "do_vmi_munmap") || contains(f, "unmap_region") ||
        contains(f, "zap_pte_range") || contains(f, "do_mmap") || contains(f, "__x64_sys_brk") ||
        contains(f, "do_madvise") || contains(f, "__x64_sys_mremap") || contains(f, "vm_mmap"))
      return Cause::kKvAlloc;
    if (contains(f, "futex_wait") || contains(f, "futex_lock_pi") || contains(f, "rwsem_down") ||
        contains(f, "mutex_lock") || contains(f, "rt_mutex"))
      return Cause::kLockContention;
    if (contains(f, "do_nanosleep") || contains(f, "hrtimer_nanosleep") || contains(f, "ep_poll") ||
        contains(f, "do_sys_poll") || contains(f, "do_select"))
      return Cause::kAppWait;
    if (contains(f, "tcp_sendmsg") || contains(f, "tcp_recvmsg") || contains(f, "sk_wait_data") ||
        contains(f, "sk_stream_wait_memory") || contains(f, "unix_stream_sendmsg") || contains(f, "__dev_queue_xmit") ||
        contains(f, "net_rx_action"))
      return Cause::kNetwork;
  }
  return Cause::kCompute;
}

const std::string& EvidenceStore::sample_syscall(const CpuSample& s) const {
  static const std::string none;
  if (s.user_mode || s.kstack_id < 0) return none;
  auto it = perf_stack_syscalls_.find(s.kstack_id);
  return it == perf_stack_syscalls_.end() ? none : it->second;
}

void EvidenceStore::finish() {
  // Samples hit a few hundred distinct stacks a million times: classify each stack once.
  std::unordered_map<int64_t, Cause> perf_stack_causes;
  auto cause_of_perf_stack = [&](int64_t id, const std::vector<std::string>& frames) {
    auto [it, added] = perf_stack_causes.try_emplace(id, Cause::kCompute);
    if (added) it->second = classify_kernel_stack(frames);
    return it->second;
  };
  size_t next_index = 0;
  for (auto& [tid, t] : threads_) {
    t.index = next_index++;
    sort_by(t.offcpu, [](const OffCpu& o) { return o.on_ns; });
    sort_by(t.aggs, [](const SchedAgg& a) { return a.end_ns; });
    sort_by(t.syscalls, [](const Syscall& s) { return s.start_ns; });
    sort_by(t.gil_waits, [](const GilWait& g) { return g.start_ns; });
    sort_by(t.faults, [](const Faults& f) { return f.first_ns; });
    sort_by(t.samples, [](const CpuSample& s) { return s.ts_ns; });
    sort_by(t.reclaims, [](const Reclaim& r) { return r.start_ns; });
    sort_by(t.cuda, [](const CudaCall& c) { return c.start_ns; });
    // The ends as the walk's searches read them (faults: last fault + 1 ns).
    t.longest.aggs = longest(
        t.aggs, [](auto& g) { return g.start_ns; }, [](auto& g) { return g.end_ns; });
    t.longest.syscalls = longest(
        t.syscalls, [](auto& s) { return s.start_ns; }, [](auto& s) { return s.end_ns; });
    t.longest.gil_waits = longest(
        t.gil_waits, [](auto& g) { return g.start_ns; }, [](auto& g) { return g.end_ns; });
    t.longest.faults = longest(
        t.faults, [](auto& f) { return f.first_ns; }, [](auto& f) { return f.last_ns + 1; });
    t.longest.reclaims = longest(
        t.reclaims, [](auto& r) { return r.start_ns; }, [](auto& r) { return r.end_ns; });
    t.longest.cuda = longest(
        t.cuda, [](auto& c) { return c.start_ns; }, [](auto& c) { return c.end_ns; });
    for (CpuSample& s : t.samples) {
      if (s.user_mode || s.kstack_id < 0) continue;
      if (auto known = perf_stack_causes.find(s.kstack_id); known != perf_stack_causes.end()) {
        s.cause = known->second;
        continue;
      }
      if (auto* frames = kstack(LD_PROBE_PERF, s.kstack_id)) s.cause = cause_of_perf_stack(s.kstack_id, *frames);
    }
    if (t.comm.empty()) t.comm = comm_of(tid);
  }
  for (const auto& [key, frames] : kstacks_) {
    if (key.first == LD_PROBE_SCHED) sched_stack_causes_[key.second] = classify_kernel_stack(frames);
    if (key.first == LD_PROBE_PERF) perf_stack_syscalls_[key.second] = syscall_of_stack(frames);
  }
  sort_by(cgroup_, [](const CgroupSample& c) { return c.ts_ns; });
  sort_by(net_, [](const NetSample& n) { return n.ts_ns; });
  sort_by(tcp_, [](const TcpEvent& e) { return e.ts_ns; });
  sort_by(freq_, [](const FreqSample& f) { return f.ts_ns; });
  for (const FreqSample& f : freq_) freq_by_cpu_[f.cpu].push_back(f);
  sort_by(gpu_, [](const GpuSample& g) { return g.ts_ns; });
  std::sort(retransmits_.begin(), retransmits_.end());
  infer_gpu_queued();
}

bool GpuSample::throttled() const {
  constexpr uint64_t kLimits = LD_GPU_R_SW_POWER_CAP | LD_GPU_R_HW_SLOWDOWN | LD_GPU_R_SW_THERMAL |
                               LD_GPU_R_HW_THERMAL | LD_GPU_R_HW_POWER_BRAKE;
  if (reasons == ~0ULL || !(reasons & kLimits) || sm_mhz == ~0u || sm_max_mhz == ~0u || !sm_max_mhz) return false;
  return 10ULL * sm_mhz < 9ULL * sm_max_mhz;
}

const std::vector<FreqSample>* EvidenceStore::freq_of(uint32_t cpu) const {
  auto it = freq_by_cpu_.find(cpu);
  return it == freq_by_cpu_.end() ? nullptr : &it->second;
}

bool CudaCall::blocks() const { return kind == LD_CUDA_SYNC || kind == LD_CUDA_MEMCPY || kind == LD_CUDA_ALLOC; }

// The GPU's queue is not observed (that would take the driver's own counters, or CUPTI): a
// thread that launched work and then waited for the GPU had work queued from its first launch
// until that wait returned. Work launched with no wait after it (within the horizon) counts
// only while it was being launched: an idle GPU is never claimed busy on a guess. A process
// whose threads synced but never launched had its launches untraced (--cuda-launches off): its
// queue is unknown, not empty, and gets no entry.
void EvidenceStore::infer_gpu_queued() {
  gpu_queued_.clear();
  cuda_threads_.clear();
  for (const auto& [tid, t] : threads_) {
    if (t.cuda.empty()) continue;
    cuda_threads_[t.tgid].push_back(tid);
    for (size_t i = 0; i < t.cuda.size(); ++i) {
      const CudaCall& c = t.cuda[i];
      if (c.kind != LD_CUDA_LAUNCH) continue;
      auto& spans = gpu_queued_[t.tgid];
      uint64_t end = c.end_ns;
      for (size_t j = i + 1; j < t.cuda.size() && t.cuda[j].start_ns < c.end_ns + kGpuQueueHorizonNs; ++j) {
        if (t.cuda[j].kind == LD_CUDA_SYNC || t.cuda[j].kind == LD_CUDA_MEMCPY) {
          end = t.cuda[j].end_ns;
          break;
        }
      }
      spans.push_back({c.start_ns, end});
    }
  }
  for (auto& [tgid, spans] : gpu_queued_) spans = util::merge_spans(std::move(spans));
}

bool EvidenceStore::uses_cuda(uint32_t tid) const {
  const ThreadEvidence* t = thread(tid);
  return t && !t->cuda.empty();
}

const std::vector<uint32_t>* EvidenceStore::cuda_threads(uint32_t tgid) const {
  auto it = cuda_threads_.find(tgid);
  return it == cuda_threads_.end() ? nullptr : &it->second;
}

const std::vector<std::pair<uint64_t, uint64_t>>* EvidenceStore::gpu_queued(uint32_t tgid) const {
  auto it = gpu_queued_.find(tgid);
  return it == gpu_queued_.end() ? nullptr : &it->second;
}

const ThreadEvidence* EvidenceStore::thread(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

std::string EvidenceStore::comm_of(uint32_t tid) const {
  auto it = comms_.find(tid);
  return it == comms_.end() ? "" : it->second;
}

bool EvidenceStore::is_gil_address(uint32_t tgid, uint64_t uaddr) const {
  auto it = gil_ranges_.find(tgid);
  if (it == gil_ranges_.end()) return false;
  for (const auto& [lo, hi] : it->second)
    if (uaddr >= lo && uaddr < hi) return true;
  return false;
}

std::string EvidenceStore::gil_method(uint32_t tgid) const {
  auto it = gil_methods_.find(tgid);
  if (it == gil_methods_.end()) return "";
  switch (it->second) {
    case LD_GIL_TAKE_GIL: return "take_gil";
    case LD_GIL_RESTORE_THREAD: return "PyEval_RestoreThread";
    default: return "unknown";
  }
}

uint64_t EvidenceStore::retransmits_between(uint64_t a, uint64_t b) const {
  return std::lower_bound(retransmits_.begin(), retransmits_.end(), b) -
         std::lower_bound(retransmits_.begin(), retransmits_.end(), a);
}

Cause EvidenceStore::blocked_stack_cause(int64_t id) const {
  auto it = sched_stack_causes_.find(id);
  return it == sched_stack_causes_.end() ? Cause::kUnknown : it->second;
}

uint16_t EvidenceStore::intern_frames(const SampleFrames& key) {
  auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  // Distinct (process, native stack, Python stack) triples are a few thousand at most (the
  // kernel's stack tables hold 4096 and 16384): past 65535 the samples keep no frames.
  if (frame_keys_.size() > UINT16_MAX) return 0;
  const auto id = static_cast<uint16_t>(frame_keys_.size());
  frame_keys_.push_back(key);
  frame_ids_.emplace(key, id);
  return id;
}

const SampleFrames* EvidenceStore::sample_frames(uint16_t id) const {
  return id == 0 || id >= frame_keys_.size() ? nullptr : &frame_keys_[id];
}

const std::vector<UserFrame>* EvidenceStore::ustack(uint32_t tgid, int64_t id) const {
  auto it = ustacks_.find({tgid, id});
  return it == ustacks_.end() ? nullptr : &it->second;
}

const std::vector<UserFrame>* EvidenceStore::pystack(uint32_t tgid, uint64_t id) const {
  auto it = pystacks_.find({tgid, id});
  return it == pystacks_.end() ? nullptr : &it->second;
}

const std::vector<std::string>* EvidenceStore::kstack(uint32_t source, int64_t id) const {
  auto it = kstacks_.find({source, id});
  return it == kstacks_.end() ? nullptr : &it->second;
}

}  // namespace ld::analysis
