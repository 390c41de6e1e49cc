// Golden records: tests/fixtures/records/all_records.ldtrace holds one record (three of
// ld_syscall: one per probe that writes it) of every record type every probe writes
// (bpf/events.h: every LD_EV_*), with fixed, distinctive field values, written by the
// generator below with ld::trace::TraceWriter and committed as a binary. The test reads it back
// with ld::trace::read_trace and checks every field of every record, so a change of a record's
// layout (a size, an offset, a type) or of the trace reader breaks it: traces already written
// would no longer read back as they were recorded.
//
// Regenerating the fixture is right ONLY together with a bump of LD_RECORD_LAYOUT_VERSION
// (bpf/events.h), in the same change: old traces then say which layout they hold. The
// fixture's header carries the version it was written with, and the test checks it is the
// current one. To regenerate (after the bump):
//   build/ld_unit_tests --gtest_also_run_disabled_tests --gtest_filter=GoldenRecords.DISABLED_Regenerate
// which rewrites the file in the source tree (LD_TEST_FIXTURES_DIR/records) from golden_records().
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "events.h"
#include "trace/trace_file.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

const fs::path kFixture = fs::path(LD_TEST_FIXTURES_DIR) / "records" / "all_records.ldtrace";

// A new record type must join the fixture (and this number): every type is covered.
static_assert(LD_EV_TYPE_MAX == 33, "a record type was added or removed: update golden_records()");

// Every header differs: n is the record's place in the fixture.
ld_hdr hdr(uint16_t type, size_t size, uint32_t n) {
  ld_hdr h{};
  h.type = type;
  h.size = static_cast<uint16_t>(size);
  h.cpu = 0xc0 + n;
  h.tgid = 0x7a000 + n;
  h.tid = 0x7b000 + n;
  h.ts_ns = 0x0123456789000000ULL + n * 0x1010101ULL;
  return h;
}

template <typename T>
Bytes bytes_of(const T& rec, const void* tail = nullptr, size_t tail_len = 0) {
  Bytes out(sizeof(T) + tail_len, 0);
  std::memcpy(out.data(), &rec, sizeof(T));
  if (tail_len) std::memcpy(out.data() + sizeof(T), tail, tail_len);
  return out;
}

// ---------------------------------------------------------------- the records, in file order

ld_sock_io sock_io() {
  ld_sock_io r{};
  r.hdr = hdr(LD_EV_SOCK_IO, sizeof(r), 1);
  r.sock_id = 0x5c0c1d0000000001ULL;
  r.unsent = 0x0d000002;
  r.tcp = LD_TCP_READ | LD_TCP_CORK;
  r.ret = -0x0e00000000000003LL;
  r.fd = 0xfd000004;
  r.lport = 8004;
  r.rport = 51005;
  r.family = 10;  // AF_INET6
  r.dir = LD_DIR_RECV;
  r.syscall = LD_SC_RECVMSG;
  r.cls = LD_PC_SSE_META;
  r.sse_events = 0x77;
  return r;
}

ld_sock_close sock_close() {
  ld_sock_close r{};
  r.hdr = hdr(LD_EV_SOCK_CLOSE, sizeof(r), 2);
  r.sock_id = 0x5c0c1d0000000201ULL;
  r.fd = 0xfd000202;
  return r;
}

ld_task_exit task_exit() {
  ld_task_exit r{};
  r.hdr = hdr(LD_EV_TASK_EXIT, sizeof(r), 3);
  r.exit_code = 0xec000301;
  r.is_process = 1;
  return r;
}

ld_offcpu offcpu() {
  ld_offcpu r{};
  r.hdr = hdr(LD_EV_OFFCPU, sizeof(r), 4);
  r.off_ns = 0x0ff0000000000401ULL;
  r.wake_ns = 0x0ff0000000000402ULL;
  r.on_ns = 0x0ff0000000000403ULL;
  r.kind = LD_OFF_PREEMPTED;
  r.prev_state = 0x0402;
  r.kstack_id = -0x405;
  r.waker_tid = 0x7c000406;
  r.waker_tgid = 0x7c000407;
  r.holder_tid = 0x7c000408;
  r.holder_tgid = 0x7c000409;
  r.off_cpu = 0x40a;
  r.on_cpu = 0x40b;
  r.syscall_nr = 0x40c;
  r.flags = LD_OFFCPU_KSTACK_REUSED | LD_OFFCPU_ON_UNSEEN;
  std::memcpy(r.waker_comm, "ld-golden-waker", 16);  // 15 chars + NUL: all 16 bytes
  std::memcpy(r.holder_comm, "holder-0123456", 15);
  return r;
}

ld_sched_agg sched_agg() {
  ld_sched_agg r{};
  r.hdr = hdr(LD_EV_SCHED_AGG, sizeof(r), 5);
  r.period_start_ns = 0x0a90000000000501ULL;
  r.blocked_ns = 0x0a90000000000502ULL;
  r.runnable_ns = 0x0a90000000000503ULL;
  r.blocked_count = 0xb0000504;
  r.runnable_count = 0xb0000505;
  r.wakers[0] = {0x506, 0x507, 0xb0000508, 0, 0x0a90000000000509ULL};
  r.wakers[1] = {0x50a, 0x50b, 0xb000050c, 0, 0x0a9000000000050dULL};
  return r;
}

ld_migrate migrate() {
  ld_migrate r{};
  r.hdr = hdr(LD_EV_MIGRATE, sizeof(r), 6);
  r.orig_cpu = 0x601;
  r.dest_cpu = 0x602;
  return r;
}

ld_cpu_sample cpu_sample() {
  ld_cpu_sample r{};
  r.hdr = hdr(LD_EV_CPU_SAMPLE, sizeof(r), 7);
  r.kstack_id = 0x0700000000000701LL;
  r.user_mode = 0;
  return r;
}

// Two frames follow the fixed part: LD_SYM_LEN bytes each.
constexpr uint32_t kKstackDepth = 2;
ld_kstack kstack() {
  ld_kstack r{};
  r.hdr = hdr(LD_EV_KSTACK, sizeof(r) + kKstackDepth * LD_SYM_LEN, 8);
  r.stack_id = 0x0700000000000701LL;  // the sample's
  r.depth = kKstackDepth;
  r.source = LD_PROBE_PERF;
  return r;
}
std::string kstack_frames() {
  std::string frames(kKstackDepth * LD_SYM_LEN, '\0');
  frames.replace(0, 20, "ld_golden_frame+0x1a");
  frames.replace(LD_SYM_LEN, 18, "0xffffffff81234567");
  return frames;
}

ld_syscall syscall_memory() {
  ld_syscall r{};
  r.hdr = hdr(LD_EV_SYSCALL, sizeof(r), 9);
  r.start_ns = 0x05c0000000000901ULL;
  r.dur_ns = 0x05c0000000000902ULL;
  r.ret = 0x7f0000000903LL;
  r.arg0 = 0x0000000040000904ULL;
  r.arg1 = 0x0000002200000003ULL;  // MAP_PRIVATE|MAP_ANONYMOUS << 32 | PROT_READ|PROT_WRITE
  r.kind = LD_SYS_MMAP;
  return r;
}

// A disk kind: path_len bytes of path follow, padded to 8.
const std::string kDiskPath = "/var/lib/ld-golden/kv.log";  // 25 bytes -> 32 with padding
ld_syscall syscall_disk() {
  ld_syscall r{};
  r.hdr = hdr(LD_EV_SYSCALL, sizeof(r) + (kDiskPath.size() + 7) / 8 * 8, 10);
  r.start_ns = 0x05c0000000000a01ULL;
  r.dur_ns = 0x05c0000000000a02ULL;
  r.ret = -5;      // -EIO
  r.arg0 = 0xa04;  // fd
  r.arg1 = 0;
  r.kind = LD_SYS_FSYNC;
  r.path_len = static_cast<uint16_t>(kDiskPath.size());
  return r;
}
std::string disk_path_padded() {
  std::string p = kDiskPath;
  p.resize((p.size() + 7) / 8 * 8, '\0');
  return p;
}

ld_syscall syscall_futex() {
  ld_syscall r{};
  r.hdr = hdr(LD_EV_SYSCALL, sizeof(r), 11);
  r.start_ns = 0x05c0000000000b01ULL;
  r.dur_ns = 0x05c0000000000b02ULL;
  r.ret = -110;  // -ETIMEDOUT
  r.arg0 = 0x00007ffdeadb0b04ULL;
  r.arg1 = LD_FUTEX2_WAIT | 0x82;
  r.kind = LD_SYS_FUTEX_WAIT;
  return r;
}

ld_faults faults() {
  ld_faults r{};
  r.hdr = hdr(LD_EV_FAULTS, sizeof(r), 12);
  r.first_ns = 0x0fa0000000000c01ULL;
  r.count = 0xc02;
  return r;
}

ld_block_rq block_rq() {
  ld_block_rq r{};
  r.hdr = hdr(LD_EV_BLOCK_RQ, sizeof(r), 13);
  r.issue_ns = 0x0b10000000000d01ULL;
  r.sector = 0x00000003c0000d02ULL;
  r.dev = (259u << 20) | 0xd03;
  r.bytes = 0x000d0004;
  r.rwbs = LD_RWBS_WRITE | LD_RWBS_SYNC | LD_RWBS_FLUSH | LD_RWBS_META;
  r.error = static_cast<uint32_t>(-61);  // -ENODATA
  return r;
}

ld_reclaim reclaim() {
  ld_reclaim r{};
  r.hdr = hdr(LD_EV_RECLAIM, sizeof(r), 14);
  r.start_ns = 0x0ec0000000000e01ULL;
  r.nr_reclaimed = 0x0000000000000e02ULL;
  r.kind = LD_RECLAIM_MEMCG;
  r.order = 3;
  return r;
}

ld_gil_addr gil_addr() {
  ld_gil_addr r{};
  r.hdr = hdr(LD_EV_GIL_ADDR, sizeof(r), 15);
  r.hdr.tid = 0;  // made in user space
  r.uaddr_lo = 0x00007f0000000f00ULL;
  r.uaddr_hi = 0x00007f0000000f04ULL;
  r.method = LD_GIL_RESTORE_THREAD;
  return r;
}

ld_tcp_state tcp_state() {
  ld_tcp_state r{};
  r.hdr = hdr(LD_EV_TCP_STATE, sizeof(r), 16);
  r.sock_id = 0x5c0c1d0000001001ULL;
  r.lport = 8016;
  r.rport = 51016;
  r.oldstate = LD_TCP_FIN_WAIT2;
  r.newstate = LD_TCP_TIME_WAIT;
  r.family = 2;  // AF_INET
  r.flags = LD_TCP_F_TW_INFERRED | LD_TCP_F_LISTEN_PORT;
  return r;
}

ld_tcp_retrans tcp_retrans() {
  ld_tcp_retrans r{};
  r.hdr = hdr(LD_EV_TCP_RETRANS, sizeof(r), 17);
  r.sock_id = 0x5c0c1d0000001101ULL;
  r.lport = 8017;
  r.rport = 51017;
  r.state = LD_TCP_SYN_RECV;
  r.flags = LD_TCP_RT_SYNACK;
  return r;
}

ld_net_sample net_sample() {
  ld_net_sample r{};
  r.hdr = hdr(LD_EV_NET_SAMPLE, sizeof(r), 18);
  r.listen_overflows = 0x0e70000000001201ULL;
  r.listen_drops = 0x0e70000000001202ULL;
  r.tcp_timewait = 0x0e70000000001203ULL;
  r.retrans_segs = 0x0e70000000001204ULL;
  r.active_opens = 0x0e70000000001205ULL;
  r.passive_opens = 0x0e70000000001206ULL;
  return r;
}

ld_cgroup_sample cgroup_sample() {
  ld_cgroup_sample r{};
  r.hdr = hdr(LD_EV_CGROUP_SAMPLE, sizeof(r), 19);
  r.nr_periods = 0x0c90000000001301ULL;
  r.nr_throttled = 0x0c90000000001302ULL;
  r.throttled_ns = 0x0c90000000001303ULL;
  r.quota_us = ~0ULL;  // no limit
  r.period_us = 0x0c90000000001305ULL;
  r.mem_usage_now = 0x0c90000000001306ULL;
  r.mem_limit = 0x0c90000000001307ULL;
  r.mem_events_high = 0x0c90000000001308ULL;
  r.mem_events_oom = 0x0c90000000001309ULL;
  return r;
}

ld_cpu_freq cpu_freq() {
  ld_cpu_freq r{};
  r.hdr = hdr(LD_EV_CPU_FREQ, sizeof(r), 20);
  r.cpu_id = 0x1401;
  r.khz = 0x00141402;
  r.max_khz = 0x00141403;
  r.sampled = 1;
  return r;
}

ld_gil_wait gil_wait() {
  ld_gil_wait r{};
  r.hdr = hdr(LD_EV_GIL_WAIT, sizeof(r), 21);
  r.start_ns = 0x0910000000001501ULL;
  r.dur_ns = 0x0910000000001502ULL;
  r.uaddr = 0x00007f0000000f04ULL;
  r.max_ns = 0x0910000000001504ULL;
  r.ret = -110;
  r.count = 0x1506;
  r.method = LD_GIL_TAKE_GIL;
  r.kind = LD_GIL_WAIT_AGG;
  return r;
}

ld_cpu_frames cpu_frames() {
  ld_cpu_frames r{};
  r.hdr = hdr(LD_EV_CPU_FRAMES, sizeof(r), 22);
  r.kstack_id = 0x0700000000001601LL;
  r.user_mode = 1;
  r.ustack_id = 0x1603;
  r.pystack_id = 0x1600000000001604ULL;
  r.py_depth = 2;
  r.flags = LD_FRAMES_PY_TRUNCATED | LD_FRAMES_PY_BAD_READ;
  return r;
}

// Two native frames follow the fixed part.
constexpr uint32_t kUstackDepth = 2;
ld_ustack ustack() {
  ld_ustack r{};
  r.hdr = hdr(LD_EV_USTACK, sizeof(r) + kUstackDepth * sizeof(ld_uframe), 23);
  r.hdr.tid = 0;
  r.stack_id = 0x1603;  // the sample's
  r.depth = kUstackDepth;
  r.flags = LD_USTACK_CUT;
  return r;
}
std::vector<ld_uframe> uframes() {
  std::vector<ld_uframe> f(kUstackDepth);
  f[0].offset = 0x1701;
  std::strcpy(f[0].func, "ld_wl::slow_detokenize");
  std::strcpy(f[0].module, "ld-wl-frames_server");
  f[1].offset = 0x00007f0000001702ULL;  // no symbol, no file: the address
  return f;
}

constexpr uint32_t kPystackDepth = 2;
ld_pystack pystack() {
  ld_pystack r{};
  r.hdr = hdr(LD_EV_PYSTACK, sizeof(r) + kPystackDepth * sizeof(ld_pyframe), 24);
  r.hdr.tid = 0;
  r.stack_id = 0x1600000000001604ULL;  // the sample's
  r.depth = kPystackDepth;
  r.flags = LD_FRAMES_PY_TRUNCATED;
  return r;
}
std::vector<ld_pyframe> pyframes() {
  std::vector<ld_pyframe> f(kPystackDepth);
  f[0].line = 0x1801;
  std::strcpy(f[0].func, "render_usage_summary");
  std::strcpy(f[0].file, "tests/workloads/frames_server.py");
  f[1].line = -1;
  f[1].flags = LD_PYFRAME_UNNAMED | LD_PYFRAME_FILE_CUT;
  std::strcpy(f[1].func, "?");
  return f;
}

ld_cuda_call cuda_call() {
  ld_cuda_call r{};
  r.hdr = hdr(LD_EV_CUDA, sizeof(r), 25);
  r.start_ns = 0x1901;
  r.dur_ns = 0x1902;
  r.arg = 0x1903;
  r.ret = -0x1904;
  r.count = 0x1905;
  r.kind = LD_CUDA_SYNC;
  r.api = LD_CUDART_STREAM_SYNCHRONIZE;
  return r;
}

ld_gpu_sample gpu_sample() {
  ld_gpu_sample r{};
  r.hdr = hdr(LD_EV_GPU_SAMPLE, sizeof(r), 26);
  r.reasons = LD_GPU_R_SW_THERMAL | LD_GPU_R_SW_POWER_CAP;
  r.mem_used = 0x1a02;
  r.mem_total = 0x1a03;
  r.device = 0x1a04;
  r.util_gpu = 0x1a05;
  r.util_mem = 0x1a06;
  r.sm_mhz = 0x1a07;
  r.sm_max_mhz = 0x1a08;
  r.temp_c = 0x1a09;
  r.power_mw = 0x1a0a;
  r.power_limit_mw = 0x1a0b;
  return r;
}

ld_tls_io tls_io() {
  ld_tls_io r{};
  r.hdr = hdr(LD_EV_TLS_IO, sizeof(r), 27);
  r.ssl_id = 0x1b01;
  r.len = -0x1b02;
  r.api = LD_TLS_SSL_READ_EX;
  r.dir = LD_DIR_RECV;
  r.cls = LD_PC_HTTP_REQUEST;
  r.sse_events = 0x1b;
  return r;
}

ld_h2_frames h2_frames() {
  ld_h2_frames r{};
  r.hdr = hdr(LD_EV_H2_FRAMES, sizeof(r), 28);
  r.sock_id = 0x1c01;
  r.dir = LD_DIR_SEND;
  r.count = 2;
  r.more = 1;
  r.preface = 0;
  r.rport = 0x1c02;
  r.lport = 0x1c03;
  r.f[0] = ld_h2_frame{0x1c04, 0x1c05, LD_H2_HEADERS, 0, 0, 0};
  r.f[1] = ld_h2_frame{0x1c04, 0x1c06, LD_H2_DATA, LD_H2_FLAG_END_STREAM, LD_PC_GRPC_MESSAGE, 3};
  r.tls = 1;
  return r;
}

// The fixture's records, in file order.
std::vector<Bytes> golden_records() {
  const std::string frames = kstack_frames();
  const std::string path = disk_path_padded();
  const std::vector<ld_uframe> uf = uframes();
  const std::vector<ld_pyframe> pf = pyframes();
  return {bytes_of(sock_io()),
          bytes_of(sock_close()),
          bytes_of(task_exit()),
          bytes_of(offcpu()),
          bytes_of(sched_agg()),
          bytes_of(migrate()),
          bytes_of(cpu_sample()),
          bytes_of(kstack(), frames.data(), frames.size()),
          bytes_of(syscall_memory()),
          bytes_of(syscall_disk(), path.data(), path.size()),
          bytes_of(syscall_futex()),
          bytes_of(faults()),
          bytes_of(block_rq()),
          bytes_of(reclaim()),
          bytes_of(gil_addr()),
          bytes_of(tcp_state()),
          bytes_of(tcp_retrans()),
          bytes_of(net_sample()),
          bytes_of(cgroup_sample()),
          bytes_of(cpu_freq()),
          bytes_of(gil_wait()),
          bytes_of(cpu_frames()),
          bytes_of(ustack(), uf.data(), uf.size() * sizeof(ld_uframe)),
          bytes_of(pystack(), pf.data(), pf.size() * sizeof(ld_pyframe)),
          bytes_of(cuda_call()),
          bytes_of(gpu_sample()),
          bytes_of(tls_io()),
          bytes_of(h2_frames())};
}

nlohmann::json golden_header() {
  return {{"fixture",
           "golden records: every record type of bpf/events.h with fixed field values "
           "(tests/unit/golden_records_test.cpp)"},
          {"record_layout_version", LD_RECORD_LAYOUT_VERSION}};
}
nlohmann::json golden_trailer() { return {{"end_mono_ns", 0x0123456789abcdefULL}, {"records", 26}}; }

// ---------------------------------------------------------------- field checks

template <typename T>
T as(const Bytes& b) {
  T value{};
  std::memcpy(&value, b.data(), std::min(sizeof(T), b.size()));
  return value;
}

#define FIELD(f) EXPECT_EQ(got.f, want.f) << #f
#define CHARS(f) EXPECT_EQ(std::string(got.f, sizeof(got.f)), std::string(want.f, sizeof(want.f))) << #f

void check_hdr(const ld_hdr& got, const ld_hdr& want) {
  FIELD(type);
  FIELD(size);
  FIELD(cpu);
  FIELD(tgid);
  FIELD(tid);
  FIELD(ts_ns);
}

void check(const ld_sock_io& got, const ld_sock_io& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(sock_id);
  FIELD(unsent);
  FIELD(tcp);
  FIELD(ret);
  FIELD(fd);
  FIELD(lport);
  FIELD(rport);
  FIELD(family);
  FIELD(dir);
  FIELD(syscall);
  FIELD(cls);
  FIELD(sse_events);
}
void check(const ld_sock_close& got, const ld_sock_close& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(sock_id);
  FIELD(fd);
}
void check(const ld_task_exit& got, const ld_task_exit& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(exit_code);
  FIELD(is_process);
}
void check(const ld_offcpu& got, const ld_offcpu& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(off_ns);
  FIELD(wake_ns);
  FIELD(on_ns);
  FIELD(kind);
  FIELD(prev_state);
  FIELD(kstack_id);
  FIELD(waker_tid);
  FIELD(waker_tgid);
  FIELD(holder_tid);
  FIELD(holder_tgid);
  FIELD(off_cpu);
  FIELD(on_cpu);
  FIELD(syscall_nr);
  FIELD(flags);
  CHARS(waker_comm);
  CHARS(holder_comm);
}
void check(const ld_sched_agg& got, const ld_sched_agg& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(period_start_ns);
  FIELD(blocked_ns);
  FIELD(runnable_ns);
  FIELD(blocked_count);
  FIELD(runnable_count);
  for (int i = 0; i < LD_AGG_WAKERS; ++i) {
    FIELD(wakers[i].tid);
    FIELD(wakers[i].tgid);
    FIELD(wakers[i].count);
    FIELD(wakers[i].blocked_ns);
  }
}
void check(const ld_migrate& got, const ld_migrate& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(orig_cpu);
  FIELD(dest_cpu);
}
void check(const ld_cpu_sample& got, const ld_cpu_sample& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(kstack_id);
  FIELD(user_mode);
}
void check(const ld_cpu_frames& got, const ld_cpu_frames& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(kstack_id);
  FIELD(user_mode);
  FIELD(ustack_id);
  FIELD(pystack_id);
  FIELD(py_depth);
  FIELD(flags);
}
void check(const ld_ustack& got, const ld_ustack& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(stack_id);
  FIELD(depth);
  FIELD(flags);
}
void check(const ld_pystack& got, const ld_pystack& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(stack_id);
  FIELD(depth);
  FIELD(flags);
}
void check(const ld_cuda_call& got, const ld_cuda_call& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(start_ns);
  FIELD(dur_ns);
  FIELD(arg);
  FIELD(ret);
  FIELD(count);
  FIELD(kind);
  FIELD(api);
}
void check(const ld_gpu_sample& got, const ld_gpu_sample& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(reasons);
  FIELD(mem_used);
  FIELD(mem_total);
  FIELD(device);
  FIELD(util_gpu);
  FIELD(util_mem);
  FIELD(sm_mhz);
  FIELD(sm_max_mhz);
  FIELD(temp_c);
  FIELD(power_mw);
  FIELD(power_limit_mw);
}
void check(const ld_h2_frames& got, const ld_h2_frames& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(sock_id);
  FIELD(dir);
  FIELD(count);
  FIELD(more);
  FIELD(preface);
  FIELD(rport);
  FIELD(lport);
  FIELD(tls);
  for (size_t i = 0; i < LD_H2_MAX_FRAMES; ++i) {
    EXPECT_EQ(got.f[i].stream_id, want.f[i].stream_id) << i;
    EXPECT_EQ(got.f[i].len, want.f[i].len) << i;
    EXPECT_EQ(got.f[i].type, want.f[i].type) << i;
    EXPECT_EQ(got.f[i].flags, want.f[i].flags) << i;
    EXPECT_EQ(got.f[i].cls, want.f[i].cls) << i;
    EXPECT_EQ(got.f[i].messages, want.f[i].messages) << i;
  }
}
void check(const ld_tls_io& got, const ld_tls_io& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(ssl_id);
  FIELD(len);
  FIELD(api);
  FIELD(dir);
  FIELD(cls);
  FIELD(sse_events);
}
void check(const ld_kstack& got, const ld_kstack& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(stack_id);
  FIELD(depth);
  FIELD(source);
}
void check(const ld_syscall& got, const ld_syscall& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(start_ns);
  FIELD(dur_ns);
  FIELD(ret);
  FIELD(arg0);
  FIELD(arg1);
  FIELD(kind);
  FIELD(path_len);
}
void check(const ld_faults& got, const ld_faults& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(first_ns);
  FIELD(count);
}
void check(const ld_block_rq& got, const ld_block_rq& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(issue_ns);
  FIELD(sector);
  FIELD(dev);
  FIELD(bytes);
  FIELD(rwbs);
  FIELD(error);
}
void check(const ld_reclaim& got, const ld_reclaim& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(start_ns);
  FIELD(nr_reclaimed);
  FIELD(kind);
  FIELD(order);
}
void check(const ld_gil_addr& got, const ld_gil_addr& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(uaddr_lo);
  FIELD(uaddr_hi);
  FIELD(method);
}
void check(const ld_tcp_state& got, const ld_tcp_state& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(sock_id);
  FIELD(lport);
  FIELD(rport);
  FIELD(oldstate);
  FIELD(newstate);
  FIELD(family);
  FIELD(flags);
}
void check(const ld_tcp_retrans& got, const ld_tcp_retrans& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(sock_id);
  FIELD(lport);
  FIELD(rport);
  FIELD(state);
  FIELD(flags);
}
void check(const ld_net_sample& got, const ld_net_sample& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(listen_overflows);
  FIELD(listen_drops);
  FIELD(tcp_timewait);
  FIELD(retrans_segs);
  FIELD(active_opens);
  FIELD(passive_opens);
}
void check(const ld_cgroup_sample& got, const ld_cgroup_sample& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(nr_periods);
  FIELD(nr_throttled);
  FIELD(throttled_ns);
  FIELD(quota_us);
  FIELD(period_us);
  FIELD(mem_usage_now);
  FIELD(mem_limit);
  FIELD(mem_events_high);
  FIELD(mem_events_oom);
}
void check(const ld_cpu_freq& got, const ld_cpu_freq& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(cpu_id);
  FIELD(khz);
  FIELD(max_khz);
  FIELD(sampled);
}
void check(const ld_gil_wait& got, const ld_gil_wait& want) {
  check_hdr(got.hdr, want.hdr);
  FIELD(start_ns);
  FIELD(dur_ns);
  FIELD(uaddr);
  FIELD(max_ns);
  FIELD(ret);
  FIELD(count);
  FIELD(method);
  FIELD(kind);
}

#undef FIELD
#undef CHARS

template <typename T>
void check_record(const Bytes& got, const T& want) {
  ASSERT_GE(got.size(), sizeof(T));
  check(as<T>(got), want);
}

std::vector<Bytes> read_fixture(ld::trace::ReadSummary* summary) {
  std::vector<Bytes> records;
  *summary = ld::trace::read_trace(kFixture.string(), [&](const ld_hdr& rec) {
    const auto* p = reinterpret_cast<const uint8_t*>(&rec);
    records.emplace_back(p, p + rec.size);
  });
  return records;
}

TEST(GoldenRecords, EveryFieldOfEveryRecordTypeReadsBack) {
  ld::trace::ReadSummary summary;
  const std::vector<Bytes> got = read_fixture(&summary);
  EXPECT_TRUE(summary.warnings.empty()) << summary.warnings.front();
  EXPECT_EQ(summary.chunks_bad, 0u);
  EXPECT_EQ(summary.chunks_ok, 3u);  // two of records, the trailer
  EXPECT_EQ(summary.header.value("record_layout_version", 0), LD_RECORD_LAYOUT_VERSION)
      << "the fixture holds another record layout: regenerate it together with the bump";
  EXPECT_EQ(summary.header, golden_header());
  EXPECT_EQ(summary.trailer, golden_trailer());
  EXPECT_EQ(summary.records, 28u);
  ASSERT_EQ(got.size(), 28u);

  check_record(got[0], sock_io());
  check_record(got[1], sock_close());
  check_record(got[2], task_exit());
  check_record(got[3], offcpu());
  check_record(got[4], sched_agg());
  check_record(got[5], migrate());
  check_record(got[6], cpu_sample());
  check_record(got[7], kstack());
  check_record(got[8], syscall_memory());
  check_record(got[9], syscall_disk());
  check_record(got[10], syscall_futex());
  check_record(got[11], faults());
  check_record(got[12], block_rq());
  check_record(got[13], reclaim());
  check_record(got[14], gil_addr());
  check_record(got[15], tcp_state());
  check_record(got[16], tcp_retrans());
  check_record(got[17], net_sample());
  check_record(got[18], cgroup_sample());
  check_record(got[19], cpu_freq());
  check_record(got[20], gil_wait());
  check_record(got[21], cpu_frames());
  check_record(got[22], ustack());
  check_record(got[23], pystack());
  check_record(got[24], cuda_call());
  check_record(got[25], gpu_sample());
  check_record(got[26], tls_io());
  check_record(got[27], h2_frames());

  // The variable parts: the stack's frames, the file's path.
  ASSERT_EQ(got[7].size(), sizeof(ld_kstack) + kKstackDepth * LD_SYM_LEN);
  EXPECT_EQ(std::string(got[7].begin() + sizeof(ld_kstack), got[7].end()), kstack_frames());
  ASSERT_EQ(got[9].size(), sizeof(ld_syscall) + 32);
  EXPECT_EQ(std::string(got[9].begin() + sizeof(ld_syscall), got[9].end()), disk_path_padded());
  ASSERT_EQ(got[22].size(), sizeof(ld_ustack) + kUstackDepth * sizeof(ld_uframe));
  for (uint32_t i = 0; i < kUstackDepth; ++i) {
    SCOPED_TRACE(i);
    ld_uframe f{};
    std::memcpy(&f, got[22].data() + sizeof(ld_ustack) + i * sizeof(ld_uframe), sizeof(f));
    const ld_uframe want = uframes()[i];
    EXPECT_EQ(f.offset, want.offset);
    EXPECT_EQ(std::string(f.func, sizeof(f.func)), std::string(want.func, sizeof(want.func)));
    EXPECT_EQ(std::string(f.module, sizeof(f.module)), std::string(want.module, sizeof(want.module)));
  }
  ASSERT_EQ(got[23].size(), sizeof(ld_pystack) + kPystackDepth * sizeof(ld_pyframe));
  for (uint32_t i = 0; i < kPystackDepth; ++i) {
    SCOPED_TRACE(i);
    ld_pyframe f{};
    std::memcpy(&f, got[23].data() + sizeof(ld_pystack) + i * sizeof(ld_pyframe), sizeof(f));
    const ld_pyframe want = pyframes()[i];
    EXPECT_EQ(f.line, want.line);
    EXPECT_EQ(f.flags, want.flags);
    EXPECT_EQ(std::string(f.func, sizeof(f.func)), std::string(want.func, sizeof(want.func)));
    EXPECT_EQ(std::string(f.file, sizeof(f.file)), std::string(want.file, sizeof(want.file)));
  }

  // And every byte, padding included.
  const std::vector<Bytes> want = golden_records();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "record " << i;
}

TEST(GoldenRecords, CoverEveryRecordType) {
  std::set<uint16_t> types;
  for (const Bytes& r : golden_records()) types.insert(as<ld_hdr>(r).type);
  const std::set<uint16_t> every{
      LD_EV_SOCK_IO,    LD_EV_SOCK_CLOSE, LD_EV_TASK_EXIT,   LD_EV_OFFCPU,     LD_EV_SCHED_AGG,     LD_EV_MIGRATE,
      LD_EV_CPU_SAMPLE, LD_EV_KSTACK,     LD_EV_SYSCALL,     LD_EV_FAULTS,     LD_EV_BLOCK_RQ,      LD_EV_RECLAIM,
      LD_EV_GIL_ADDR,   LD_EV_TCP_STATE,  LD_EV_TCP_RETRANS, LD_EV_NET_SAMPLE, LD_EV_CGROUP_SAMPLE, LD_EV_CPU_FREQ,
      LD_EV_GIL_WAIT,   LD_EV_CPU_FRAMES, LD_EV_USTACK,      LD_EV_PYSTACK,    LD_EV_CUDA,          LD_EV_GPU_SAMPLE,
      LD_EV_TLS_IO,     LD_EV_H2_FRAMES};
  EXPECT_EQ(types, every);
  // Each record says its own size, and the sizes are the layouts' (bpf/events.h's checks).
  for (const Bytes& r : golden_records()) EXPECT_EQ(as<ld_hdr>(r).size, r.size());
}

// Traces written with the previous record layout stay readable: the fixture of layout 2 (kept
// as it was when layout 3 appended the wakers to ld_sched_agg) goes through the analysis's
// evidence store record by record, and its short sums read with no wakers.
TEST(GoldenRecords, ATraceOfTheLayoutBeforeStillAnalyses) {
  std::vector<Bytes> records;
  const auto summary =
      ld::trace::read_trace((kFixture.parent_path() / "all_records_layout2.ldtrace").string(), [&](const ld_hdr& rec) {
        const auto* p = reinterpret_cast<const uint8_t*>(&rec);
        records.emplace_back(p, p + rec.size);
      });
  EXPECT_EQ(summary.header.value("record_layout_version", 0), 2);
  ASSERT_EQ(records.size(), 24u);
  // Each record is taken as evidence (or left to the timeline) as its current-layout twin is.
  ld::analysis::EvidenceStore store, current;
  ld::trace::ReadSummary current_summary;
  const std::vector<Bytes> now = read_fixture(&current_summary);
  // The types layout 2 had are its 24 (layout 4 appended ld_cuda_call, 5 ld_gpu_sample, 6
  // ld_tls_io, 7 ld_h2_frames).
  ASSERT_GE(now.size(), records.size());
  // add() reads the whole record behind the header: pass it in place, not a copy of the header.
  auto in_place = [](const Bytes& r) -> const ld_hdr& { return *reinterpret_cast<const ld_hdr*>(r.data()); };
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_EQ(store.add(in_place(records[i]), records[i].size()), current.add(in_place(now[i]), now[i].size()))
        << "record type " << in_place(records[i]).type;
  store.finish();
  current.finish();
  const uint32_t tid = sched_agg().hdr.tid;
  const auto *t = store.thread(tid), *t_now = current.thread(tid);
  ASSERT_NE(t, nullptr);
  ASSERT_NE(t_now, nullptr);
  ASSERT_EQ(t->aggs.size(), 1u);
  ASSERT_EQ(t_now->aggs.size(), 1u);
  EXPECT_EQ(t->aggs[0].blocked_ns, t_now->aggs[0].blocked_ns);
  EXPECT_EQ(t->aggs[0].runnable_ns, t_now->aggs[0].runnable_ns);
  EXPECT_EQ(t->aggs[0].wakers[0].tid, 0u);
  EXPECT_EQ(t_now->aggs[0].wakers[0].tid, sched_agg().wakers[0].tid);
}

// The generator (disabled: run it only with a LD_RECORD_LAYOUT_VERSION bump; see the top).
TEST(GoldenRecords, DISABLED_Regenerate) {
  fs::create_directories(kFixture.parent_path());
  ld::trace::TraceWriter writer(kFixture.string(), golden_header());
  const std::vector<Bytes> records = golden_records();
  for (size_t i = 0; i < records.size(); ++i) {
    writer.append(records[i].data(), records[i].size());
    if (i == records.size() / 2) writer.flush();  // two chunks: the reader crosses a boundary
  }
  writer.finish(golden_trailer());
  ld::trace::ReadSummary summary;
  EXPECT_EQ(read_fixture(&summary), records);
}

}  // namespace
