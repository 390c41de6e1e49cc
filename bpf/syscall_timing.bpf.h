/* Enter/exit pairing for the timed-syscall probes (memory, disk, futex): the
 * entry time and arguments are kept per thread until the matching sys_exit.
 * Each object that includes this gets its own map, so probes do not see each
 * other's entries.  Include after common.bpf.h. */
#pragma once

struct ld_sc_inflight {
	__u64 start_ns;
	__u64 arg0;
	__u64 arg1;
	__u32 kind; /* enum ld_syscall_kind */
	__u32 _pad;
};

/* A plain (preallocated) hash: an LRU hash costs ~2x per update here, on the
 * futex hot path.  A slot outlives its thread only if the thread dies between
 * sys_enter and sys_exit (sys_exit runs even for a thread killed in a wait),
 * and is reused when the tid is. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct ld_sc_inflight);
} ld_sc_inflight SEC(".maps");

/* Remembers the entry of the current thread.  The caller has already checked
 * that the thread is a target. */
static __always_inline void ld_sc_enter(__u32 kind, __u64 arg0, __u64 arg1)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ld_sc_inflight in = {
		.start_ns = bpf_ktime_get_ns(),
		.arg0 = arg0,
		.arg1 = arg1,
		.kind = kind,
	};

	bpf_map_update_elem(&ld_sc_inflight, &tid, &in, BPF_ANY);
}

/* Moves the current thread's entry to *out; 0 when there was none (the
 * syscall began before we attached, or was not one we time). */
static __always_inline int ld_sc_take(struct ld_sc_inflight *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ld_sc_inflight *in = bpf_map_lookup_elem(&ld_sc_inflight, &tid);

	if (!in)
		return 0;
	*out = *in;
	bpf_map_delete_elem(&ld_sc_inflight, &tid);
	return 1;
}

/* Fills the fixed part of a reserved ld_syscall (hdr.ts_ns, set by
 * ld_reserve, is the exit). */
static __always_inline void ld_sc_fill(struct ld_syscall *e, const struct ld_sc_inflight *in,
				       long ret)
{
	e->start_ns = in->start_ns;
	e->dur_ns = e->hdr.ts_ns - in->start_ns;
	e->ret = ret;
	e->arg0 = in->arg0;
	e->arg1 = in->arg1;
	e->kind = in->kind;
	e->path_len = 0;
	e->_pad = 0;
}

/* Emits one complete record with no tail. */
static __always_inline void ld_sc_emit(__u32 probe, const struct ld_sc_inflight *in, long ret)
{
	struct ld_syscall *e = ld_reserve(probe, LD_EV_SYSCALL, sizeof(*e));

	if (!e)
		return;
	ld_sc_fill(e, in, ret);
	ld_commit(probe, e);
}
