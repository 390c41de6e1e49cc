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

/* Event records to user space: one ring buffer per CPU, made by user space (it
 * splits --ringbuf-size between the online CPUs) and put in this array at the
 * CPU's index.  One ring shared by all CPUs costs every record the ring's lock,
 * its producer position and the previous record's header, all last written by
 * another CPU: on the reference VM the ring was half of a token send's exit
 * program (~0.6-1.4 us of ~1.1-2.9 us), and a machine with more CPUs contends
 * for that lock more.  A ring per CPU keeps those lines on their CPU; user space
 * merges the rings' records by time. */
struct ld_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* a template: user space makes the rings */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* user space: the highest online CPU + 1 */
	__type(key, __u32);
	__array(values, struct ld_ring);
} ld_rings SEC(".maps");

/* This CPU's ring; NULL for a CPU that had none (one onlined after attach):
 * its records are dropped and counted.  A tracepoint program and its tail
 * calls do not migrate, so reserve and commit find the same ring. */
static __always_inline void *ld_ring(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&ld_rings, &cpu);
}

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
 * unread data across a multiple of 1/16 of the ring, or while the ring is
 * half full (the agent must hurry); user space also polls on a timer (1 s)
 * for the trickle that never crosses a mark.  A crossing missed because
 * another CPU reserved in between is caught by the next mark. */
static __always_inline __u64 ld_submit_flags(void *rb, __u32 size)
{
	__u64 ring = bpf_ringbuf_query(rb, BPF_RB_RING_SIZE);
	__u64 avail = bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA);
	__u64 before = avail > size ? avail - size : 0;

	if (avail >= ring / 2)
		return BPF_RB_FORCE_WAKEUP;
	/* The ring is a power of two (>= 4 KiB), so is the mark, ring / 16: the
	 * two sides of a mark differ in a bit at or above it (no division). */
	return (avail ^ before) >= ring / 16 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Reserves a record of `size` bytes with its header filled; NULL (and the
 * drop counted) when the ring buffer is full. */
static __always_inline void *ld_reserve(__u32 probe, __u16 type, __u32 size)
{
	void *rb = ld_ring();
	struct ld_hdr *h = rb ? bpf_ringbuf_reserve(rb, size, 0) : NULL;
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
	void *rb = ld_ring();

	ld_count(probe, 0);
	bpf_ringbuf_submit(rec, rb ? ld_submit_flags(rb, ((struct ld_hdr *)rec)->size) : 0);
}
