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
 * hit a target thread, with the kernel stack when it hit kernel code, and
 * (ld_frames) its user-space stacks: native and Python (below).
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

/* ------------------------------------------------------ user-space frames
 *
 * With ld_frames set (the default), a sample also says what its thread ran in
 * user space (struct ld_cpu_frames instead of ld_cpu_sample):
 *
 * - the native stack: the interrupted user instruction and the return
 *   addresses of a frame-pointer walk (ld_user_stack_id), kept once in
 *   ld_perf_ustacks; user
 *   space names them at the end from the process's mappings and ELF symbol
 *   tables (a binary without frame pointers gives a right first frame and
 *   garbage after it, which user space cuts at the first address in no
 *   mapped code);
 * - in a CPython process (ld_py_procs, filled by user space per process), the
 *   Python frames of the sampled thread's own thread state, walked from
 *   _PyRuntime: each frame's code object and the instruction it executes.  A
 *   code object's names (qualname, file, first line, line table) are read
 *   once, the first time a frame shows it (ld_py_codes); a stack is kept once
 *   (ld_py_stacks, by a hash of its frames) and the sample carries its id.
 *
 * Everything is read with bpf_probe_read_user from the interrupted task's own
 * memory; a read that faults (a page not present) ends the walk there.
 */
const volatile __u32 ld_frames = 0;

/* Native user stacks by id: the frame addresses, innermost first, zero past
 * the walk's end; read by user space as a stack map would be (id -> u64[]). */
struct ld_ustack_ips {
	__u64 ip[LD_USTACK_MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ld_ustack_ips);
} ld_perf_ustacks SEC(".maps");

/* The walk's frames, per CPU (too large for the 512-byte BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_ustack_ips);
} ld_ustack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ld_ustack_owner);
	__type(value, __u32);
} ld_ustack_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LD_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct ld_py_proc);
} ld_py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct ld_py_thread);
} ld_py_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct ld_py_code_key);
	__type(value, struct ld_py_code);
} ld_py_codes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct ld_py_stack);
} ld_py_stacks SEC(".maps");

/* What the walker reads into and builds, per CPU (the BPF stack is 512 bytes). */
#define LD_PY_STR_BUF 64
struct ld_py_scratch {
	__u8 buf[LD_PY_CODE_READ];   /* a frame or a code object, read at once */
	__u8 str[LD_PY_STR_BUF];     /* a str object's header */
	__u64 stack_id;              /* the walk's result (a running hash while it walks) */
	__u32 depth;
	__u32 flags;
	struct ld_py_stack stack;
	struct ld_py_code code;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_py_scratch);
} ld_py_scratch_map SEC(".maps");

_Static_assert(LD_PY_FRAME_READ <= LD_PY_CODE_READ, "a frame is read into the code buffer");
_Static_assert((LD_PY_MAX_DEPTH & (LD_PY_MAX_DEPTH - 1)) == 0, "a power of two: the index mask");

/* Fields at offsets user space gave: bounded for the verifier, 0 when out of the buffer. */
static __always_inline __u64 ld_get_u64(const __u8 *buf, __u32 off, __u32 len)
{
	if (off > len - 8)
		return 0;
	return *(const __u64 *)(buf + off);
}

static __always_inline __u32 ld_get_u32(const __u8 *buf, __u32 off, __u32 len)
{
	if (off > len - 4)
		return 0;
	return *(const __u32 *)(buf + off);
}

static __always_inline __u8 ld_get_u8(const __u8 *buf, __u32 off, __u32 len)
{
	if (off > len - 1)
		return 0;
	return buf[off];
}

static __always_inline __u64 ld_user_u64(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* A str object's text into dst (cap bytes with the NUL).  tail: keep the end
 * of a longer ASCII text (a file path), and say so.  Returns LD_PY_CODE_* flags. */
static __always_inline __u32 ld_py_str(const struct ld_py_proc *py, struct ld_py_scratch *s, __u64 obj,
				       char *dst, __u32 cap, int tail)
{
	__u64 len, data, skip = 0;
	__u32 state;

	dst[0] = 0;
	if (!obj || bpf_probe_read_user(s->str, LD_PY_STR_BUF, (const void *)obj))
		return LD_PY_CODE_NAME_UNREAD;
	len = ld_get_u64(s->str, py->off.str_length, LD_PY_STR_BUF);
	state = ld_get_u32(s->str, py->off.str_state, LD_PY_STR_BUF);
	if (state & (1u << 6)) {  /* compact ASCII: the bytes follow the header */
		data = obj + py->off.str_ascii_data;
	} else {  /* its UTF-8 form, where the interpreter made one */
		data = ld_get_u64(s->str, py->off.str_utf8, LD_PY_STR_BUF);
		len = ld_get_u64(s->str, py->off.str_utf8 - 8, LD_PY_STR_BUF);
		if (!data)
			return LD_PY_CODE_NAME_UNREAD;
	}
	if (tail && len > cap - 1)
		skip = len - (cap - 1);
	bpf_probe_read_user_str(dst, cap, (const void *)(data + skip));
	return skip ? LD_PY_CODE_FILE_CUT : 0;
}

/* Reads a code object's names into ld_py_codes, once per (process, code). */
__attribute__((noinline)) int ld_py_register(__u32 tgid, __u64 code)
{
	struct ld_py_code_key key = {.tgid = tgid, .code = code};
	struct ld_py_scratch *s;
	struct ld_py_proc *py;
	struct ld_py_code *c;
	__u64 table, n;
	__u32 zero = 0;

	py = bpf_map_lookup_elem(&ld_py_procs, &tgid);
	s = bpf_map_lookup_elem(&ld_py_scratch_map, &zero);
	if (!py || !s)
		return 0;
	c = &s->code;
	c->firstlineno = -1;
	c->linetable_len = 0;
	c->flags = 0;
	c->name[0] = 0;
	c->file[0] = 0;
	if (bpf_probe_read_user(s->buf, LD_PY_CODE_READ, (const void *)code))
		return 0;  /* not kept: tried again when seen again */
	if (py->code_type && ld_get_u64(s->buf, py->off.object_type, LD_PY_CODE_READ) != py->code_type) {
		c->flags = LD_PY_CODE_NOT_CODE;
		bpf_map_update_elem(&ld_py_codes, &key, c, BPF_NOEXIST);
		return 0;
	}
	c->firstlineno = (__s32)ld_get_u32(s->buf, py->off.code_firstlineno, LD_PY_CODE_READ);
	table = ld_get_u64(s->buf, py->off.code_linetable, LD_PY_CODE_READ);
	/* The buffer is reused by the strings below: every field is taken first. */
	__u64 name = ld_get_u64(s->buf, py->off.code_name, LD_PY_CODE_READ);
	__u64 file = ld_get_u64(s->buf, py->off.code_filename, LD_PY_CODE_READ);

	c->flags |= ld_py_str(py, s, name, c->name, LD_PY_NAME_LEN, 0);
	c->flags |= ld_py_str(py, s, file, c->file, LD_PY_FILE_LEN, 1);
	n = ld_user_u64(table ? table + py->off.bytes_size : 0);
	if (n > LD_PY_LINETABLE_LEN)
		n = LD_PY_LINETABLE_LEN;
	if (n && !bpf_probe_read_user(c->linetable, n, (const void *)(table + py->off.bytes_data)))
		c->linetable_len = n;
	bpf_map_update_elem(&ld_py_codes, &key, c, BPF_NOEXIST);
	return 0;
}

/* The thread state of thread `want` (its tid, or its fs base for 3.10). */
static __always_inline __u64 ld_py_find_tstate(const struct ld_py_proc *py, __u64 want)
{
	__u64 interp = ld_user_u64(py->runtime + py->off.runtime_interp_head);
	__u64 t = ld_user_u64(interp ? interp + py->off.interp_threads_head : 0);

	for (int i = 0; i < LD_PY_MAX_THREADS && t; i++) {
		if (ld_user_u64(t + py->off.tstate_id) == want)
			return t;
		t = ld_user_u64(t + py->off.tstate_next);
	}
	return 0;
}

/* The wait before a thread without a thread state is looked for again. */
static __always_inline __u64 ld_py_retry_ns(__u32 misses)
{
	return misses >= 7 ? 1000000000ULL : 10000000ULL << misses;
}

#define LD_FNV_PRIME 0x100000001b3ULL

/* One step of the walk: the frame at `frame` into the stack being built
 * (s->stack, s->depth, s->stack_id as the running hash, s->flags).  Returns
 * the next (calling) frame, 0 to stop.  A global function: verified once, not
 * once per iteration and path of the loop that calls it. */
__attribute__((noinline)) __u64 ld_py_step(__u32 tgid, const struct ld_py_proc *py, struct ld_py_scratch *s,
					   __u64 frame)
{
	struct ld_py_code_key key = {.tgid = tgid};
	__u64 code, prev, ptr;
	__s32 instr = -1;
	__u32 depth;

	if (!py || !s || !frame)
		return 0;
	if (bpf_probe_read_user(s->buf, LD_PY_FRAME_READ, (const void *)frame)) {
		s->flags |= LD_FRAMES_PY_BAD_READ;
		return 0;
	}
	code = ld_get_u64(s->buf, py->off.frame_code, LD_PY_FRAME_READ);
	prev = ld_get_u64(s->buf, py->off.frame_previous, LD_PY_FRAME_READ);
	/* 3.12+: the frame an entry from C pushes (FRAME_OWNED_BY_CSTACK) runs no Python. */
	if (py->off.frame_owner != LD_PY_NONE && ld_get_u8(s->buf, py->off.frame_owner, LD_PY_FRAME_READ) == 3)
		return prev;
	if (py->off.code_adaptive == LD_PY_NONE) {
		instr = (__s32)ld_get_u32(s->buf, py->off.frame_instr, LD_PY_FRAME_READ);  /* f_lasti */
	} else {
		ptr = ld_get_u64(s->buf, py->off.frame_instr, LD_PY_FRAME_READ);
		if (ptr >= code + py->off.code_adaptive)
			instr = (__s32)((ptr - code - py->off.code_adaptive) / 2);
	}
	depth = s->depth;
	if (depth >= LD_PY_MAX_DEPTH) {
		s->flags |= LD_FRAMES_PY_TRUNCATED;
		return 0;
	}
	s->stack.frames[depth & (LD_PY_MAX_DEPTH - 1)].code = code;
	s->stack.frames[depth & (LD_PY_MAX_DEPTH - 1)].instr = instr;
	s->stack.frames[depth & (LD_PY_MAX_DEPTH - 1)]._pad = 0;
	s->depth = depth + 1;
	s->stack_id = (s->stack_id ^ code) * LD_FNV_PRIME;
	s->stack_id = (s->stack_id ^ (__u32)instr) * LD_FNV_PRIME;
	key.code = code;
	if (code && !bpf_map_lookup_elem(&ld_py_codes, &key))
		ld_py_register(tgid, code);
	return prev;
}

/* The Python frames of the current thread (of process tgid): the stack is put
 * in ld_py_stacks, its id and depth in the scratch.  Returns LD_FRAMES_*. */
__attribute__((noinline)) int ld_py_walk(__u32 tgid, __u32 tid)
{
	struct ld_py_thread *th, fresh;
	struct ld_py_scratch *s;
	struct ld_py_proc *py;
	__u64 want, tstate = 0, frame, hash, now;
	__u32 zero = 0, depth;

	py = bpf_map_lookup_elem(&ld_py_procs, &tgid);
	s = bpf_map_lookup_elem(&ld_py_scratch_map, &zero);
	if (!s)
		return 0;
	s->stack_id = 0;
	s->depth = 0;
	s->flags = 0;
	if (!py)
		return 0;
	want = tid;
	if (py->id_is_fsbase) {
#if defined(__TARGET_ARCH_x86)
		struct task_struct *task = bpf_get_current_task_btf();

		want = BPF_CORE_READ(task, thread.fsbase);
#else
		return 0;
#endif
	}
	/* Where the thread's state was last found.  A thread that had none is
	 * looked for again after 10 ms, then twice as long each miss up to once a
	 * second: a native thread never has one, but a new Python thread is seen
	 * before it binds its state (a one-second wait lost its first second). */
	now = bpf_ktime_get_ns();
	th = bpf_map_lookup_elem(&ld_py_threads, &tid);
	if (th && th->tstate && ld_user_u64(th->tstate + py->off.tstate_id) == want) {
		tstate = th->tstate;
	} else if (!th || th->tstate || now - th->checked_ns > ld_py_retry_ns(th->misses)) {
		tstate = ld_py_find_tstate(py, want);
		fresh.tstate = tstate;
		fresh.checked_ns = now;
		fresh.misses = tstate ? 0 : (th && !th->tstate ? th->misses + 1 : 1);
		fresh._pad = 0;
		bpf_map_update_elem(&ld_py_threads, &tid, &fresh, BPF_ANY);
	}
	if (!tstate)
		return LD_FRAMES_PY_NO_THREAD;
	frame = ld_user_u64(tstate + py->off.tstate_frame);
	if (py->off.cframe_frame != LD_PY_NONE)
		frame = ld_user_u64(frame ? frame + py->off.cframe_frame : 0);

	s->stack_id = 0xcbf29ce484222325ULL ^ tgid;
	/* A few more steps than frames kept: shim frames are skipped. */
	for (int i = 0; i < LD_PY_MAX_DEPTH + 8 && frame; i++)
		frame = ld_py_step(tgid, py, s, frame);
	depth = s->depth;
	hash = (s->stack_id ^ depth) * LD_FNV_PRIME;
	s->stack_id = 0;
	if (!depth)
		return s->flags;
	if (!hash)
		hash = 1;
	if (!bpf_map_lookup_elem(&ld_py_stacks, &hash)) {
		s->stack.tgid = tgid;
		s->stack.depth = depth;
		s->stack.flags = s->flags & LD_FRAMES_PY_TRUNCATED;
		s->stack._pad = 0;
		if (bpf_map_update_elem(&ld_py_stacks, &hash, &s->stack, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&ld_py_stacks, &hash)) {
			s->depth = 0;
			return s->flags | LD_FRAMES_PY_LOST;  /* the table is full */
		}
	}
	s->stack_id = hash;
	return s->flags;
}

/* errno values (vmlinux.h has none), returned negated as bpf_get_stackid() does. */
#define LD_ENOENT 2
#define LD_E2BIG 7
#define LD_EEXIST 17

/* A thread's user stack span: no frame of it lies further than this above its
 * stack pointer (glibc's default thread stack, and the main thread's usual
 * rlimit). */
#define LD_USTACK_SPAN (8ULL << 20)

/* The current thread's native user stack, walked by its frame pointers from
 * the user registers it entered the kernel with; its id in ld_perf_ustacks,
 * or < 0 (-errno) for none.
 *
 * Not bpf_get_stackid(BPF_F_USER_STACK): the kernel's walk follows rbp
 * wherever it points, and in code built without frame pointers (most
 * distributions' binaries, llama.cpp's default build) rbp holds data, so the
 * walk reads arbitrary addresses until one faults.  A fault taken with page
 * faults disabled costs microseconds (more on a VM: 6-12 us a sample measured
 * here, most of what a sample cost on such a server).  This walk reads only
 * inside the thread's stack, above its stack pointer, in increasing order,
 * so it stops at the first frame that is not one, usually without a read. */
static __always_inline long ld_user_stack_id(void)
{
	struct pt_regs *regs = ld_current_user_regs();
	struct ld_ustack_ips *w, *seen;
	struct {
		__u64 next;
		__u64 ret;
	} frame;
	__u64 fp, sp, hash = 0xcbf29ce484222325ULL; /* FNV-1a */
	__u32 zero = 0, id;
	int i;

	w = bpf_map_lookup_elem(&ld_ustack_scratch, &zero);
	if (!w || !regs)
		return -LD_ENOENT;
	__builtin_memset(w, 0, sizeof(*w));
	w->ip[0] = PT_REGS_IP(regs);
	hash = (hash ^ w->ip[0]) * 0x100000001b3ULL;
	fp = PT_REGS_FP(regs);
	sp = PT_REGS_SP(regs);
	for (i = 1; i < LD_USTACK_MAX_DEPTH; i++) {
		if (fp < sp || fp - sp > LD_USTACK_SPAN || (fp & 7))
			break;
		if (bpf_probe_read_user(&frame, sizeof(frame), (void *)fp) || !frame.ret)
			break;
		w->ip[i] = frame.ret;
		hash = (hash ^ frame.ret) * 0x100000001b3ULL;
		if (frame.next <= fp)
			break; /* callers' frames lie above: anything else is not a frame */
		fp = frame.next;
	}
	id = (__u32)(hash ^ (hash >> 32)) & 0x7fffffff;
	seen = bpf_map_lookup_elem(&ld_perf_ustacks, &id);
	if (!seen) {
		if (!bpf_map_update_elem(&ld_perf_ustacks, &id, w, BPF_NOEXIST))
			return id;
		seen = bpf_map_lookup_elem(&ld_perf_ustacks, &id);
		if (!seen)
			return -LD_E2BIG; /* the table is full */
	}
	/* Two stacks of one hash: the first keeps the id, this sample goes without. */
	for (i = 0; i < LD_USTACK_MAX_DEPTH; i++)
		if (seen->ip[i] != w->ip[i])
			return -LD_EEXIST;
	return id;
}

/* One sample of the current task; ctx is the program's own (for the stack). */
static __always_inline void ld_sample(void *ctx, __u32 user)
{
	if (ld_frames) {
		__u64 id = bpf_get_current_pid_tgid();
		struct ld_ustack_owner owner = {.tgid = id >> 32};
		struct ld_py_scratch *s;
		struct ld_cpu_frames *f;
		__u32 zero = 0, one = 1, flags;
		__s64 kstack = user ? -1 : bpf_get_stackid(ctx, &ld_perf_stacks, 0);
		long ustack = ld_user_stack_id();

		if (ustack >= 0) {
			owner.stack_id = ustack;
			if (!bpf_map_lookup_elem(&ld_ustack_owners, &owner))
				bpf_map_update_elem(&ld_ustack_owners, &owner, &one, BPF_NOEXIST);
		}
		flags = ld_py_walk(id >> 32, (__u32)id);
		s = bpf_map_lookup_elem(&ld_py_scratch_map, &zero);
		f = ld_reserve(LD_PROBE_PERF, LD_EV_CPU_FRAMES, sizeof(*f));
		if (!f)
			return;
		f->kstack_id = kstack;
		f->user_mode = user;
		f->ustack_id = (__s32)ustack;
		f->pystack_id = s ? s->stack_id : 0;
		f->py_depth = s ? s->depth : 0;
		f->flags = flags;
		ld_commit(LD_PROBE_PERF, f);
		return;
	}
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
