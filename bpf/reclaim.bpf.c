// SPDX-License-Identifier: GPL-2.0
/* reclaim: stalls of target threads in memory reclaim and compaction -- an
 * allocation that had to free memory first (direct reclaim, the cgroup's own
 * limit, NUMA node reclaim), compact a zone, or sleep in reclaim_throttle().
 *
 * Every tracepoint here runs in the stalled thread's context (kswapd and
 * kcompactd are not targets, so the tgid filter keeps only the stalls that
 * the application itself paid for).  Begin/end pairs are matched per
 * (thread, kind): memcg reclaim can run inside a direct reclaim's caller.
 * Programs whose tracepoint this kernel lacks (no CONFIG_COMPACTION,
 * CONFIG_MEMCG, CONFIG_NUMA) are disabled by user space before load.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct ld_rc_key {
	__u32 tid;
	__u32 kind; /* enum ld_reclaim_kind */
};

struct ld_rc_begin {
	__u64 start_ns;
	__u32 order;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ld_rc_key);
	__type(value, struct ld_rc_begin);
} ld_rc_inflight SEC(".maps");

static __always_inline int ld_rc_begin(__u32 kind, int order)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ld_rc_key key = { .tid = (__u32)id, .kind = kind };
	struct ld_rc_begin b = { .start_ns = bpf_ktime_get_ns(), .order = order };

	if (!ld_is_target(id >> 32))
		return 0;
	bpf_map_update_elem(&ld_rc_inflight, &key, &b, BPF_ANY);
	return 0;
}

static __always_inline void ld_rc_emit(__u32 kind, __u64 start_ns, __u64 nr, __u32 order)
{
	struct ld_reclaim *e = ld_reserve(LD_PROBE_RECLAIM, LD_EV_RECLAIM, sizeof(*e));

	if (!e)
		return;
	e->start_ns = start_ns;
	e->nr_reclaimed = nr;
	e->kind = kind;
	e->order = order;
	ld_commit(LD_PROBE_RECLAIM, e);
}

static __always_inline int ld_rc_end(__u32 kind, __u64 nr)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ld_rc_key key = { .tid = (__u32)id, .kind = kind };
	struct ld_rc_begin *b;

	if (!ld_is_target(id >> 32))
		return 0;
	b = bpf_map_lookup_elem(&ld_rc_inflight, &key);
	if (!b)
		return 0;
	ld_rc_emit(kind, b->start_ns, nr, b->order);
	bpf_map_delete_elem(&ld_rc_inflight, &key);
	return 0;
}

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_begin")
int ld_direct_begin(struct trace_event_raw_mm_vmscan_direct_reclaim_begin_template *ctx)
{
	return ld_rc_begin(LD_RECLAIM_DIRECT, ctx->order);
}

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_end")
int ld_direct_end(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx)
{
	return ld_rc_end(LD_RECLAIM_DIRECT, ctx->nr_reclaimed);
}

/* try_to_free_mem_cgroup_pages(): the charge of a page pushed the cgroup over
 * its limit (v1 limit_in_bytes, v2 memory.max/high). */
SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_begin")
int ld_memcg_begin(struct trace_event_raw_mm_vmscan_direct_reclaim_begin_template *ctx)
{
	return ld_rc_begin(LD_RECLAIM_MEMCG, ctx->order);
}

SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_end")
int ld_memcg_end(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx)
{
	return ld_rc_end(LD_RECLAIM_MEMCG, ctx->nr_reclaimed);
}

SEC("tracepoint/vmscan/mm_vmscan_node_reclaim_begin")
int ld_node_begin(struct trace_event_raw_mm_vmscan_node_reclaim_begin *ctx)
{
	return ld_rc_begin(LD_RECLAIM_NODE, ctx->order);
}

SEC("tracepoint/vmscan/mm_vmscan_node_reclaim_end")
int ld_node_end(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *ctx)
{
	return ld_rc_end(LD_RECLAIM_NODE, ctx->nr_reclaimed);
}

/* compact_zone(): one zone; in a target's context it is direct compaction
 * (kcompactd runs the same code in its own thread). */
SEC("tracepoint/compaction/mm_compaction_begin")
int ld_compact_begin(void *ctx)
{
	return ld_rc_begin(LD_RECLAIM_COMPACT, 0);
}

SEC("tracepoint/compaction/mm_compaction_end")
int ld_compact_end(struct trace_event_raw_mm_compaction_end *ctx)
{
	return ld_rc_end(LD_RECLAIM_COMPACT, ctx->status);
}

/* reclaim_throttle() (5.16+): reported after the sleep, with its length. */
SEC("tracepoint/vmscan/mm_vmscan_throttled")
int ld_throttled(struct trace_event_raw_mm_vmscan_throttled *ctx)
{
	__u64 now, delayed;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	delayed = (__u64)(__u32)ctx->usec_delayed * 1000;
	ld_rc_emit(LD_RECLAIM_THROTTLED, now - delayed, ctx->reason, 0);
	return 0;
}
