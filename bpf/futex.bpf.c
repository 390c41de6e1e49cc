// SPDX-License-Identifier: GPL-2.0
/* futex: how long target threads wait on futexes, and on which address, so
 * lock contention (a pthread mutex, a condition variable, a queue) can be
 * named.  Only waits of at least ld_futex_min_ns are emitted: uncontended
 * waits are short and frequent, long ones are what delays a token.  Wakes are
 * not traced (the waker is found by the sched probe's sched_wakeup).
 *
 * futex(2) plus, where the kernel has them, the futex2 calls futex_wait(2)
 * (6.7) and futex_waitv(2) (5.16): user space disables their programs on
 * kernels without the tracepoints.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "syscall_timing.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load. */
const volatile __u64 ld_futex_min_ns = 100000;

/* include/uapi/linux/futex.h */
#define LD_FUTEX_WAIT 0
#define LD_FUTEX_LOCK_PI 6
#define LD_FUTEX_WAIT_BITSET 9
#define LD_FUTEX_WAIT_REQUEUE_PI 11
#define LD_FUTEX_LOCK_PI2 13
#define LD_FUTEX_PRIVATE_FLAG 128
#define LD_FUTEX_CLOCK_REALTIME 256

/* futex(uaddr, op, val, timeout, uaddr2, val3) */
SEC("tracepoint/syscalls/sys_enter_futex")
int ld_enter_futex(struct trace_event_raw_sys_enter *ctx)
{
	__u32 op = ctx->args[1];
	__u32 kind;

	/* The op first: about half the calls are wakes, and this test reads no
	 * memory, where the target check reads a map. */
	switch (op & ~(LD_FUTEX_PRIVATE_FLAG | LD_FUTEX_CLOCK_REALTIME)) {
	case LD_FUTEX_WAIT:
	case LD_FUTEX_WAIT_BITSET:
	case LD_FUTEX_WAIT_REQUEUE_PI:
		kind = LD_SYS_FUTEX_WAIT;
		break;
	case LD_FUTEX_LOCK_PI:
	case LD_FUTEX_LOCK_PI2:
		kind = LD_SYS_FUTEX_LOCK_PI;
		break;
	default:
		return 0; /* wakes, requeues: not waits */
	}
	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	ld_sc_enter(kind, ctx->args[0], op);
	return 0;
}

/* futex_wait(uaddr, val, mask, flags, timeout, clockid) */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int ld_enter_futex_wait(struct trace_event_raw_sys_enter *ctx)
{
	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	ld_sc_enter(LD_SYS_FUTEX_WAIT, ctx->args[0], LD_FUTEX2_WAIT | (__u32)ctx->args[3]);
	return 0;
}

/* futex_waitv(waiters, nr_futexes, flags, timeout, clockid): the address
 * shown is the first waiter's (struct futex_waitv: val, uaddr, flags). */
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int ld_enter_futex_waitv(struct trace_event_raw_sys_enter *ctx)
{
	__u64 uaddr = 0;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	bpf_probe_read_user(&uaddr, sizeof(uaddr), (void *)(ctx->args[0] + 8));
	ld_sc_enter(LD_SYS_FUTEX_WAIT, uaddr, LD_FUTEX2_WAITV | (__u32)ctx->args[1]);
	return 0;
}

static __always_inline int ld_futex_exit(long ret)
{
	struct ld_sc_inflight in;

	/* Only a target's waits have a slot (the entry checked): no target test. */
	if (!ld_sc_take(&in))
		return 0;
	if (bpf_ktime_get_ns() - in.start_ns < ld_futex_min_ns)
		return 0;
	ld_sc_emit(LD_PROBE_FUTEX, &in, ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int ld_exit_futex(struct trace_event_raw_sys_exit *ctx)
{
	return ld_futex_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int ld_exit_futex_wait(struct trace_event_raw_sys_exit *ctx)
{
	return ld_futex_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int ld_exit_futex_waitv(struct trace_event_raw_sys_exit *ctx)
{
	return ld_futex_exit(ctx->ret);
}
