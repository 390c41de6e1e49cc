// SPDX-License-Identifier: GPL-2.0
/* perf: what the target threads do while on CPU, by sampling.
 *
 * Two sources of the same record, chosen by user space (perf_probe.cpp):
 *
 * - ld_perf_tick, at the scheduler tick (x86-64): a raw tracepoint on
 *   hrtimer_expire_entry that keeps only the tick's own hrtimer (its function
 *   is tick_nohz_handler, or tick_sched_timer before 6.9, address from
 *   kallsyms) and samples the interrupted task at ld_sample_period_ns on
 *   average per CPU; user or kernel mode is told from the return address
 *   below the task's saved user registers (or, failing that, the kernel stack).
 *   The tick interrupts a busy CPU HZ times a second anyway, so a sample
 *   costs only this program.  A cpu-clock event is an hrtimer interrupt of
 *   its own: ~13 us each on the reference VM (timer interrupt and re-arm are
 *   VM exits), half of what the agent added to a token at one request at a
 *   time.  Idle CPUs do not tick (NOHZ), so they are not woken to find
 *   nothing.
 * - ld_perf_sample, on a cpu-clock software event per CPU: where the tick
 *   cannot be used, or a rate above HZ is asked for.
 *
 * Either way `current` is the interrupted task: one record per sample that
 * hit a target thread, with the kernel stack when it hit kernel code.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "perf_maps.h" /* struct ld_tick_cpu */

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

/* One sample of the current task; ctx is the program's own (for the stack). */
static __always_inline void ld_sample(void *ctx, __u32 user)
{
	struct ld_cpu_sample *e = ld_reserve(LD_PROBE_PERF, LD_EV_CPU_SAMPLE, sizeof(*e));

	if (!e)
		return;
	e->user_mode = user;
	e->kstack_id = user ? -1 : bpf_get_stackid(ctx, &ld_perf_stacks, 0);
	e->_pad = 0;
	ld_commit(LD_PROBE_PERF, e);
}

SEC("perf_event")
int ld_perf_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	/* tgid 0 = the idle task: never a target, and the common case. */
	if (!(id >> 32) || !ld_is_target(id >> 32))
		return 0;
	ld_sample(ctx, ld_user_mode(ctx));
	return 0;
}

/* ------------------------------------------------------ scheduler tick */

/* Set by user space before load (tick source only). */
const volatile __u64 ld_tick_fn = 0;              /* the tick hrtimer's function */
const volatile __u64 ld_sample_period_ns = 10101010; /* 99 Hz */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_tick_cpu);
} ld_tick_state SEC(".maps");

/* The local APIC timer's interrupt entry, [lo, hi) (user space, from kallsyms). */
const volatile __u64 ld_irq_entry_lo = 0;
const volatile __u64 ld_irq_entry_hi = 0;

/* Frames from this program down to the interrupt entry: bpf_prog, bpf_trace_run2,
 * __bpf_trace_hrtimer_expire_entry, __hrtimer_run_queues, hrtimer_interrupt,
 * __sysvec_apic_timer_interrupt, sysvec_apic_timer_interrupt, asm_sysvec_apic_timer_interrupt:
 * 8 here; room for a few more on other builds. */
#define LD_TICK_PATH_MAX 16

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[LD_TICK_PATH_MAX]);
} ld_tick_frames SEC(".maps");

/* Set by user space through the mmapped .bss/.data: 1 during the calibration at
 * attach; ld_mode_by_regs 0 if the registers check disagreed with the walk
 * there (or the kernel lacks bpf_task_pt_regs, 5.15). */
volatile __u32 ld_calibrating = 0;
volatile __u32 ld_mode_by_regs = 1;

/* Was the task in user mode when the tick hit?  The kernel stack from here
 * then ends at the interrupt entry: unwinding stops at the user-mode frame
 * it saved.  Interrupted in the kernel, the walk goes on into the code the
 * tick interrupted.  (The interrupt's own saved registers are out of reach:
 * the per-CPU irq_regs pointer needs CONFIG_KALLSYMS_ALL; and the task's user
 * registers have orig_ax -1 for exceptions such as page faults as much as for
 * user mode.)  The fallback of ld_tick_user_mode_by_regs below. */
static __always_inline __u32 ld_tick_user_mode_by_walk(void *ctx)
{
	__u32 zero = 0;
	__u64 *frames = bpf_map_lookup_elem(&ld_tick_frames, &zero);
	long bytes, n;

	if (!frames)
		return 0;
	bytes = bpf_get_stack(ctx, frames, LD_TICK_PATH_MAX * sizeof(__u64), 0);
	if (bytes <= 0)
		return 0;
	n = bytes / sizeof(__u64);
	if (n >= LD_TICK_PATH_MAX)
		return 0; /* deeper than the tick's own path: kernel code below it */
	n = (n - 1) & (LD_TICK_PATH_MAX - 1);
	return frames[n] >= ld_irq_entry_lo && frames[n] < ld_irq_entry_hi;
}

/* The same answer from one 8-byte read (the walk costs ~5 us a sample on the
 * reference VM: most of what a sample cost the server).  The task's user-mode
 * registers sit at the top of its kernel stack (bpf_task_pt_regs), and the
 * word below them is the return address of the first call made by the task's
 * latest entry into the kernel: when that entry was this timer interrupt,
 * coming from user mode, the address lies in the interrupt's entry stub.  A
 * syscall, a page fault or any other entry from user mode writes its own
 * return address there, and an interrupt of kernel code saves its registers
 * deeper in the stack, leaving the word alone.  -1: not available here. */
static __always_inline int ld_tick_user_mode_by_regs(void)
{
	__u64 top, below = 0;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return -1;
	top = (__u64)ld_current_user_regs();
	if (!top || bpf_probe_read_kernel(&below, sizeof(below), (void *)(top - sizeof(below))))
		return -1;
	return below >= ld_irq_entry_lo && below < ld_irq_entry_hi;
}

/* During the calibration at attach, every tick of a task runs both checks. */
static __always_inline void ld_tick_calibrate(void *ctx, struct ld_tick_cpu *cpu)
{
	__u32 walk = ld_tick_user_mode_by_walk(ctx);
	int regs = ld_tick_user_mode_by_regs();

	cpu->calib_ticks++;
	cpu->calib_agree += regs == (int)walk;
	cpu->calib_user += walk;
}

/* TP_PROTO(struct hrtimer *hrtimer, ktime_t *now): every hrtimer expiry of
 * the machine, in hard-interrupt context on the timer's CPU. */
SEC("raw_tracepoint/hrtimer_expire_entry")
int ld_perf_tick(struct bpf_raw_tracepoint_args *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx->args[0];
	struct ld_tick_cpu *cpu;
	__u32 zero = 0;
	__u64 id, now;
	int user;

	if (!ld_tick_fn || (__u64)BPF_CORE_READ(timer, function) != ld_tick_fn)
		return 0;
	cpu = bpf_map_lookup_elem(&ld_tick_state, &zero);
	if (!cpu)
		return 0;
	now = bpf_ktime_get_ns();
	if (!cpu->ticks++)
		cpu->first_ns = now;
	cpu->last_ns = now;
	if (ld_calibrating && bpf_get_current_pid_tgid() >> 32)
		ld_tick_calibrate(ctx, cpu);
	if (now < cpu->due_ns)
		return 0;
	/* A CPU sampler: the period runs whoever is on the CPU.  After an idle
	 * stretch (no ticks) start afresh rather than catch up. */
	cpu->due_ns = now - cpu->due_ns > ld_sample_period_ns ? now + ld_sample_period_ns
							      : cpu->due_ns + ld_sample_period_ns;
	id = bpf_get_current_pid_tgid();
	if (!(id >> 32) || !ld_is_target(id >> 32))
		return 0;
	user = ld_mode_by_regs ? ld_tick_user_mode_by_regs() : -1;
	ld_sample(ctx, user >= 0 ? (__u32)user : ld_tick_user_mode_by_walk(ctx));
	return 0;
}
