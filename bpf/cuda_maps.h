/* The cuda probe's map layout that user space reads too (cuda_probe.cpp flushes the
 * launch bursts still summed per thread at the end).  Included by bpf/cuda.bpf.c and by
 * the loader: one definition, no mirror.  Plain fixed-width types only (events.h). */
#pragma once

#include "events.h"

/* ld_cuda_threads, keyed by tid (ld_u32): the traced call in progress and the launches
 * summed since the burst's first. */
struct ld_cuda_thread {
	ld_u64 call_start_ns;  /* entry of the outermost traced call in progress */
	ld_u64 call_arg;       /* its ld_cuda_call.arg */
	ld_u64 burst_first_ns; /* entry of the burst's first launch */
	ld_u64 burst_last_ns;  /* entry of its last (launches are counted at entry, not timed) */
	ld_u64 runtime_launch_ns; /* entry of a runtime launch whose driver launch has not come */
	ld_u32 tgid;
	ld_u32 depth;          /* traced calls in progress: > 1 inside a nested one */
	ld_u32 burst_count;    /* launches summed (0: no burst) */
	ld_u16 call_kind;      /* enum ld_cuda_kind of the call in progress */
	ld_u16 call_api;       /* enum ld_cuda_api */
	ld_u16 burst_api;      /* the last launch's */
	ld_u16 _pad[3];
};
