// SPDX-License-Identifier: GPL-2.0
/* memory: how long the target threads spend mapping and unmapping memory, and
 * where they take user page faults -- the "KV cache allocated at request
 * time" pattern (a large mmap, then a storm of first-touch faults).
 *
 * mmap/munmap/brk/mremap/madvise are timed with their syscall tracepoints.
 * Big or slow calls are itemised; the rest are summed per thread
 * (LD_SYS_MEM_AGG) because allocators make many small ones.  Page faults are
 * far too frequent for a record each: they are counted per thread in the
 * kernel and emitted in batches of at most ld_fault_batch faults spanning less
 * than ld_fault_span_ns, so user space can still say "N faults in this 5 ms".
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "syscall_timing.bpf.h"
#include "memory_maps.h" /* struct ld_mem_agg, ld_fault_acc */

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load. */
const volatile __u64 ld_mem_min_bytes = 1 << 20;   /* itemise calls at least this long (bytes) */
const volatile __u64 ld_mem_min_ns = 100000;        /* ... or at least this slow */
const volatile __u64 ld_mem_agg_ns = 10000000;      /* a small-call aggregate spans < this */
const volatile __u32 ld_fault_batch = 256;          /* faults per ld_faults record, at most */
const volatile __u64 ld_fault_span_ns = 5000000;    /* a batch spans < this */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct ld_mem_agg);
} ld_mem_agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct ld_fault_acc);
} ld_fault_acc SEC(".maps");

/* ------------------------------------------------------------- syscalls */

static __always_inline int ld_mem_enter(__u32 kind, __u64 arg0, __u64 arg1)
{
	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	ld_sc_enter(kind, arg0, arg1);
	return 0;
}

static __always_inline void ld_mem_agg_emit(const struct ld_mem_agg *a)
{
	struct ld_syscall *e = ld_reserve(LD_PROBE_MEMORY, LD_EV_SYSCALL, sizeof(*e));

	if (!e)
		return;
	e->hdr.ts_ns = a->last_ns;
	e->start_ns = a->start_ns;
	e->dur_ns = a->dur_ns;
	e->ret = a->failed;
	e->arg0 = a->calls;
	e->arg1 = a->bytes;
	e->kind = LD_SYS_MEM_AGG;
	e->path_len = 0;
	e->_pad = 0;
	ld_commit(LD_PROBE_MEMORY, e);
}

/* Adds a small call to the thread's aggregate; a call that comes after the
 * aggregate's period flushes it first and starts the next one. */
static __always_inline void ld_mem_agg_add(const struct ld_sc_inflight *in, __u64 now, long ret,
					   __u32 tgid, __u32 tid)
{
	struct ld_mem_agg *a = bpf_map_lookup_elem(&ld_mem_agg, &tid);
	struct ld_mem_agg fresh = {};

	if (a && in->start_ns - a->start_ns < ld_mem_agg_ns) {
		a->last_ns = now;
		a->calls++;
		a->bytes += in->arg0;
		a->dur_ns += now - in->start_ns;
		a->failed += ret < 0 && ret > -4096;
		return;
	}
	if (a)
		ld_mem_agg_emit(a);
	fresh.start_ns = in->start_ns;
	fresh.last_ns = now;
	fresh.calls = 1;
	fresh.bytes = in->arg0;
	fresh.dur_ns = now - in->start_ns;
	fresh.failed = ret < 0 && ret > -4096;
	fresh.tgid = tgid;
	bpf_map_update_elem(&ld_mem_agg, &tid, &fresh, BPF_ANY);
}

static __always_inline int ld_mem_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ld_sc_inflight in;
	__u64 now;

	if (!ld_is_target(id >> 32))
		return 0;
	if (!ld_sc_take(&in))
		return 0;
	now = bpf_ktime_get_ns();
	/* brk: the size is the move of the break, known only now (arg1 = old break). */
	if (in.kind == LD_SYS_BRK && ret > 0)
		in.arg0 = (__u64)ret > in.arg1 ? (__u64)ret - in.arg1 : in.arg1 - (__u64)ret;
	if (in.arg0 >= ld_mem_min_bytes || now - in.start_ns >= ld_mem_min_ns)
		ld_sc_emit(LD_PROBE_MEMORY, &in, ret);
	else
		ld_mem_agg_add(&in, now, ret, id >> 32, (__u32)id);
	return 0;
}

#define LD_ARG(i) (ctx->args[i])

#define LD_MEM_EXIT(name)                                                \
	SEC("tracepoint/syscalls/sys_exit_" #name)                       \
	int ld_exit_##name(struct trace_event_raw_sys_exit *ctx)         \
	{                                                                \
		return ld_mem_exit(ctx->ret);                            \
	}

/* mmap(addr, len, prot, flags, fd, off) */
SEC("tracepoint/syscalls/sys_enter_mmap")
int ld_enter_mmap(struct trace_event_raw_sys_enter *ctx)
{
	return ld_mem_enter(LD_SYS_MMAP, LD_ARG(1), (LD_ARG(3) << 32) | (__u32)LD_ARG(2));
}
LD_MEM_EXIT(mmap)

/* munmap(addr, len) */
SEC("tracepoint/syscalls/sys_enter_munmap")
int ld_enter_munmap(struct trace_event_raw_sys_enter *ctx)
{
	return ld_mem_enter(LD_SYS_MUNMAP, LD_ARG(1), LD_ARG(0));
}
LD_MEM_EXIT(munmap)

/* brk(addr): remember the old break to size the move at exit. */
SEC("tracepoint/syscalls/sys_enter_brk")
int ld_enter_brk(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *task;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	ld_sc_enter(LD_SYS_BRK, 0, BPF_CORE_READ(task, mm, brk));
	return 0;
}
LD_MEM_EXIT(brk)

/* mremap(old_addr, old_len, new_len, flags, new_addr) */
SEC("tracepoint/syscalls/sys_enter_mremap")
int ld_enter_mremap(struct trace_event_raw_sys_enter *ctx)
{
	return ld_mem_enter(LD_SYS_MREMAP, LD_ARG(2), LD_ARG(1));
}
LD_MEM_EXIT(mremap)

/* madvise(addr, len, advice) */
SEC("tracepoint/syscalls/sys_enter_madvise")
int ld_enter_madvise(struct trace_event_raw_sys_enter *ctx)
{
	return ld_mem_enter(LD_SYS_MADVISE, LD_ARG(1), LD_ARG(2));
}
LD_MEM_EXIT(madvise)

/* ---------------------------------------------------------- page faults */

static __always_inline void ld_faults_emit(const struct ld_fault_acc *b)
{
	struct ld_faults *e = ld_reserve(LD_PROBE_MEMORY, LD_EV_FAULTS, sizeof(*e));

	if (!e)
		return;
	e->hdr.ts_ns = b->last_ns;
	e->first_ns = b->first_ns;
	e->count = b->count;
	e->_pad = 0;
	ld_commit(LD_PROBE_MEMORY, e);
}

/* x86 only (arch/x86/mm/fault.c); user space disables this program where the
 * tracepoint does not exist.  A thread updates only its own slot, and a
 * thread runs on one CPU at a time: no atomics needed. */
SEC("tracepoint/exceptions/page_fault_user")
int ld_page_fault_user(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_fault_acc *b, fresh = {};
	__u64 now;

	if (!ld_is_target(id >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	b = bpf_map_lookup_elem(&ld_fault_acc, &tid);
	if (!b) {
		fresh.first_ns = now;
		fresh.last_ns = now;
		fresh.count = 1;
		fresh.tgid = id >> 32;
		bpf_map_update_elem(&ld_fault_acc, &tid, &fresh, BPF_ANY);
		return 0;
	}
	if (b->count && now - b->first_ns >= ld_fault_span_ns) {
		/* This fault is too late for the open batch: close it, open another. */
		ld_faults_emit(b);
		b->count = 0;
	}
	if (!b->count)
		b->first_ns = now;
	b->count++;
	b->last_ns = now;
	if (b->count >= ld_fault_batch) {
		ld_faults_emit(b);
		b->count = 0;
	}
	return 0;
}

/* ------------------------------------------------------------ thread exit */

/* A thread's open fault batch and small-call aggregate leave with it (the
 * rest are read from the maps by user space at the end of a recording). */
SEC("tracepoint/sched/sched_process_exit")
int ld_mem_task_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_fault_acc *b;
	struct ld_mem_agg *a;

	if (!ld_is_target(id >> 32))
		return 0;
	b = bpf_map_lookup_elem(&ld_fault_acc, &tid);
	if (b) {
		if (b->count)
			ld_faults_emit(b);
		bpf_map_delete_elem(&ld_fault_acc, &tid);
	}
	a = bpf_map_lookup_elem(&ld_mem_agg, &tid);
	if (a) {
		ld_mem_agg_emit(a);
		bpf_map_delete_elem(&ld_mem_agg, &tid);
	}
	return 0;
}
