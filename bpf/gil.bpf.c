// SPDX-License-Identifier: GPL-2.0
/* gil: how long target threads wait for the Python GIL.
 *
 * A permanent uprobe on take_gil costs ~70% of an IO-heavy Python loop's
 * throughput (it runs on every GIL re-acquire), so uprobes are only used to
 * LEARN where the GIL's futex words are:
 *
 *   1. user space attaches ld_gil_enter/ld_gil_leave (uprobe + uretprobe) on
 *      take_gil or PyEval_RestoreThread of one target process and marks the
 *      tgid in ld_gil_learning;
 *   2. a futex wait made by a thread that is inside that function is a GIL
 *      wait: its uaddr goes into ld_gil_addrs (bounded per process);
 *   3. user space sees the addresses in tick(), reports them and detaches the
 *      uprobes; from then on only the futex syscall tracepoints run, and they
 *      time waits on the learned addresses (kernel threshold, short waits
 *      summed per thread).
 *
 * Only tracepoints and uprobes: no kprobes or trampolines on this kernel.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "gil_maps.h" /* struct ld_gil_key, ld_gil_learn, ld_gil_agg */

char LICENSE[] SEC("license") = "GPL";

/* Waits at least this long are one record each; shorter ones are summed. */
const volatile __u64 ld_gil_min_ns = 50000;
/* A thread's summed short waits are emitted once they span this long. */
const volatile __u64 ld_gil_agg_period_ns = 1000000000ULL;

/* One GIL is a condvar (two alternating futex words in glibc) + a mutex; a
 * few interpreters at most.  Bounds what a confused learn can insert. */
#define LD_GIL_MAX_ADDRS 8

/* futex(2) op bits (uapi/linux/futex.h). */
#define LD_FUTEX_WAIT 0
#define LD_FUTEX_LOCK_PI 6
#define LD_FUTEX_WAIT_BITSET 9
#define LD_FUTEX_WAIT_REQUEUE_PI 11
#define LD_FUTEX_LOCK_PI2 13
#define LD_FUTEX_CMD_MASK 127 /* ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) */

struct ld_gil_inflight {
	__u64 start_ns;
	__u64 uaddr;
	__u32 method;
	__u32 _pad;
};

/* tgid -> learning state; present only while the uprobes are attached. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct ld_gil_learn);
} ld_gil_learning SEC(".maps");

/* tid -> 1 while the thread is inside take_gil / PyEval_RestoreThread. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} ld_gil_intake SEC(".maps");

/* {tgid, futex word} -> enum ld_gil_method that found it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct ld_gil_key);
	__type(value, __u32);
} ld_gil_addrs SEC(".maps");

/* tid -> the GIL wait in progress. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ld_gil_inflight);
} ld_gil_inflight SEC(".maps");

/* tid -> short waits summed since first_ns. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ld_gil_agg);
} ld_gil_aggs SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(ld_gil_enter)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u8 one = 1;

	if (!ld_is_target(tgid))
		return 0;
	bpf_map_update_elem(&ld_gil_intake, &tid, &one, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ld_gil_leave)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;

	if (!ld_is_target(id >> 32))
		return 0;
	bpf_map_delete_elem(&ld_gil_intake, &tid);
	return 0;
}

static __always_inline int ld_futex_is_wait(__u64 op)
{
	__u32 cmd = op & LD_FUTEX_CMD_MASK;

	return cmd == LD_FUTEX_WAIT || cmd == LD_FUTEX_WAIT_BITSET || cmd == LD_FUTEX_LOCK_PI ||
	       cmd == LD_FUTEX_LOCK_PI2 || cmd == LD_FUTEX_WAIT_REQUEUE_PI;
}

/* A wait inside take_gil while learning: remember its word.  Returns the
 * method, 0 when this wait is not (known to be) on the GIL. */
static __always_inline __u32 ld_gil_learn(struct ld_gil_key *key, __u32 tid)
{
	struct ld_gil_learn *l;
	__u32 method;

	if (!bpf_map_lookup_elem(&ld_gil_intake, &tid))
		return 0;
	l = bpf_map_lookup_elem(&ld_gil_learning, &key->tgid);
	if (!l)
		return 0; /* stale flag: the uprobes were detached mid-call */
	/* Not atomic (clang 14 without -mcpu=v3 cannot use the XADD result):
	 * two CPUs racing may overshoot the bound by one, which is harmless. */
	if (l->learned >= LD_GIL_MAX_ADDRS)
		return 0;
	l->learned++;
	method = l->method;
	bpf_map_update_elem(&ld_gil_addrs, key, &method, BPF_NOEXIST);
	return method;
}

SEC("tracepoint/syscalls/sys_enter_futex")
int ld_gil_futex_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_gil_key key = {.tgid = id >> 32};
	struct ld_gil_inflight in = {};
	__u32 *method;

	if (!ld_is_target(key.tgid))
		return 0;
	if (!ld_futex_is_wait(ctx->args[1]))
		return 0;
	key.uaddr = ctx->args[0];
	method = bpf_map_lookup_elem(&ld_gil_addrs, &key);
	if (method)
		in.method = *method;
	else if (!(in.method = ld_gil_learn(&key, tid)))
		return 0;
	in.start_ns = bpf_ktime_get_ns();
	in.uaddr = key.uaddr;
	bpf_map_update_elem(&ld_gil_inflight, &tid, &in, BPF_ANY);
	return 0;
}

static __always_inline void ld_gil_emit_agg(struct ld_gil_agg *a)
{
	struct ld_gil_wait *w = ld_reserve(LD_PROBE_GIL, LD_EV_GIL_WAIT, sizeof(*w));

	if (!w)
		return;
	w->hdr.ts_ns = a->last_end_ns;
	w->start_ns = a->first_ns;
	w->dur_ns = a->sum_ns;
	w->uaddr = a->uaddr;
	w->max_ns = a->max_ns;
	w->ret = 0;
	w->count = a->count;
	w->method = a->method;
	w->kind = LD_GIL_WAIT_AGG;
	w->_pad = 0;
	ld_commit(LD_PROBE_GIL, w);
}

/* Sums a short wait into the thread's aggregate; emits it when it spans the
 * aggregation period (so short waits keep their place on the timeline). */
static __always_inline void ld_gil_add_short(__u32 tgid, __u32 tid,
					     const struct ld_gil_inflight *in, __u64 end, __u64 dur)
{
	struct ld_gil_agg *a = bpf_map_lookup_elem(&ld_gil_aggs, &tid);
	struct ld_gil_agg fresh = {};

	if (!a) {
		fresh.first_ns = in->start_ns;
		fresh.tgid = tgid;
		bpf_map_update_elem(&ld_gil_aggs, &tid, &fresh, BPF_NOEXIST);
		a = bpf_map_lookup_elem(&ld_gil_aggs, &tid);
		if (!a)
			return;
	}
	if (!a->count)
		a->first_ns = in->start_ns;
	a->count++;
	a->sum_ns += dur;
	if (dur > a->max_ns)
		a->max_ns = dur;
	a->last_end_ns = end;
	a->uaddr = in->uaddr;
	a->method = in->method;
	if (end - a->first_ns < ld_gil_agg_period_ns)
		return;
	ld_gil_emit_agg(a);
	a->count = 0;
	a->sum_ns = 0;
	a->max_ns = 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int ld_gil_futex_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ld_gil_inflight *in;
	struct ld_gil_wait *w;
	__u64 end, dur;

	if (!ld_is_target(tgid))
		return 0;
	in = bpf_map_lookup_elem(&ld_gil_inflight, &tid);
	if (!in)
		return 0;
	end = bpf_ktime_get_ns();
	dur = end - in->start_ns;
	if (dur < ld_gil_min_ns) {
		ld_gil_add_short(tgid, tid, in, end, dur);
		goto done;
	}
	w = ld_reserve(LD_PROBE_GIL, LD_EV_GIL_WAIT, sizeof(*w));
	if (!w)
		goto done;
	w->hdr.ts_ns = end;
	w->start_ns = in->start_ns;
	w->dur_ns = dur;
	w->uaddr = in->uaddr;
	w->max_ns = dur;
	w->ret = ctx->ret;
	w->count = 1;
	w->method = in->method;
	w->kind = LD_GIL_WAIT_ONE;
	w->_pad = 0;
	ld_commit(LD_PROBE_GIL, w);
done:
	bpf_map_delete_elem(&ld_gil_inflight, &tid);
	return 0;
}
