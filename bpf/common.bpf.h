/* Shared by every latency-doctor BPF object: the target filter, the ring
 * buffer, per-probe counters, and the record-submit helper.  Include after
 * vmlinux.h and the libbpf headers. */
#pragma once

#include "events.h"

/* Per-process tables (e.g. the GIL probe's learning state) hold this many. */
#define LD_MAX_TARGETS 1024

/* tgids we trace, one bit each (LD_TARGET_WORD/BIT, events.h).  User space
 * sets bits through the mmapped map before attaching; with follow_children
 * the fork hook sets new child processes' bits.  A bitmap rather than a hash:
 * every sched_switch of the machine asks twice, and an array lookup is
 * inlined by the verifier to one load of one cache line, where a hash lookup
 * is a call that hashes and touches the map, a bucket and an element (each a
 * cache miss after 2 ms of a token's compute: ~100 ns apiece on the
 * reference VM). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LD_TARGET_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
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

static __always_inline int ld_is_target(__u32 tgid)
{
	__u32 word = LD_TARGET_WORD(tgid);
	__u64 *bits = bpf_map_lookup_elem(&ld_targets, &word);

	return bits && (*bits & LD_TARGET_BIT(tgid)) != 0;
}

/* Adds a tgid (the fork hook); atomic, as user space may set a bit of the
 * same word at the same time. */
static __always_inline void ld_add_target(__u32 tgid)
{
	__u32 word = LD_TARGET_WORD(tgid);
	__u64 *bits = bpf_map_lookup_elem(&ld_targets, &word);

	if (bits)
		__sync_fetch_and_or(bits, LD_TARGET_BIT(tgid));
}

/* The current task's user registers, saved at the top of its kernel stack by
 * its latest entry into the kernel (bpf_task_pt_regs, 5.15+): a BTF pointer,
 * read with plain loads.  Include the BPF helpers before this header. */
static __always_inline struct pt_regs *ld_current_user_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
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

/* When to wake user space.  A wake-up per record costs more than the record,
 * and every wake-up of the agent takes a CPU from the traced server for the
 * time a batch takes to read (on a 2 ms token, ~20 wake-ups a second moved
 * the p99 gap by ~4%).  So a record wakes user space only when it takes the
 * unread data across a multiple of ring / LD_RING_WAKE_PARTS (events.h), or
 * while the ring is half full (the agent must hurry); user space also polls on
 * a timer (1 s) for the trickle that never crosses a mark.  A crossing
 * missed because another CPU reserved in between is caught by the next mark. */
static __always_inline __u64 ld_submit_flags(__u32 size)
{
	__u64 ring = bpf_ringbuf_query(&ld_events, BPF_RB_RING_SIZE);
	__u64 avail = bpf_ringbuf_query(&ld_events, BPF_RB_AVAIL_DATA);
	__u64 before = avail > size ? avail - size : 0;

	if (avail >= ring / 2)
		return BPF_RB_FORCE_WAKEUP;
	/* The ring is a power of two (>= 4 KiB), so is the mark: the two sides
	 * of a mark differ in a bit at or above it (no division). */
	return (avail ^ before) >= ring / LD_RING_WAKE_PARTS ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
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
	bpf_ringbuf_submit(rec, ld_submit_flags(((struct ld_hdr *)rec)->size));
}
