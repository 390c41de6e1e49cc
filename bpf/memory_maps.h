/* The memory probe's map layouts that user space reads too (memory_probe.cpp
 * flushes what threads still alive hold at the end of a recording).  Included
 * by bpf/memory.bpf.c and by the loader: one definition, no mirror.  Plain
 * fixed-width types only (events.h). */
#pragma once

#include "events.h"

/* ld_mem_agg, keyed by tid (ld_u32): small memory calls of one thread since
 * start_ns.  Read by user space at the end of a recording, hence tgid in the
 * value. */
struct ld_mem_agg {
	ld_u64 start_ns;
	ld_u64 last_ns;
	ld_u64 calls;
	ld_u64 bytes;
	ld_u64 dur_ns;
	ld_u64 failed;
	ld_u32 tgid;
	ld_u32 _pad;
};

/* ld_fault_acc, keyed by tid (ld_u32): the open batch of user page faults. */
struct ld_fault_acc {
	ld_u64 first_ns;
	ld_u64 last_ns;
	ld_u32 count; /* 0 = empty */
	ld_u32 tgid;
};
