/* Shared by every latency-doctor BPF object: the target filter, the ring
 * buffer, per-probe counters, and the record-submit helper.  Include after
 * vmlinux.h and the libbpf headers. */
#pragma once

#include "events.h"

#define LD_MAX_TARGETS 1024

/* tgids we trace.  User space fills it before attaching; with
 * follow_children the fork hook adds new child processes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} ld_targets SEC(".maps");

/* Event records to user space.  Size is set by user space (--ringbuf-size)
 * with bpf_map__set_max_entries() before load. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} ld_events SEC(".maps");

/* submitted = written + dropped, per probe, per CPU (no atomics needed). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LD_PROBE_MAX);
	__type(key, __u32);
	__type(value, struct ld_probe_counters);
} ld_counters SEC(".maps");

/* Wake user space only every `wakeup_every` records (and on a timer from user
 * space): a wake-up per record costs more than the record itself. */
const volatile __u32 ld_wakeup_every = 64;

struct ld_wakeup_state {
	__u64 pending;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_wakeup_state);
} ld_wakeup SEC(".maps");

static __always_inline int ld_is_target(__u32 tgid)
{
	return bpf_map_lookup_elem(&ld_targets, &tgid) != NULL;
}

static __always_inline void ld_count(__u32 probe, int dropped)
{
	struct ld_probe_counters *c = bpf_map_lookup_elem(&ld_counters, &probe);

	if (!c)
		return;
	c->submitted++;
	if (dropped)
		c->dropped++;
}

static __always_inline __u64 ld_submit_flags(void)
{
	__u32 zero = 0;
	struct ld_wakeup_state *w = bpf_map_lookup_elem(&ld_wakeup, &zero);

	if (!w || ld_wakeup_every <= 1)
		return 0;
	if (++w->pending >= ld_wakeup_every) {
		w->pending = 0;
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* Reserves a record of `size` bytes with its header filled; NULL (and the
 * drop counted) when the ring buffer is full. */
static __always_inline void *ld_reserve(__u32 probe, __u16 type, __u32 size)
{
	struct ld_hdr *h = bpf_ringbuf_reserve(&ld_events, size, 0);
	__u64 id = bpf_get_current_pid_tgid();

	if (!h) {
		ld_count(probe, 1);
		return NULL;
	}
	h->type = type;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->tgid = id >> 32;
	h->tid = (__u32)id;
	h->ts_ns = bpf_ktime_get_ns();
	return h;
}

static __always_inline void ld_commit(__u32 probe, void *rec)
{
	ld_count(probe, 0);
	bpf_ringbuf_submit(rec, ld_submit_flags());
}
