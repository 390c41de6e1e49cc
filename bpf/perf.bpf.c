// SPDX-License-Identifier: GPL-2.0
/* perf: what the target threads do while on CPU, by sampling.
 *
 * User space opens one cpu-clock software event per online CPU (499 Hz, not
 * 500: off the beat of periodic timers) and attaches this program to each.
 * The program runs from the sampling hrtimer interrupt, so `current` and the
 * regs are those of the interrupted task: one record per sample that hit a
 * target thread, with the kernel stack when the sample hit kernel code.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Kernel stacks of samples in kernel mode; symbolised by user space at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LD_KSTACK_MAX_DEPTH * sizeof(__u64));
} ld_perf_stacks SEC(".maps");

/* User mode from the interrupted IP: on x86-64 and arm64 kernel text lives in
 * the upper half of the address space and user code in the lower half.  The
 * perf ctx allows only 8-byte reads of regs, and x86's `cs` is a u16 in a
 * union whose shape changed with FRED (6.9), so ip is the portable test. */
static __always_inline __u32 ld_user_mode(struct bpf_perf_event_data *ctx)
{
	return (__s64)PT_REGS_IP(&ctx->regs) >= 0;
}

SEC("perf_event")
int ld_perf_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ld_cpu_sample *e;
	__u32 user;

	/* tgid 0 = the idle task: never a target, and the common case. */
	if (!(id >> 32) || !ld_is_target(id >> 32))
		return 0;
	user = ld_user_mode(ctx);
	e = ld_reserve(LD_PROBE_PERF, LD_EV_CPU_SAMPLE, sizeof(*e));
	if (!e)
		return 0;
	e->user_mode = user;
	e->kstack_id = user ? -1 : bpf_get_stackid(ctx, &ld_perf_stacks, 0);
	e->_pad = 0;
	ld_commit(LD_PROBE_PERF, e);
	return 0;
}
