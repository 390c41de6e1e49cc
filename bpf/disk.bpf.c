// SPDX-License-Identifier: GPL-2.0
/* disk: the waits of target threads on storage.
 *
 * 1. fsync, fdatasync, sync_file_range, msync, sync, syncfs: always emitted
 *    (rare, and exactly what stalls a token when a log or checkpoint is
 *    flushed on the serving thread), with the file: up to LD_PATH_DEPTH names
 *    of the fd's dentry chain, read at sys_enter.  Names only -- never file
 *    contents.
 * 2. Block requests, issue to completion, of the targets: issued in a target
 *    thread, or queued (block_bio_queue) by one at that sector just before
 *    (then kblockd or a plug flush issues it).  Others are only counted.
 * 3. Dirty-page throttling: balance_dirty_pages() putting a target thread to
 *    sleep because it dirties pages faster than they are written back.
 * 4. Writes to regular files (write, pwrite64, writev, pwritev, pwritev2) that
 *    took ld_file_write_min_ns or more: the page-cache copy of a logger's
 *    record is on-CPU, and is disk IO to the SRE all the same.  Socket and
 *    pipe writes (every token sent) are let through after one inode read.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "syscall_timing.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* A file write shorter than this is not emitted: a log line takes microseconds,
 * and a stall a token feels is a millisecond or more.  Set before load. */
const volatile __u64 ld_file_write_min_ns = 100000;

/* ------------------------------------------------------------- file path */

struct ld_disk_path {
	__u32 len;                   /* bytes of buf used */
	__u32 n;                     /* names collected, leaf first */
	__u32 lens[LD_PATH_DEPTH];
	__u32 _pad;
	char names[LD_PATH_DEPTH][LD_PATH_NAME_MAX];
	char buf[LD_PATH_MAX + 64];  /* + slack: the verifier sees offset & 255 + name */
};

/* Built in a per-CPU scratch (too big for the stack), kept per thread until exit. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_disk_path);
} ld_disk_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct ld_disk_path);
} ld_disk_path SEC(".maps");

/* Block requests issued by others (not attributable to a target): index 0. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ld_disk_other_rq SEC(".maps");

static __always_inline struct file *ld_file_of_fd(__u32 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

/* Collects the names from the file up towards the root, leaf first, crossing
 * mount points like d_path() (struct mount is private to fs/ but in BTF).
 * Returns 1 when the root was reached. */
static __always_inline int ld_collect_names(struct ld_disk_path *p, struct file *f)
{
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	struct vfsmount *vm = BPF_CORE_READ(f, f_path.mnt);
	struct mount *mnt = (void *)vm - bpf_core_field_offset(struct mount, mnt);
	__u32 n = 0;

	/* DEPTH names plus a few mount crossings. */
	for (int i = 0; i < LD_PATH_DEPTH + 3; i++) {
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		const unsigned char *name;
		long len;

		if (d == BPF_CORE_READ(mnt, mnt.mnt_root)) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

			if (up == mnt)
				goto root; /* the namespace's root */
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			continue;
		}
		if (d == parent)
			goto root; /* a filesystem's root outside any mount we can walk */
		if (n >= LD_PATH_DEPTH)
			break;
		name = BPF_CORE_READ(d, d_name.name);
		len = bpf_probe_read_kernel_str(p->names[n], LD_PATH_NAME_MAX, name);
		p->lens[n] = len > 1 ? len - 1 : 0; /* without the NUL */
		n++;
		d = parent;
	}
	p->n = n;
	return 0;
root:
	p->n = n;
	return 1;
}

/* Joins the names root first: "/a/b/name", or ".../b/c/d/e/name" when cut. */
static __always_inline void ld_join_names(struct ld_disk_path *p, int complete)
{
	__u32 off = 0;

	if (!complete) {
		p->buf[0] = '.';
		p->buf[1] = '.';
		p->buf[2] = '.';
		off = 3;
	}
	for (int i = LD_PATH_DEPTH - 1; i >= 0; i--) {
		__u32 len;

		if (i >= p->n)
			continue;
		len = p->lens[i];
		if (len > LD_PATH_NAME_MAX - 1)
			len = LD_PATH_NAME_MAX - 1;
		p->buf[off & (LD_PATH_MAX - 1)] = '/';
		off++;
		bpf_probe_read_kernel(&p->buf[off & (LD_PATH_MAX - 1)], len, p->names[i]);
		off += len;
	}
	/* 3 + DEPTH * NAME_MAX < LD_PATH_MAX: never cut here. */
	p->len = off > LD_PATH_MAX ? LD_PATH_MAX : off;
}

/* Builds the path of `fd` for the current thread and keeps it until exit. */
static __always_inline void ld_remember_path(__u32 fd)
{
	__u32 zero = 0, tid = (__u32)bpf_get_current_pid_tgid();
	struct ld_disk_path *p = bpf_map_lookup_elem(&ld_disk_scratch, &zero);
	struct file *f;

	if (!p)
		return;
	/* The record copies whole 8-byte padded classes of buf: no stale bytes. */
	__builtin_memset(p->buf, 0, sizeof(p->buf));
	p->len = 0;
	p->n = 0;
	f = ld_file_of_fd(fd);
	if (f)
		ld_join_names(p, ld_collect_names(p, f));
	bpf_map_update_elem(&ld_disk_path, &tid, p, BPF_ANY);
}

/* ------------------------------------------------------------- syscalls */

static __always_inline int ld_sync_enter(__u32 kind, __u64 arg0, __u64 arg1, int has_fd)
{
	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	ld_sc_enter(kind, arg0, arg1);
	if (has_fd)
		ld_remember_path(arg0);
	return 0;
}

/* One record with a path tail of a constant size class (ringbuf reservations
 * must be constant): SIZE bytes of buf, zero padded. */
#define LD_EMIT_WITH_PATH(SIZE)                                                        \
	do {                                                                           \
		struct ld_syscall *e =                                                 \
			ld_reserve(LD_PROBE_DISK, LD_EV_SYSCALL, sizeof(*e) + (SIZE)); \
		if (!e)                                                                \
			break;                                                         \
		ld_sc_fill(e, in, ret);                                                \
		e->path_len = p->len;                                                  \
		bpf_probe_read_kernel((char *)(e + 1), (SIZE), p->buf);                \
		ld_commit(LD_PROBE_DISK, e);                                           \
	} while (0)

static __always_inline void ld_sync_emit(const struct ld_sc_inflight *in, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ld_disk_path *p = bpf_map_lookup_elem(&ld_disk_path, &tid);

	if (!p || p->len == 0)
		ld_sc_emit(LD_PROBE_DISK, in, ret);
	else if (p->len <= 64)
		LD_EMIT_WITH_PATH(64);
	else if (p->len <= 128)
		LD_EMIT_WITH_PATH(128);
	else
		LD_EMIT_WITH_PATH(LD_PATH_MAX);
	if (p)
		bpf_map_delete_elem(&ld_disk_path, &tid);
}

static __always_inline int ld_sync_exit(long ret)
{
	struct ld_sc_inflight in;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (!ld_sc_take(&in))
		return 0;
	ld_sync_emit(&in, ret);
	return 0;
}

#define LD_ARG(i) (ctx->args[i])

#define LD_SYNC(name, kind, a0, a1, has_fd)                                  \
	SEC("tracepoint/syscalls/sys_enter_" #name)                          \
	int ld_enter_##name(struct trace_event_raw_sys_enter *ctx)           \
	{                                                                    \
		return ld_sync_enter(kind, a0, a1, has_fd);                  \
	}                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                           \
	int ld_exit_##name(struct trace_event_raw_sys_exit *ctx)             \
	{                                                                    \
		return ld_sync_exit(ctx->ret);                               \
	}

LD_SYNC(fsync, LD_SYS_FSYNC, LD_ARG(0), 0, 1)
LD_SYNC(fdatasync, LD_SYS_FDATASYNC, LD_ARG(0), 0, 1)
LD_SYNC(syncfs, LD_SYS_SYNCFS, LD_ARG(0), 0, 1)
/* sync_file_range(fd, offset, nbytes, flags) */
LD_SYNC(sync_file_range, LD_SYS_SYNC_FILE_RANGE, LD_ARG(0), LD_ARG(2), 1)
/* msync(addr, len, flags): no fd, so no path */
LD_SYNC(msync, LD_SYS_MSYNC, LD_ARG(0), LD_ARG(1), 0)
LD_SYNC(sync, LD_SYS_SYNC, 0, 0, 0)

/* ---------------------------------------------------------- file writes */

#define LD_S_IFMT 00170000
#define LD_S_IFREG 0100000

static __always_inline int ld_is_regular_file(__u32 fd)
{
	struct file *f = ld_file_of_fd(fd);
	umode_t mode;

	if (!f)
		return 0;
	mode = BPF_CORE_READ(f, f_inode, i_mode);
	return (mode & LD_S_IFMT) == LD_S_IFREG;
}

static __always_inline int ld_write_enter(__u32 kind, __u64 fd)
{
	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (ld_is_regular_file(fd))
		ld_sc_enter(kind, fd, 0);
	return 0;
}

/* The path is read at exit, and only for the long writes: the fd is still the
 * same file (a close in another thread meanwhile would make it "", never
 * another file's contents: names only). */
static __always_inline int ld_write_exit(long ret)
{
	struct ld_sc_inflight in;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (!ld_sc_take(&in))
		return 0;
	if (bpf_ktime_get_ns() - in.start_ns < ld_file_write_min_ns)
		return 0;
	in.arg1 = ret > 0 ? ret : 0;
	ld_remember_path(in.arg0);
	ld_sync_emit(&in, ret);
	return 0;
}

#define LD_WRITE(name, kind)                                                 \
	SEC("tracepoint/syscalls/sys_enter_" #name)                          \
	int ld_enter_##name(struct trace_event_raw_sys_enter *ctx)           \
	{                                                                    \
		return ld_write_enter(kind, LD_ARG(0));                      \
	}                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                           \
	int ld_exit_##name(struct trace_event_raw_sys_exit *ctx)             \
	{                                                                    \
		return ld_write_exit(ctx->ret);                              \
	}

LD_WRITE(write, LD_SYS_WRITE)
LD_WRITE(pwrite64, LD_SYS_PWRITE64)
LD_WRITE(writev, LD_SYS_WRITEV)
LD_WRITE(pwritev, LD_SYS_PWRITEV)
LD_WRITE(pwritev2, LD_SYS_PWRITEV2)

/* ---------------------------------------------------------- block requests */

struct ld_rq_key {
	__u64 sector;
	__u32 dev;
	__u32 _pad;
};

struct ld_rq_owner {
	__u64 issue_ns;
	__u32 tgid;
	__u32 tid;
	__u32 bytes;
	__u32 rwbs;
};

/* Requests of targets between issue and completion. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ld_rq_key);
	__type(value, struct ld_rq_owner);
} ld_rq_inflight SEC(".maps");

/* Bios queued by targets, by sector only: on a partition the bio carries the
 * partition's dev_t and the request the whole disk's. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* sector */
	__type(value, __u64); /* tgid << 32 | tid */
} ld_bio_owner SEC(".maps");

static __always_inline __u32 ld_rwbs_flags(const char *ctx_rwbs)
{
	char rwbs[8] = {};
	__u32 flags = 0;

	/* Copied out: the verifier refuses loads through a moved ctx pointer. */
	bpf_probe_read_kernel(rwbs, sizeof(rwbs) - 1, ctx_rwbs);

	/* e.g. "FWS", "WFS", "RM", "D": blk_fill_rwbs() */
	for (int i = 0; i < sizeof(rwbs); i++) {
		char c = rwbs[i];

		if (c == 0)
			break;
		if (c == 'W')
			flags |= LD_RWBS_WRITE;
		else if (c == 'S')
			flags |= LD_RWBS_SYNC;
		else if (c == 'F')
			flags |= LD_RWBS_FLUSH;
		else if (c == 'D')
			flags |= LD_RWBS_DISCARD;
		else if (c == 'M')
			flags |= LD_RWBS_META;
	}
	return flags;
}

SEC("tracepoint/block/block_bio_queue")
int ld_bio_queue(struct trace_event_raw_block_bio *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sector;

	if (!ld_is_target(id >> 32))
		return 0;
	sector = ctx->sector;
	bpf_map_update_elem(&ld_bio_owner, &sector, &id, BPF_ANY);
	return 0;
}

/* The tracepoint's record layout changed over time (ioprio added in 6.x,
 * bytes in 4.x): CO-RE relocates these field reads. */
SEC("tracepoint/block/block_rq_issue")
int ld_rq_issue(struct trace_event_raw_block_rq *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ld_rq_key key = { .sector = ctx->sector, .dev = ctx->dev };
	struct ld_rq_owner o = {};
	__u64 *owner;
	__u32 zero = 0;

	if (ld_is_target(id >> 32)) {
		o.tgid = id >> 32;
		o.tid = (__u32)id;
	} else {
		owner = bpf_map_lookup_elem(&ld_bio_owner, &key.sector);
		if (!owner) {
			__u64 *other = bpf_map_lookup_elem(&ld_disk_other_rq, &zero);

			if (other)
				(*other)++;
			return 0;
		}
		o.tgid = *owner >> 32;
		o.tid = (__u32)*owner;
		bpf_map_delete_elem(&ld_bio_owner, &key.sector);
	}
	o.issue_ns = bpf_ktime_get_ns();
	o.bytes = ctx->bytes;
	o.rwbs = ld_rwbs_flags(ctx->rwbs);
	bpf_map_update_elem(&ld_rq_inflight, &key, &o, BPF_ANY);
	return 0;
}

/* Runs in irq or another task's context: the owner comes from the map. */
SEC("tracepoint/block/block_rq_complete")
int ld_rq_complete(struct trace_event_raw_block_rq_completion *ctx)
{
	struct ld_rq_key key = { .sector = ctx->sector, .dev = ctx->dev };
	struct ld_rq_owner *o = bpf_map_lookup_elem(&ld_rq_inflight, &key);
	struct ld_block_rq *e;

	if (!o)
		return 0;
	e = ld_reserve(LD_PROBE_DISK, LD_EV_BLOCK_RQ, sizeof(*e));
	if (e) {
		e->hdr.tgid = o->tgid;
		e->hdr.tid = o->tid;
		e->issue_ns = o->issue_ns;
		e->sector = key.sector;
		e->dev = key.dev;
		e->bytes = o->bytes;
		e->rwbs = o->rwbs;
		e->error = ctx->error;
		ld_commit(LD_PROBE_DISK, e);
	}
	bpf_map_delete_elem(&ld_rq_inflight, &key);
	return 0;
}

/* ------------------------------------------------------ dirty throttling */

/* Fired just before the sleep; `pause` is in ms (converted from jiffies by
 * the tracepoint), <= 0 when the thread is let through without sleeping. */
SEC("tracepoint/writeback/balance_dirty_pages")
int ld_dirty_throttle(struct trace_event_raw_balance_dirty_pages *ctx)
{
	struct ld_syscall *e;
	long pause;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	pause = ctx->pause;
	if (pause <= 0)
		return 0;
	e = ld_reserve(LD_PROBE_DISK, LD_EV_SYSCALL, sizeof(*e));
	if (!e)
		return 0;
	e->start_ns = e->hdr.ts_ns;
	e->dur_ns = (__u64)pause * 1000000;
	e->ret = 0;
	e->arg0 = ctx->dirtied;
	e->arg1 = ctx->task_ratelimit;
	e->kind = LD_SYS_DIRTY_THROTTLE;
	e->path_len = 0;
	e->_pad = 0;
	ld_commit(LD_PROBE_DISK, e);
	return 0;
}
