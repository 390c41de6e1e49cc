// SPDX-License-Identifier: GPL-2.0
/* sched: when and why the target threads were off CPU.
 *
 * Per target thread the kernel keeps one struct ld_sched_thread:
 *   switch-out  -> off_ns, state, kind, kernel stack, syscall it sleeps in
 *   sched_waking-> wake_ns and the waker (runs in the waker's context)
 *   switch-in   -> one struct ld_offcpu when the interval lasted at least
 *                  ld_offcpu_min_ns, else summed into the thread's aggregate,
 *                  flushed as struct ld_sched_agg every ld_agg_period_ns.
 *
 * BTF-typed raw tracepoints (tp_btf) for sched_switch and sched_waking, the two
 * that fire machine-wide: their task_struct arguments are read with plain
 * loads, where a raw tracepoint's untyped ones take a bpf_probe_read_kernel()
 * per field (~50-80 ns each on the reference VM).  Raw tracepoints for the
 * rest, and for all of them where tp_btf does not load (user space falls back:
 * the same code with `btf` false).  Either way not the tp/sched tracepoints:
 * their arguments are the task_structs, so tgid, state and pt_regs come
 * without a pid lookup, and no trace-event record is formatted.
 * sched_waking rather than sched_wakeup: since the wake-up queue (TTWU_QUEUE)
 * sched_wakeup may run on the wakee's CPU from an IPI, where `current` is not
 * the waker; sched_waking always runs in try_to_wake_up()'s caller.
 *
 * sched_switch fires for every context switch of the machine: the handler
 * checks both tasks against ld_targets before anything else.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "sched_maps.h" /* struct ld_sched_thread */

char LICENSE[] SEC("license") = "GPL";

#define LD_TASK_RUNNING 0
#define LD_PF_EXITING 0x00000004 /* include/linux/sched.h, stable since 2.6 */
#define LD_NO_SYSCALL 0xffffffffu

/* Set by user space before load. */
const volatile __u64 ld_offcpu_min_ns = 1000000;    /* itemise intervals >= 1 ms */
const volatile __u64 ld_agg_period_ns = 100000000;  /* flush short-slice sums every 100 ms */
const volatile bool ld_trace_migrations = true;
const volatile __u64 ld_kstack_gap_ns = 10000000;   /* fresh stack per (thread, syscall) per 10 ms */
/* Syscalls whose number alone says what a block in them waits for (futex: a
 * lock, fsync: the disk, epoll_wait: the application; user space sets the
 * bits from the analysis's own table, model/syscalls.cpp).  A block in one of
 * them takes no kernel stack: the stack would say nothing more, and its walk
 * is most of what a switch costs (~2 us on the reference VM, against ~0.8 us
 * for the rest), paid for every token by a server whose HTTP threads wait on
 * a condition variable for each token (llama-server). */
const volatile __u64 ld_stackless_syscalls[LD_STACKLESS_SYSCALL_WORDS] = {};

/* Entries are removed at thread exit (sched_process_exit), so a plain hash:
 * an LRU map could evict a live thread's pending aggregate. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ld_sched_thread);
} ld_sched_threads SEC(".maps");

/* Kernel stacks at blocking switch-outs; symbolised by user space at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LD_KSTACK_MAX_DEPTH * sizeof(__u64));
} ld_sched_stacks SEC(".maps");

/* Kernel 5.14 renamed task_struct::state to __state (and made it unsigned
 * int, commit 2f064a59a11f): read whichever this kernel has. */
struct task_struct___o {
	volatile long state;
} __attribute__((preserve_access_index));

struct task_struct___x {
	unsigned int __state;
} __attribute__((preserve_access_index));

static __always_inline __u32 ld_task_state(struct task_struct *task)
{
	struct task_struct___x *t = (void *)task;

	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___o *)task, state);
}

/* 5.3..5.15 kept the cpu in task_struct on THREAD_INFO_IN_TASK arches; 5.16
 * moved it back into thread_info (commit bcf9033e5449). */
struct task_struct___cpu_o {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __u32 ld_task_cpu(struct task_struct *task)
{
	struct task_struct___cpu_o *old = (void *)task;

	if (bpf_core_field_exists(old->cpu))
		return BPF_CORE_READ(old, cpu);
	return BPF_CORE_READ(task, thread_info.cpu);
}

/* The syscall the current task is in, from its user pt_regs (orig_ax holds
 * the number, -1 outside a syscall, e.g. preempted in user mode or in a page
 * fault).  Only `current` has trusted BTF here, hence no task argument. */
static __always_inline __u32 ld_current_syscall(void)
{
	struct pt_regs *regs = ld_current_user_regs();

	if (!regs)
		return LD_NO_SYSCALL;
#if defined(__TARGET_ARCH_x86)
	return (__u32)regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	return (__u32)regs->syscallno;
#else
	return LD_NO_SYSCALL;
#endif
}

/* A field of a task_struct argument: a plain load in tp_btf programs (`btf`, a
 * constant after inlining, so the other branch is compiled out), a probe read
 * in raw tracepoints. */
#define LD_TASK_FIELD(btf, task, field) ((btf) ? (task)->field : BPF_CORE_READ(task, field))

static __always_inline struct ld_sched_thread *ld_thread_state(__u32 tid, __u32 tgid, __u64 now)
{
	struct ld_sched_thread *st = bpf_map_lookup_elem(&ld_sched_threads, &tid);
	struct ld_sched_thread init = {};

	if (st)
		return st;
	init.period_start_ns = now;
	init.kstack_id = -1;
	init.tgid = tgid;
	bpf_map_update_elem(&ld_sched_threads, &tid, &init, BPF_NOEXIST);
	return bpf_map_lookup_elem(&ld_sched_threads, &tid);
}

/* Records are filled in the context of another task (switch-in runs in prev,
 * wake-ups in the waker): the header names the thread the record is about. */
static __always_inline void ld_set_subject(struct ld_hdr *h, __u32 tid, __u32 tgid)
{
	h->tid = tid;
	h->tgid = tgid;
}

/* Emits the short-slice sums of one thread and restarts its period. */
static __always_inline void ld_flush_agg(struct ld_sched_thread *st, __u32 tid, __u32 tgid,
					 __u64 now)
{
	struct ld_sched_agg *e;

	if (!st->blocked_count && !st->runnable_count) {
		st->period_start_ns = now;
		return;
	}
	e = ld_reserve(LD_PROBE_SCHED, LD_EV_SCHED_AGG, sizeof(*e));
	if (!e)
		return; /* drop counted; keep summing, the next flush carries it */
	ld_set_subject(&e->hdr, tid, tgid);
	e->period_start_ns = st->period_start_ns;
	e->blocked_ns = st->blocked_ns;
	e->runnable_ns = st->runnable_ns;
	e->blocked_count = st->blocked_count;
	e->runnable_count = st->runnable_count;
	__builtin_memcpy(e->wakers, st->agg_wakers, sizeof(e->wakers));
	ld_commit(LD_PROBE_SCHED, e);
	st->period_start_ns = now;
	st->blocked_ns = 0;
	st->runnable_ns = 0;
	st->blocked_count = 0;
	st->runnable_count = 0;
	__builtin_memset(st->agg_wakers, 0, sizeof(st->agg_wakers));
}

/* Counts a short blocked slice against its waker: the first LD_AGG_WAKERS
 * distinct wakers of the period keep exact sums, later ones only the totals.
 * A wake-up not seen (before attach) or from an interrupt on an idle CPU has
 * no waker (tid 0). */
static __always_inline void ld_count_agg_waker(struct ld_sched_thread *st, __u64 blocked_ns)
{
	struct ld_agg_waker *w;
	int i;

	if (!st->waker_tid)
		return;
#pragma unroll
	for (i = 0; i < LD_AGG_WAKERS; i++) {
		w = &st->agg_wakers[i];
		if (w->tid && w->tid != st->waker_tid)
			continue;
		w->tid = st->waker_tid;
		w->tgid = st->waker_tgid;
		w->count++;
		w->blocked_ns += blocked_ns;
		return;
	}
}

/* The kernel stack of the current (= prev) task for a block in `syscall_nr`:
 * walked at most every ld_kstack_gap_ns per (thread, syscall), reused between. */
static __always_inline void ld_block_stack(void *ctx, struct ld_sched_thread *st, __u64 now)
{
	struct ld_stack_slot *slot = &st->stacks[st->syscall_nr & (LD_STACK_SLOTS - 1)];

	if (slot->syscall_nr == st->syscall_nr && slot->walked_ns &&
	    now - slot->walked_ns < ld_kstack_gap_ns) {
		st->kstack_id = slot->stack_id;
		st->flags |= LD_OFFCPU_KSTACK_REUSED;
		return;
	}
	/* current == prev in sched_switch: this is prev's kernel stack. */
	st->kstack_id = bpf_get_stackid(ctx, &ld_sched_stacks, 0);
	slot->syscall_nr = st->syscall_nr;
	slot->stack_id = st->kstack_id;
	slot->walked_ns = now;
}

/* Whether a block in syscall `nr` is worth a kernel stack: LD_NO_SYSCALL (a
 * page fault, a kernel thread) and the numbers past the table always are. */
static __always_inline bool ld_stack_tells_more(__u32 nr)
{
	__u32 word = nr / 64;

	if (word >= LD_STACKLESS_SYSCALL_WORDS)
		return true;
	/* The mask again, behind a barrier: clang drops it as redundant and may
	 * test the bound on a register the verifier does not tie to the index. */
	barrier_var(word);
	word &= LD_STACKLESS_SYSCALL_WORDS - 1;
	return !((ld_stackless_syscalls[word] >> (nr % 64)) & 1);
}

/* prev's state at the switch: the tracepoint's own prev_state argument where
 * it has one, else re-read from prev. */
#define LD_STATE_FROM_TASK 0xffffffffu

/* holder: whether the task that held the CPU until on_ns is `current` (= prev,
 * at a switch-in); false when the switch-in was not seen. */
static __always_inline void ld_emit_offcpu(struct ld_sched_thread *st, bool holder, __u32 tid,
					   __u32 tgid, __u64 on_ns)
{
	struct ld_offcpu *e = ld_reserve(LD_PROBE_SCHED, LD_EV_OFFCPU, sizeof(*e));
	__u64 holder_id;

	if (!e)
		return;
	ld_set_subject(&e->hdr, tid, tgid);
	e->hdr.ts_ns = on_ns;
	e->off_ns = st->off_ns;
	e->wake_ns = st->wake_ns;
	e->on_ns = on_ns;
	e->kind = st->kind;
	e->prev_state = st->prev_state;
	e->kstack_id = st->kstack_id;
	e->waker_tid = st->waker_tid;
	e->waker_tgid = st->waker_tgid;
	e->off_cpu = st->off_cpu;
	e->on_cpu = bpf_get_smp_processor_id();
	e->syscall_nr = st->syscall_nr;
	e->flags = st->flags;
	__builtin_memcpy(e->waker_comm, st->waker_comm, LD_COMM_LEN);
	if (holder) {
		holder_id = bpf_get_current_pid_tgid();
		e->holder_tid = (__u32)holder_id;
		e->holder_tgid = holder_id >> 32;
		bpf_get_current_comm(e->holder_comm, sizeof(e->holder_comm));
	} else {
		e->flags |= LD_OFFCPU_ON_UNSEEN;
		e->holder_tid = 0;
		e->holder_tgid = 0;
		__builtin_memset(e->holder_comm, 0, sizeof(e->holder_comm));
	}
	ld_commit(LD_PROBE_SCHED, e);
}

/* Ends the thread's off-CPU interval at on_ns: one record when it lasted at
 * least ld_offcpu_min_ns, else summed into the thread's aggregate. */
static __always_inline void ld_close_interval(struct ld_sched_thread *st, bool holder, __u32 tid,
					      __u32 tgid, __u64 on_ns)
{
	__u64 ready;

	/* bpf_ktime_get_ns() is the NMI-safe fast clock: read on two CPUs around
	 * a timekeeping update it can step back a little (see
	 * ktime_get_mono_fast_ns()).  Switch-out, wake-up and switch-in run on
	 * different CPUs, so order the three here: a wake stamped before off_ns
	 * made a negative blocked time. */
	if (on_ns < st->off_ns)
		on_ns = st->off_ns;
	if (st->wake_ns && st->wake_ns < st->off_ns)
		st->wake_ns = st->off_ns;
	if (st->wake_ns > on_ns)
		st->wake_ns = on_ns;
	if (on_ns - st->off_ns >= ld_offcpu_min_ns) {
		ld_emit_offcpu(st, holder, tid, tgid, on_ns);
	} else if (st->kind == LD_OFF_BLOCKED) {
		/* A wake-up we did not see (before attach) counts as on_ns. */
		ready = st->wake_ns ? st->wake_ns : on_ns;
		st->blocked_ns += ready - st->off_ns;
		st->runnable_ns += on_ns - ready;
		st->blocked_count++;
		ld_count_agg_waker(st, ready - st->off_ns);
	} else {
		st->runnable_ns += on_ns - st->off_ns;
		st->runnable_count++;
	}
	st->off_ns = 0;
	st->wake_ns = 0;
	if (on_ns > st->period_start_ns && on_ns - st->period_start_ns >= ld_agg_period_ns)
		ld_flush_agg(st, tid, tgid, on_ns);
}

/* A thread that is running (switching out, exiting) while its state says it
 * is off CPU was switched in without us seeing it (LD_OFFCPU_ON_UNSEEN). */
static __always_inline void ld_close_unseen(struct ld_sched_thread *st, __u32 tid, __u32 tgid,
					    __u64 now)
{
	__u64 on = st->wake_ns ? st->wake_ns : st->off_ns;

	if (!st->off_ns)
		return;
	ld_close_interval(st, false, tid, tgid, on < now ? on : now);
}

static __always_inline void ld_switch_out(void *ctx, bool preempt, struct task_struct *prev,
					  struct task_struct *next, __u32 tid, __u32 tgid, __u64 now,
					  __u32 state, const bool btf)
{
	struct ld_sched_thread *st;

	/* The last switch of a dying thread: its entry is gone (ld_sched_exit),
	 * do not make a new one that nobody would delete. */
	if (LD_TASK_FIELD(btf, prev, flags) & LD_PF_EXITING)
		return;
	st = ld_thread_state(tid, tgid, now);
	if (!st)
		return;
	ld_close_unseen(st, tid, tgid, now);
	if (state == LD_STATE_FROM_TASK)
		state = ld_task_state(prev);
	st->off_ns = now;
	st->wake_ns = 0;
	st->prev_state = state;
	st->off_cpu = bpf_get_smp_processor_id();
	st->syscall_nr = ld_current_syscall();
	st->flags = 0;
	/* Preempted while preparing to sleep (state already set, still queued)
	 * is runnable too: `preempt` tells those apart from a real block. */
	if (preempt || state == LD_TASK_RUNNING) {
		st->kind = LD_OFF_PREEMPTED;
		/* The stack of a preemption is the interrupt return path: not
		 * worth a stack walk on every preemption. */
		st->kstack_id = -1;
		st->waker_tid = LD_TASK_FIELD(btf, next, pid);
		st->waker_tgid = LD_TASK_FIELD(btf, next, tgid);
		if (btf)
			__builtin_memcpy(st->waker_comm, next->comm, LD_COMM_LEN);
		else
			BPF_CORE_READ_STR_INTO(&st->waker_comm, next, comm);
	} else {
		st->kind = LD_OFF_BLOCKED;
		if (ld_stack_tells_more(st->syscall_nr))
			ld_block_stack(ctx, st, now);
		else
			st->kstack_id = -1;
		st->waker_tid = 0;
		st->waker_tgid = 0;
		st->waker_comm[0] = 0;
	}
}

/* At the switch-in of `tid` the CPU's holder until now is prev, `current`. */
static __always_inline void ld_switch_in(__u32 tid, __u32 tgid, __u64 now)
{
	struct ld_sched_thread *st = bpf_map_lookup_elem(&ld_sched_threads, &tid);

	if (!st || !st->off_ns)
		return;
	ld_close_interval(st, true, tid, tgid, now);
}

static __always_inline int ld_on_switch(void *ctx, bool preempt, struct task_struct *prev,
					struct task_struct *next, __u32 prev_state, const bool btf)
{
	__u64 id = bpf_get_current_pid_tgid(); /* = prev */
	__u32 next_tgid = LD_TASK_FIELD(btf, next, tgid);
	__u64 now = 0;

	/* Separate branches: combining the two lookups ("a || b") lets clang
	 * OR the two map pointers, which the verifier rejects.  tgid 0 is the
	 * idle task, one side of most switches on a quiet machine: no lookup. */
	if ((__u32)id && ld_is_target(id >> 32)) {
		now = bpf_ktime_get_ns();
		ld_switch_out(ctx, preempt, prev, next, (__u32)id, id >> 32, now, prev_state, btf);
	}
	if (next_tgid && ld_is_target(next_tgid)) {
		if (!now)
			now = bpf_ktime_get_ns();
		ld_switch_in(LD_TASK_FIELD(btf, next, pid), next_tgid, now);
	}
	return 0;
}

/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state) since 5.18 (commit fa2c3254d7cf): the state
 * __schedule() decided on.  prev->__state itself is not that: since
 * c6e7bd7afaeb (5.8) a wake-up on another CPU may set it to TASK_WAKING or
 * TASK_RUNNING while prev is still switching out, and a real block then read
 * as a preemption (~1 in 1000 of a 200 us sleeper's blocks here).  On older
 * kernels reading args[3] fails the attach (the raw tracepoint has 3
 * arguments); user space then attaches ld_sched_switch_legacy. */
SEC("raw_tracepoint/sched_switch")
int ld_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
	return ld_on_switch(ctx, (bool)ctx->args[0], (struct task_struct *)ctx->args[1],
			    (struct task_struct *)ctx->args[2], (__u32)ctx->args[3], false);
}

/* Before 5.18: the state re-read from prev (racy, as above). */
SEC("raw_tracepoint/sched_switch")
int ld_sched_switch_legacy(struct bpf_raw_tracepoint_args *ctx)
{
	return ld_on_switch(ctx, (bool)ctx->args[0], (struct task_struct *)ctx->args[1],
			    (struct task_struct *)ctx->args[2], LD_STATE_FROM_TASK, false);
}

/* The same with typed arguments (5.18+: the tp_btf program's four arguments
 * must exist at load, so older kernels take the raw tracepoints above). */
SEC("tp_btf/sched_switch")
int BPF_PROG(ld_sched_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return ld_on_switch(ctx, preempt, prev, next, prev_state, true);
}

/* TP_PROTO(struct task_struct *p): in try_to_wake_up(), caller's context. */
static __always_inline int ld_on_waking(struct task_struct *p, const bool btf)
{
	struct ld_sched_thread *st;
	__u64 id;
	__u32 tid;

	if (!ld_is_target(LD_TASK_FIELD(btf, p, tgid)))
		return 0;
	tid = LD_TASK_FIELD(btf, p, pid);
	st = bpf_map_lookup_elem(&ld_sched_threads, &tid);
	/* Only a thread that blocked and was not woken yet: a wake-up can also
	 * hit a thread that set its state but has not switched out (it then
	 * does not block at all), or one preempted on its way to sleep. */
	if (!st || !st->off_ns || st->wake_ns || st->kind != LD_OFF_BLOCKED)
		return 0;
	id = bpf_get_current_pid_tgid();
	st->wake_ns = bpf_ktime_get_ns();
	st->waker_tid = (__u32)id;
	st->waker_tgid = id >> 32;
	bpf_get_current_comm(st->waker_comm, sizeof(st->waker_comm));
	return 0;
}

SEC("raw_tracepoint/sched_waking")
int ld_sched_waking(struct bpf_raw_tracepoint_args *ctx)
{
	return ld_on_waking((struct task_struct *)ctx->args[0], false);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(ld_sched_waking_btf, struct task_struct *p)
{
	return ld_on_waking(p, true);
}

/* TP_PROTO(struct task_struct *p): a new thread is made runnable, in the
 * creator's context.  Its wait for a first CPU is recorded as a BLOCKED
 * interval with off = wake = now and the creator as waker. */
SEC("raw_tracepoint/sched_wakeup_new")
int ld_sched_wakeup_new(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx->args[0];
	struct ld_sched_thread *st;
	__u64 id, now;
	__u32 tid;

	if (!ld_is_target(BPF_CORE_READ(p, tgid)))
		return 0;
	tid = BPF_CORE_READ(p, pid);
	now = bpf_ktime_get_ns();
	st = ld_thread_state(tid, BPF_CORE_READ(p, tgid), now);
	if (!st)
		return 0;
	id = bpf_get_current_pid_tgid();
	st->off_ns = now;
	st->wake_ns = now;
	st->kind = LD_OFF_BLOCKED;
	st->prev_state = 0;
	st->kstack_id = -1;
	st->off_cpu = bpf_get_smp_processor_id();
	st->syscall_nr = LD_NO_SYSCALL;
	st->flags = 0;
	st->waker_tid = (__u32)id;
	st->waker_tgid = id >> 32;
	bpf_get_current_comm(st->waker_comm, sizeof(st->waker_comm));
	return 0;
}

/* TP_PROTO(struct task_struct *p, int dest_cpu) */
SEC("raw_tracepoint/sched_migrate_task")
int ld_sched_migrate(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx->args[0];
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct ld_migrate *e;

	if (!ld_trace_migrations || !ld_is_target(tgid))
		return 0;
	e = ld_reserve(LD_PROBE_SCHED, LD_EV_MIGRATE, sizeof(*e));
	if (!e)
		return 0;
	ld_set_subject(&e->hdr, BPF_CORE_READ(p, pid), tgid);
	e->orig_cpu = ld_task_cpu(p);
	e->dest_cpu = (__u32)ctx->args[1];
	ld_commit(LD_PROBE_SCHED, e);
	return 0;
}

/* In the exiting thread's context (after PF_EXITING is set): hand out what
 * the thread still sums and forget it.  ld_task_exit itself comes from the
 * sock probe. */
SEC("raw_tracepoint/sched_process_exit")
int ld_sched_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_sched_thread *st;
	__u64 now;

	if (!ld_is_target(id >> 32))
		return 0;
	st = bpf_map_lookup_elem(&ld_sched_threads, &tid);
	if (!st)
		return 0;
	now = bpf_ktime_get_ns();
	ld_close_unseen(st, tid, id >> 32, now);
	ld_flush_agg(st, tid, id >> 32, now);
	bpf_map_delete_elem(&ld_sched_threads, &tid);
	return 0;
}
