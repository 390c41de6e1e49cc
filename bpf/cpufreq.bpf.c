// SPDX-License-Identifier: GPL-2.0
/* cpufreq: frequency changes of every CPU (power:cpu_frequency).
 *
 * The frequency is a property of the CPU, not of a task: a target thread runs slower on
 * whichever CPU it lands, and the change is requested from whatever context the governor
 * runs in (often a kworker or the idle task).  So there is deliberately no tgid filter
 * here.  Instead the rate is bounded: at most one record per CPU per ld_cpufreq_min_gap_ns
 * (schedutil with fast switching can change the frequency every few ms); user space also
 * samples sysfs every 100 ms, which catches any value folded away here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load. */
const volatile __u64 ld_cpufreq_min_gap_ns = 10 * 1000 * 1000;

struct ld_cpufreq_last {
	__u64 ts;
	__u32 khz;
	__u32 _pad;
};

/* Indexed by the CPU whose frequency changed (not the CPU we run on). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ld_cpufreq_last);
} ld_cpufreq_last SEC(".maps");

SEC("tracepoint/power/cpu_frequency")
int ld_cpu_frequency(struct trace_event_raw_cpu *ctx)
{
	__u32 cpu = ctx->cpu_id, khz = ctx->state; /* `state` is the new frequency in kHz */
	struct ld_cpufreq_last *last = bpf_map_lookup_elem(&ld_cpufreq_last, &cpu);
	__u64 now = bpf_ktime_get_ns();
	struct ld_cpu_freq *e;

	if (!last || last->khz == khz || (last->ts && now - last->ts < ld_cpufreq_min_gap_ns))
		return 0;
	last->ts = now;
	last->khz = khz;
	e = ld_reserve(LD_PROBE_CPUFREQ, LD_EV_CPU_FREQ, sizeof(*e));
	if (!e)
		return 0;
	e->cpu_id = cpu;
	e->khz = khz;
	e->max_khz = 0; /* user space knows cpuinfo_max_freq */
	e->sampled = 0;
	ld_commit(LD_PROBE_CPUFREQ, e);
	return 0;
}
