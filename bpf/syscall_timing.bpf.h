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

/* Task-local storage, not a hash keyed by tid: the slot hangs off the task
 * itself, so an entry and an exit cost a cached pointer walk instead of a
 * hashed bucket, its lock and the free list (on a server whose token work
 * evicts the caches between two calls, each of those is a miss: on
 * llama-server a futex call's enter and exit programs took 1.26-1.36 us with
 * the hash, 0.72-0.82 us with this).  A slot is freed with
 * its task; start_ns 0 marks it empty.  bpf_task_storage_get in tracing
 * programs: 5.11+ (commit a10787e6d58c), below the agent's 5.15 floor. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ld_sc_inflight);
} ld_sc_inflight SEC(".maps");

/* Remembers the entry of the current thread.  The caller has already checked
 * that the thread is a target. */
static __always_inline void ld_sc_enter(__u32 kind, __u64 arg0, __u64 arg1)
{
	struct ld_sc_inflight *in = bpf_task_storage_get(&ld_sc_inflight, bpf_get_current_task_btf(), 0,
							 BPF_LOCAL_STORAGE_GET_F_CREATE);

	/* NULL: no memory, or the storage busy on this CPU (a nested program):
	 * the call goes untimed. */
	if (!in)
		return;
	in->start_ns = bpf_ktime_get_ns();
	in->arg0 = arg0;
	in->arg1 = arg1;
	in->kind = kind;
}

/* Moves the current thread's entry to *out; 0 when there was none (the
 * syscall began before we attached, or was not one we time). */
static __always_inline int ld_sc_take(struct ld_sc_inflight *out)
{
	struct ld_sc_inflight *in = bpf_task_storage_get(&ld_sc_inflight, bpf_get_current_task_btf(), 0, 0);

	if (!in || !in->start_ns)
		return 0;
	*out = *in;
	in->start_ns = 0;
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
