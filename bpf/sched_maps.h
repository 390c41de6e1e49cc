/* The sched probe's map layouts that user space reads too (sched_probe.cpp
 * flushes the short-slice sums of threads still alive from ld_sched_threads).
 * Included by bpf/sched.bpf.c and by the loader: one definition, no mirror.
 * Plain fixed-width types only (events.h). */
#pragma once

#include "events.h"

#define LD_STACK_SLOTS 4 /* power of two */

/* ld_stackless_syscalls (sched.bpf.c): one bit per syscall number below 64 * this. */
#define LD_STACKLESS_SYSCALL_WORDS 8 /* power of two */

/* The last stack walked for blocks in one syscall (see LD_OFFCPU_KSTACK_REUSED). */
struct ld_stack_slot {
	ld_u32 syscall_nr;
	ld_s32 stack_id;
	ld_u64 walked_ns;
};

/* ld_sched_threads: per target thread, keyed by tid (ld_u32). */
struct ld_sched_thread {
	ld_u64 off_ns;           /* switched out; 0 = on CPU (or not seen yet) */
	ld_u64 wake_ns;          /* woken after off_ns; 0 = not yet */
	ld_s64 kstack_id;
	ld_u32 prev_state;
	ld_u32 kind;             /* enum ld_offcpu_kind */
	ld_u32 off_cpu;
	ld_u32 syscall_nr;
	ld_u32 waker_tid;
	ld_u32 waker_tgid;
	ld_u32 flags;            /* LD_OFFCPU_* */
	ld_u32 _pad0;
	char waker_comm[LD_COMM_LEN];
	/* direct-mapped by syscall_nr: a collision only costs a walk */
	struct ld_stack_slot stacks[LD_STACK_SLOTS];
	/* short slices since period_start_ns */
	ld_u64 period_start_ns;
	ld_u64 blocked_ns;
	ld_u64 runnable_ns;
	ld_u32 blocked_count;
	ld_u32 runnable_count;
	ld_u32 tgid;             /* for the flush from user space */
	ld_u32 _pad;
	struct ld_agg_waker agg_wakers[LD_AGG_WAKERS]; /* who ended the short blocked slices */
};
