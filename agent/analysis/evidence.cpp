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
      if (f.compare(0, n, prefix) == 0) found = f.substr(n, f.find('+') == std::string::npos ? std::string::npos : f.find('+') - n);
    }
  }
  return found;
}

std::string comm_string(const char* comm) { return std::string(comm, strnlen(comm, LD_COMM_LEN)); }

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
        contains(f, "try_to_free_mem_cgroup_pages") || contains(f, "compact_zone") ||
        contains(f, "swap_readpage") || contains(f, "do_swap_page") || contains(f, "swap_read_folio") ||
        contains(f, "__alloc_pages_direct"))
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
        contains(f, "sk_stream_wait_memory") || contains(f, "unix_stream_sendmsg") ||
        contains(f, "__dev_queue_xmit") || contains(f, "net_rx_action"))
      return Cause::kNetwork;
  }
  return Cause::kCompute;
}

ThreadEvidence& EvidenceStore::thread_of(const ld_hdr& rec) {
  // unordered_map nodes never move, so the pointer stays valid as threads are added.
  ThreadEvidence*& slot = thread_cache_[rec.tid % thread_cache_.size()];
  if (slot && slot->tid == rec.tid && slot->tgid == rec.tgid) return *slot;
  ThreadEvidence& t = threads_[rec.tid];
  slot = &t;
  t.tid = rec.tid;
  t.tgid = rec.tgid;
  return t;
}

void EvidenceStore::name(uint32_t tid, uint32_t tgid, const char* comm) {
  (void)tgid;
  if (tid == 0 && comm[0] == 0) return;
  // The same few threads wake and preempt a server's threads: skip the map for the last two
  // named (their names are already kept; the first name seen is the one kept anyway).
  if (tid == recently_named_[0] || tid == recently_named_[1]) return;
  auto& slot = comms_[tid];
  if (slot.empty()) slot = comm_string(comm);
  if (!slot.empty()) {
    recently_named_[1] = recently_named_[0];
    recently_named_[0] = tid;
  }
}

uint32_t EvidenceStore::intern_comm(const char* comm) {
  static_assert(LD_COMM_LEN == 16, "comms are compared as 16 bytes");
  // The last two names seen answer most records (the wakers of a server are few).
  for (const auto& [bytes, id] : last_comms_)
    if (std::memcmp(bytes.data(), comm, LD_COMM_LEN) == 0) return id;
  std::string name = comm_string(comm);
  auto [it, added] = comm_ids_.try_emplace(name, static_cast<uint32_t>(comm_names_.size()));
  if (added) comm_names_.push_back(std::move(name));
  last_comms_[1] = last_comms_[0];
  std::memcpy(last_comms_[0].first.data(), comm, LD_COMM_LEN);
  last_comms_[0].second = it->second;
  return it->second;
}

template <>
bool EvidenceStore::decode<LD_EV_OFFCPU>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_offcpu>(rec, size);
  if (!e) return false;
  OffCpu o;
  o.off_ns = e->off_ns;
  o.wake_ns = e->wake_ns;
  o.on_ns = e->on_ns;
  o.preempted = e->kind == LD_OFF_PREEMPTED;
  o.cpu = static_cast<uint16_t>(rec.cpu);
  o.syscall_nr = e->syscall_nr;
  o.kstack_id = e->kstack_id;
  o.waker_tid = e->waker_tid;
  o.waker_tgid = e->waker_tgid;
  o.holder_tid = e->holder_tid;
  o.holder_tgid = e->holder_tgid;
  o.waker_comm = intern_comm(e->waker_comm);
  o.holder_comm = intern_comm(e->holder_comm);
  name(e->waker_tid, e->waker_tgid, e->waker_comm);
  name(e->holder_tid, e->holder_tgid, e->holder_comm);
  thread_of(rec).offcpu.push_back(std::move(o));
  has_sched_ = true;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_SCHED_AGG>(const ld_hdr& rec, size_t size) {
  // Layout 2 ended before the wakers: read what the record holds.
  if (size < offsetof(ld_sched_agg, wakers)) return false;
  auto* e = reinterpret_cast<const ld_sched_agg*>(&rec);
  SchedAgg agg{e->period_start_ns, rec.ts_ns, e->blocked_ns, e->runnable_ns};
  static_assert(std::tuple_size_v<decltype(agg.wakers)> == LD_AGG_WAKERS, "one slot per kernel slot");
  if (size >= sizeof(ld_sched_agg))
    for (size_t i = 0; i < LD_AGG_WAKERS; ++i) agg.wakers[i] = {e->wakers[i].tid, e->wakers[i].tgid, e->wakers[i].count};
  thread_of(rec).aggs.push_back(agg);
  has_sched_ = true;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_MIGRATE>(const ld_hdr& rec, size_t size) {
  thread_of(rec).migrations++;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_CPU_SAMPLE>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_cpu_sample>(rec, size);
  if (!e) return false;
  CpuSample s;
  s.ts_ns = rec.ts_ns;
  s.user_mode = e->user_mode != 0;
  // Stack map ids are small (< the map's size) and errors are small negatives.
  s.kstack_id = e->kstack_id < INT32_MIN || e->kstack_id > INT32_MAX ? -1 : static_cast<int32_t>(e->kstack_id);
  thread_of(rec).samples.push_back(s);
  has_samples_ = true;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_CPU_FRAMES>(const ld_hdr& rec, size_t size) {
  // A sample with its user-space stacks: the same evidence as ld_cpu_sample, and the frames.
  auto* e = record_as<ld_cpu_frames>(rec, size);
  if (!e) return false;
  CpuSample s;
  s.ts_ns = rec.ts_ns;
  s.user_mode = e->user_mode != 0;
  s.kstack_id = e->kstack_id < INT32_MIN || e->kstack_id > INT32_MAX ? -1 : static_cast<int32_t>(e->kstack_id);
  if (e->ustack_id >= 0 || e->pystack_id != 0)
    s.frames = intern_frames({rec.tgid, e->ustack_id < 0 ? -1 : e->ustack_id, e->pystack_id});
  thread_of(rec).samples.push_back(s);
  has_samples_ = true;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_USTACK>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_ustack>(rec, size);
  if (!e) return false;
  const size_t depth = std::min<size_t>(e->depth, LD_USTACK_MAX_DEPTH);
  if (sizeof(ld_ustack) + depth * sizeof(ld_uframe) > size) return false;
  std::vector<UserFrame> list;
  for (size_t i = 0; i < depth; ++i) {
    ld_uframe f;
    std::memcpy(&f, reinterpret_cast<const char*>(e + 1) + i * sizeof(ld_uframe), sizeof(f));
    list.push_back({std::string(f.func, strnlen(f.func, sizeof(f.func))),
                    std::string(f.module, strnlen(f.module, sizeof(f.module))), -1, false});
  }
  ustacks_[{rec.tgid, e->stack_id}] = std::move(list);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_PYSTACK>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_pystack>(rec, size);
  if (!e) return false;
  const size_t depth = std::min<size_t>(e->depth, LD_PY_MAX_DEPTH);
  if (sizeof(ld_pystack) + depth * sizeof(ld_pyframe) > size) return false;
  std::vector<UserFrame> list;
  for (size_t i = 0; i < depth; ++i) {
    ld_pyframe f;
    std::memcpy(&f, reinterpret_cast<const char*>(e + 1) + i * sizeof(ld_pyframe), sizeof(f));
    list.push_back({std::string(f.func, strnlen(f.func, sizeof(f.func))),
                    std::string(f.file, strnlen(f.file, sizeof(f.file))), f.line, true});
  }
  pystacks_[{rec.tgid, e->stack_id}] = std::move(list);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_KSTACK>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_kstack>(rec, size);
  if (!e) return false;
  const size_t depth = std::min<size_t>(e->depth, LD_KSTACK_MAX_DEPTH);
  if (sizeof(ld_kstack) + depth * LD_SYM_LEN > size) return false;
  const char* frames = reinterpret_cast<const char*>(e + 1);
  std::vector<std::string> list;
  for (size_t i = 0; i < depth; ++i) list.emplace_back(frames + i * LD_SYM_LEN, strnlen(frames + i * LD_SYM_LEN, LD_SYM_LEN));
  kstacks_[{e->source, e->stack_id}] = std::move(list);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_SYSCALL>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_syscall>(rec, size);
  if (!e) return false;
  Syscall s;
  s.start_ns = e->start_ns;
  s.end_ns = e->start_ns + e->dur_ns;
  s.kind = e->kind;
  s.arg0 = e->arg0;
  s.arg1 = e->arg1;
  s.ret = e->ret;
  if (e->path_len && sizeof(ld_syscall) + e->path_len <= size)
    s.path.assign(reinterpret_cast<const char*>(e + 1), e->path_len);
  thread_of(rec).syscalls.push_back(std::move(s));
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_FAULTS>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_faults>(rec, size);
  if (!e) return false;
  thread_of(rec).faults.push_back({e->first_ns, rec.ts_ns, e->count});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_BLOCK_RQ>(const ld_hdr& rec, size_t size) {
  // Checked, not kept: attribution takes disk time from the sync calls and the blocked
  // states (a thread waits in fsync, not in a request), and in a logger-heavy trace block
  // requests were a third of the records (thread_tracks reads them for the timelines).
  if (!record_as<ld_block_rq>(rec, size)) return false;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_RECLAIM>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_reclaim>(rec, size);
  if (!e) return false;
  thread_of(rec).reclaims.push_back({e->start_ns, rec.ts_ns, e->kind});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_GIL_ADDR>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_gil_addr>(rec, size);
  if (!e) return false;
  gil_ranges_[rec.tgid].push_back({e->uaddr_lo, e->uaddr_hi});
  gil_methods_[rec.tgid] = e->method;
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_CUDA>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_cuda_call>(rec, size);
  if (!e || e->kind < LD_CUDA_LAUNCH || e->kind > LD_CUDA_ALLOC || rec.ts_ns < e->start_ns) return false;
  CudaCall c;
  c.start_ns = e->start_ns;
  c.end_ns = rec.ts_ns;
  c.dur_ns = std::min(e->dur_ns, rec.ts_ns - e->start_ns);
  c.arg = e->arg;
  c.count = std::max<uint32_t>(e->count, 1);
  c.kind = e->kind;
  c.api = e->api;
  thread_of(rec).cuda.push_back(c);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_GIL_WAIT>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_gil_wait>(rec, size);
  if (!e) return false;
  thread_of(rec).gil_waits.push_back({e->start_ns, rec.ts_ns, e->dur_ns, e->count});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_TCP_STATE>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_tcp_state>(rec, size);
  if (!e) return false;
  TcpEvent t;
  t.ts_ns = rec.ts_ns;
  t.oldstate = e->oldstate;
  t.newstate = e->newstate;
  t.lport = e->lport;
  t.time_wait = (e->flags & LD_TCP_F_TW_INFERRED) || e->newstate == LD_TCP_TIME_WAIT;
  t.established = e->newstate == LD_TCP_ESTABLISHED;
  tcp_.push_back(t);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_TCP_RETRANS>(const ld_hdr& rec, size_t size) {
  retransmits_.push_back(rec.ts_ns);
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_NET_SAMPLE>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_net_sample>(rec, size);
  if (!e) return false;
  net_.push_back({rec.ts_ns, e->listen_overflows, e->listen_drops, e->tcp_timewait, e->retrans_segs,
                  e->passive_opens, e->active_opens});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_CGROUP_SAMPLE>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_cgroup_sample>(rec, size);
  if (!e) return false;
  cgroup_.push_back({rec.ts_ns, e->nr_throttled, e->throttled_ns, e->quota_us, e->period_us});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_CPU_FREQ>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_cpu_freq>(rec, size);
  if (!e) return false;
  freq_.push_back({rec.ts_ns, e->cpu_id, e->khz, e->max_khz});
  return true;
}

template <>
bool EvidenceStore::decode<LD_EV_GPU_SAMPLE>(const ld_hdr& rec, size_t size) {
  auto* e = record_as<ld_gpu_sample>(rec, size);
  if (!e) return false;
  GpuSample g;
  g.ts_ns = rec.ts_ns;
  g.device = e->device;
  g.util = e->util_gpu;
  g.sm_mhz = e->sm_mhz;
  g.sm_max_mhz = e->sm_max_mhz;
  g.temp_c = e->temp_c;
  g.power_mw = e->power_mw;
  g.reasons = e->reasons;
  g.mem_used = e->mem_used;
  g.mem_total = e->mem_total;
  gpu_.push_back(g);
  return true;
}
bool EvidenceStore::add(const ld_hdr& rec, size_t size) {
  // A type without a decoder is not evidence: socket IO, closes and exits are the timeline's.
  using Decode = bool (EvidenceStore::*)(const ld_hdr&, size_t);
  static constexpr auto kDecoders = [] {
    std::array<Decode, LD_EV_TYPE_MAX> table{};
    table[LD_EV_OFFCPU] = &EvidenceStore::decode<LD_EV_OFFCPU>;
    table[LD_EV_SCHED_AGG] = &EvidenceStore::decode<LD_EV_SCHED_AGG>;
    table[LD_EV_MIGRATE] = &EvidenceStore::decode<LD_EV_MIGRATE>;
    table[LD_EV_CPU_SAMPLE] = &EvidenceStore::decode<LD_EV_CPU_SAMPLE>;
    table[LD_EV_CPU_FRAMES] = &EvidenceStore::decode<LD_EV_CPU_FRAMES>;
    table[LD_EV_USTACK] = &EvidenceStore::decode<LD_EV_USTACK>;
    table[LD_EV_PYSTACK] = &EvidenceStore::decode<LD_EV_PYSTACK>;
    table[LD_EV_KSTACK] = &EvidenceStore::decode<LD_EV_KSTACK>;
    table[LD_EV_SYSCALL] = &EvidenceStore::decode<LD_EV_SYSCALL>;
    table[LD_EV_FAULTS] = &EvidenceStore::decode<LD_EV_FAULTS>;
    table[LD_EV_BLOCK_RQ] = &EvidenceStore::decode<LD_EV_BLOCK_RQ>;
    table[LD_EV_RECLAIM] = &EvidenceStore::decode<LD_EV_RECLAIM>;
    table[LD_EV_GIL_ADDR] = &EvidenceStore::decode<LD_EV_GIL_ADDR>;
    table[LD_EV_CUDA] = &EvidenceStore::decode<LD_EV_CUDA>;
    table[LD_EV_GIL_WAIT] = &EvidenceStore::decode<LD_EV_GIL_WAIT>;
    table[LD_EV_TCP_STATE] = &EvidenceStore::decode<LD_EV_TCP_STATE>;
    table[LD_EV_TCP_RETRANS] = &EvidenceStore::decode<LD_EV_TCP_RETRANS>;
    table[LD_EV_NET_SAMPLE] = &EvidenceStore::decode<LD_EV_NET_SAMPLE>;
    table[LD_EV_CGROUP_SAMPLE] = &EvidenceStore::decode<LD_EV_CGROUP_SAMPLE>;
    table[LD_EV_CPU_FREQ] = &EvidenceStore::decode<LD_EV_CPU_FREQ>;
    table[LD_EV_GPU_SAMPLE] = &EvidenceStore::decode<LD_EV_GPU_SAMPLE>;
    return table;
  }();
  const Decode decode = rec.type < kDecoders.size() ? kDecoders[rec.type] : nullptr;
  if (!decode || !(this->*decode)(rec, size)) return false;
  evidence_records_++;
  return true;
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
    // The ends as attribution.cpp's searches read them (faults: last fault + 1 ns).
    t.longest.aggs = longest(t.aggs, [](auto& g) { return g.start_ns; }, [](auto& g) { return g.end_ns; });
    t.longest.syscalls = longest(t.syscalls, [](auto& s) { return s.start_ns; }, [](auto& s) { return s.end_ns; });
    t.longest.gil_waits = longest(t.gil_waits, [](auto& g) { return g.start_ns; }, [](auto& g) { return g.end_ns; });
    t.longest.faults = longest(t.faults, [](auto& f) { return f.first_ns; }, [](auto& f) { return f.last_ns + 1; });
    t.longest.reclaims = longest(t.reclaims, [](auto& r) { return r.start_ns; }, [](auto& r) { return r.end_ns; });
    t.longest.cuda = longest(t.cuda, [](auto& c) { return c.start_ns; }, [](auto& c) { return c.end_ns; });
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
