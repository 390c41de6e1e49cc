// SPDX-License-Identifier: GPL-2.0
/* bench_stress: BENCHMARK ONLY (bench/stress_pipeline.cpp, tests/integration/
 * stress_pipeline_test.cpp).  Never in the probe registry, the default probe set or the CLI.
 *
 * A producer for the event pipeline that costs no syscall per record: user space runs this
 * program with BPF_PROG_TEST_RUN, args[0] = how many records to emit, args[1] = the sequence
 * number of the first.  bpf_loop emits them through the agent's own submit path
 * (common.bpf.h: ld_reserve / ld_commit on the shared ring buffer, per-probe counters,
 * BPF_RB_NO_WAKEUP unless the unread data crosses a 1/16-of-the-ring mark), so user space sees
 * exactly what a real probe's records look like.
 *
 * Records are real record types at their real sizes, in the proportions of a real recording
 * (ld_bench_mix, a cycle of LD_BENCH_MIX_LEN types set by user space), with plausible varying
 * field values so the trace compresses like a real one, not like a run of equal records.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define LD_BENCH_MIX_LEN 32

/* Record types, one per step of the cycle; set by user space before load. */
const volatile __u16 ld_bench_mix[LD_BENCH_MIX_LEN] = {
	LD_EV_SOCK_IO, LD_EV_OFFCPU, LD_EV_CPU_SAMPLE, LD_EV_SOCK_IO,
};
const volatile __u32 ld_bench_mix_len = 4;
/* Threads the records are spread over (tid = tgid + 1 + seq % threads). */
const volatile __u32 ld_bench_threads = 8;

struct ld_bench_loop {
	__u64 seq;
	__u32 tgid;
};

/* splitmix64 finaliser: cheap, and different bits for every sequence number. */
static __always_inline __u64 ld_bench_hash(__u64 x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static __always_inline void ld_bench_subject(struct ld_hdr *h, __u32 tgid, __u64 seq)
{
	h->tgid = tgid;
	h->tid = tgid + 1 + (__u32)(seq % ld_bench_threads);
}

static __always_inline void ld_bench_comm(char *dst, __u64 r)
{
	/* A handful of names, as on a real host: "python3", worker threads, swapper. */
	__u64 name = (r & 3) == 0 ? 0x336e6f68747970ULL       /* "python3" */
		   : (r & 3) == 1 ? 0x2f72657070617773ULL     /* "swapper/" */
		   : (r & 3) == 2 ? 0x2f72656b726f77ULL       /* "worker/" */
				  : 0x6e726f63697675ULL;      /* "uvicorn" */
	__builtin_memcpy(dst, &name, 8);
	__builtin_memset(dst + 8, 0, LD_COMM_LEN - 8);
}

static __always_inline void ld_bench_sock_io(struct ld_bench_loop *l, __u64 seq, __u64 r)
{
	struct ld_sock_io *e = ld_reserve(LD_PROBE_BENCH, LD_EV_SOCK_IO, sizeof(*e));

	if (!e)
		return;
	ld_bench_subject(&e->hdr, l->tgid, seq);
	e->sock_id = 0x5bd1e995ULL * (1 + (seq % 64));
	/* A TCP send with TCP_NODELAY that left nothing queued, as a server's usually is. */
	e->unsent = 0;
	e->tcp = 0;
	e->_pad0[0] = e->_pad0[1] = e->_pad0[2] = 0;
	e->ret = 40 + ((r >> 12) & 0xff);
	e->fd = 10 + (__u32)(seq % 64);
	e->lport = 8000;
	e->rport = 40000 + (__u16)(seq % 64);
	e->family = 2; /* AF_INET */
	e->dir = (r >> 20) & 1 ? LD_DIR_SEND : LD_DIR_RECV;
	e->syscall = e->dir == LD_DIR_SEND ? LD_SC_WRITE : LD_SC_READ;
	if (e->dir == LD_DIR_SEND)
		e->tcp = LD_TCP_READ | LD_TCP_NODELAY;
	e->cls = e->dir == LD_DIR_SEND ? LD_PC_SSE_DATA : LD_PC_OTHER;
	e->sse_events = e->cls == LD_PC_SSE_DATA;
	e->_pad = 0;
	ld_commit(LD_PROBE_BENCH, e);
}

static __always_inline void ld_bench_offcpu(struct ld_bench_loop *l, __u64 seq, __u64 r)
{
	struct ld_offcpu *e = ld_reserve(LD_PROBE_BENCH, LD_EV_OFFCPU, sizeof(*e));
	__u64 now;

	if (!e)
		return;
	ld_bench_subject(&e->hdr, l->tgid, seq);
	now = e->hdr.ts_ns;
	e->on_ns = now;
	e->off_ns = now - 1000000 - (r & 0x3fffff);
	e->kind = (r >> 22) & 3 ? LD_OFF_BLOCKED : LD_OFF_PREEMPTED;
	e->wake_ns = e->kind == LD_OFF_BLOCKED ? now - ((r >> 24) & 0xffff) : 0;
	e->prev_state = e->kind == LD_OFF_BLOCKED ? 1 : 0;
	e->kstack_id = e->kind == LD_OFF_BLOCKED ? (__s64)((r >> 40) & 31) : -1;
	e->waker_tid = e->kind == LD_OFF_BLOCKED ? l->tgid + 1 + (__u32)((r >> 45) & 7) : 0;
	e->waker_tgid = e->waker_tid ? l->tgid : 0;
	e->holder_tid = (r >> 48) & 1 ? l->tgid + 1 + (__u32)((r >> 49) & 7) : 0;
	e->holder_tgid = e->holder_tid ? l->tgid : 0;
	e->off_cpu = (r >> 52) & 1;
	e->on_cpu = e->hdr.cpu;
	e->syscall_nr = e->kind == LD_OFF_BLOCKED ? 202 /* futex */ : 0xffffffffu;
	e->flags = (r >> 53) & 1 ? LD_OFFCPU_KSTACK_REUSED : 0;
	ld_bench_comm(e->waker_comm, r >> 54);
	ld_bench_comm(e->holder_comm, r >> 56);
	ld_commit(LD_PROBE_BENCH, e);
}

static __always_inline void ld_bench_cpu_sample(struct ld_bench_loop *l, __u64 seq, __u64 r)
{
	struct ld_cpu_sample *e = ld_reserve(LD_PROBE_BENCH, LD_EV_CPU_SAMPLE, sizeof(*e));

	if (!e)
		return;
	ld_bench_subject(&e->hdr, l->tgid, seq);
	e->user_mode = (r & 7) != 0;
	e->kstack_id = e->user_mode ? -1 : (__s64)((r >> 3) & 63);
	e->_pad = 0;
	ld_commit(LD_PROBE_BENCH, e);
}

static __always_inline void ld_bench_sched_agg(struct ld_bench_loop *l, __u64 seq, __u64 r)
{
	struct ld_sched_agg *e = ld_reserve(LD_PROBE_BENCH, LD_EV_SCHED_AGG, sizeof(*e));

	if (!e)
		return;
	ld_bench_subject(&e->hdr, l->tgid, seq);
	e->period_start_ns = e->hdr.ts_ns - 100000000;
	e->blocked_ns = r & 0xffffff;
	e->runnable_ns = (r >> 24) & 0xfffff;
	e->blocked_count = (r >> 44) & 0x3ff;
	e->runnable_count = (r >> 54) & 0x3ff;
	__builtin_memset(e->wakers, 0, sizeof(e->wakers));
	ld_commit(LD_PROBE_BENCH, e);
}

static long ld_bench_emit(__u64 index, void *ctx)
{
	struct ld_bench_loop *l = ctx;
	__u64 seq = l->seq + index;
	__u64 r = ld_bench_hash(seq);
	__u32 step = (__u32)(seq % ld_bench_mix_len) & (LD_BENCH_MIX_LEN - 1);

	switch (ld_bench_mix[step]) {
	case LD_EV_OFFCPU:
		ld_bench_offcpu(l, seq, r);
		break;
	case LD_EV_CPU_SAMPLE:
		ld_bench_cpu_sample(l, seq, r);
		break;
	case LD_EV_SCHED_AGG:
		ld_bench_sched_agg(l, seq, r);
		break;
	default:
		ld_bench_sock_io(l, seq, r);
		break;
	}
	return 0;
}

/* ctx->args[0] = records to emit, args[1] = sequence number of the first. */
SEC("raw_tp")
int ld_bench_stress(struct bpf_raw_tracepoint_args *ctx)
{
	struct ld_bench_loop l = {
		.seq = ctx->args[1],
		.tgid = bpf_get_current_pid_tgid() >> 32,
	};
	__u64 n = ctx->args[0];

	if (n > (1 << 20))
		n = 1 << 20;
	bpf_loop((__u32)n, ld_bench_emit, &l, 0);
	return 0;
}
