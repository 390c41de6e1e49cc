// SPDX-License-Identifier: GPL-2.0
/* cuda: where target threads wait on the GPU, and how much they launch.
 *
 * User space attaches per target process, for each CUDA entry point found in
 * the libcuda/libcudart it maps, the entry program of the call's kind
 * (launch, sync, memcpy, alloc) and ld_cuda_return; the attach cookie is the
 * enum ld_cuda_api of the function.
 *
 * The runtime calls the driver (cudaStreamSynchronize -> cuStreamSynchronize),
 * so a thread's traced calls nest: a depth per thread makes only the outermost
 * call a record, and an inner call's return does not end the outer one.
 *
 * A server launches thousands of kernels a second, so launches are never one
 * record each: they are counted per thread into a burst (count, first and last
 * entry), emitted when the thread next blocks on the GPU (sync, synchronous
 * copy, allocation) or when a launch comes ld_cuda_burst_ns after the burst's
 * first; user space flushes the rest at the end.  Launches are counted at
 * entry only, with no return probe: each uprobe hit costs the launching thread
 * ~3 us on a VM, and an eager PyTorch forward launches hundreds of kernels.
 * Without a return, a runtime launch's own driver launch is told by order and
 * time: the first driver launch on the same thread after a runtime launch's
 * entry, within ld_cuda_nested_ns (a preemption or the first call's lazy
 * binding can come between them), is that one.  Where a runtime reaches the
 * driver by a path not hooked, a direct driver launch (Triton, cuBLAS) that
 * soon after a runtime launch goes uncounted: launch counts are evidence, not
 * time charged.
 * Only uprobes: no kprobes or trampolines on this kernel.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "cuda_maps.h" /* struct ld_cuda_thread */

char LICENSE[] SEC("license") = "GPL";

/* A burst is emitted at the first launch this long after its first. */
const volatile __u64 ld_cuda_burst_ns = 5000000;
/* A driver launch this soon after a runtime launch's entry is the runtime's own:
 * long enough for a preemption between the two entries (a CFS slice on a busy
 * host is a few ms; at 1 ms one launch in ~30,000 was counted twice). */
const volatile __u64 ld_cuda_nested_ns = 10000000;

/* tid -> the thread's call in progress and its burst. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ld_cuda_thread);
} ld_cuda_threads SEC(".maps");

static __always_inline void ld_cuda_emit(__u64 end, __u64 start, __u64 dur, __u64 arg, __s64 ret,
					 __u32 count, __u16 kind, __u16 api)
{
	struct ld_cuda_call *c = ld_reserve(LD_PROBE_CUDA, LD_EV_CUDA, sizeof(*c));

	if (!c)
		return;
	c->hdr.ts_ns = end;
	c->start_ns = start;
	c->dur_ns = dur;
	c->arg = arg;
	c->ret = ret;
	c->count = count;
	c->kind = kind;
	c->api = api;
	ld_commit(LD_PROBE_CUDA, c);
}

static __always_inline void ld_cuda_end_burst(struct ld_cuda_thread *t)
{
	/* launches are counted at entry only: no time, no result */
	ld_cuda_emit(t->burst_last_ns, t->burst_first_ns, 0, 0, 0, t->burst_count, LD_CUDA_LAUNCH, t->burst_api);
	t->burst_count = 0;
}

static __always_inline struct ld_cuda_thread *ld_cuda_thread_of(__u32 tgid, __u32 tid)
{
	struct ld_cuda_thread *t = bpf_map_lookup_elem(&ld_cuda_threads, &tid);
	struct ld_cuda_thread fresh = {.tgid = tgid};

	if (t)
		return t;
	bpf_map_update_elem(&ld_cuda_threads, &tid, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&ld_cuda_threads, &tid);
}

/* The entry of a traced call of `kind`: the outermost starts the thread's call
 * (and ends its burst when the thread now waits on the GPU, or the burst is
 * old); a nested one only deepens it. */
static __always_inline int ld_cuda_enter(struct pt_regs *ctx, __u16 kind, __u64 arg)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ld_cuda_thread *t;
	__u64 now;

	if (!ld_is_target(tgid))
		return 0;
	t = ld_cuda_thread_of(tgid, tid);
	if (!t)
		return 0;
	if (t->depth++)
		return 0;
	now = bpf_ktime_get_ns();
	if (t->burst_count && (kind != LD_CUDA_LAUNCH || now - t->burst_first_ns >= ld_cuda_burst_ns))
		ld_cuda_end_burst(t);
	t->call_start_ns = now;
	t->call_arg = arg;
	t->call_kind = kind;
	t->call_api = bpf_get_attach_cookie(ctx);
	return 0;
}

static __always_inline int ld_cuda_is_runtime(__u64 api)
{
	return api >= LD_CUDART_LAUNCH_KERNEL;
}

/* A launch, counted at its entry (no return probe). */
SEC("uprobe")
int ld_cuda_launch(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 api = bpf_get_attach_cookie(ctx), now;
	struct ld_cuda_thread *t;

	if (!ld_is_target(tgid))
		return 0;
	t = ld_cuda_thread_of(tgid, tid);
	if (!t || t->depth)  /* inside another traced call (a graph launch's own work) */
		return 0;
	now = bpf_ktime_get_ns();
	if (!ld_cuda_is_runtime(api) && t->runtime_launch_ns && now - t->runtime_launch_ns < ld_cuda_nested_ns) {
		t->runtime_launch_ns = 0;  /* the runtime launch's own driver call */
		return 0;
	}
	t->runtime_launch_ns = ld_cuda_is_runtime(api) ? now : 0;
	if (t->burst_count && now - t->burst_first_ns >= ld_cuda_burst_ns)
		ld_cuda_end_burst(t);
	if (!t->burst_count)
		t->burst_first_ns = now;
	t->burst_count++;
	t->burst_last_ns = now;
	t->burst_api = api;
	return 0;
}

/* arg: the stream or event, the first argument; a context/device sync has none. */
SEC("uprobe")
int ld_cuda_sync(struct pt_regs *ctx)
{
	__u64 api = bpf_get_attach_cookie(ctx);
	int whole = api == LD_CU_CTX_SYNCHRONIZE || api == LD_CUDART_DEVICE_SYNCHRONIZE;

	return ld_cuda_enter(ctx, LD_CUDA_SYNC, whole ? 0 : PT_REGS_PARM1(ctx));
}

/* arg: the byte count, the third argument of cudaMemcpy and cuMemcpy{,DtoH,HtoD}. */
SEC("uprobe")
int ld_cuda_memcpy(struct pt_regs *ctx)
{
	return ld_cuda_enter(ctx, LD_CUDA_MEMCPY, PT_REGS_PARM3(ctx));
}

/* arg: the size asked for, the second argument of cudaMalloc/cuMemAlloc; 0 for a free. */
SEC("uprobe")
int ld_cuda_alloc(struct pt_regs *ctx)
{
	__u64 api = bpf_get_attach_cookie(ctx);
	int alloc = api == LD_CU_MEM_ALLOC || api == LD_CUDART_MALLOC;

	return ld_cuda_enter(ctx, LD_CUDA_ALLOC, alloc ? PT_REGS_PARM2(ctx) : 0);
}

/* The return of any traced call: the outermost one's ends the thread's call. */
SEC("uretprobe")
int ld_cuda_return(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct ld_cuda_thread *t = bpf_map_lookup_elem(&ld_cuda_threads, &tid);
	__u64 now, dur;
	__s64 ret;

	/* depth 0: a return whose entry was not seen (attached in between) */
	if (!t || !t->depth || --t->depth)
		return 0;
	now = bpf_ktime_get_ns();
	dur = now - t->call_start_ns;
	ret = (int)PT_REGS_RC(ctx); /* CUresult / cudaError_t: an int */
	ld_cuda_emit(now, t->call_start_ns, dur, t->call_arg, ret, 1, t->call_kind, t->call_api);
	return 0;
}
