// EvidenceStore::add: each record type's decoder (decode<LD_EV_X>), the table add() dispatches
// through, and the interning of threads and task names the decoders share.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "analysis/evidence.hpp"
#include "analysis/record_view.hpp"
#include "events.h"

namespace ld::analysis {

using namespace model;

namespace {

std::string comm_string(const char* comm) { return std::string(comm, strnlen(comm, LD_COMM_LEN)); }

}  // namespace

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
    for (size_t i = 0; i < LD_AGG_WAKERS; ++i)
      agg.wakers[i] = {e->wakers[i].tid, e->wakers[i].tgid, e->wakers[i].count};
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
  for (size_t i = 0; i < depth; ++i)
    list.emplace_back(frames + i * LD_SYM_LEN, strnlen(frames + i * LD_SYM_LEN, LD_SYM_LEN));
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
  net_.push_back({rec.ts_ns, e->listen_overflows, e->listen_drops, e->tcp_timewait, e->retrans_segs, e->passive_opens,
                  e->active_opens});
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

}  // namespace ld::analysis
