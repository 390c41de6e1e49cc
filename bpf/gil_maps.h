/* The gil probe's map layouts that user space reads or writes too
 * (gil_probe.cpp: arms learning, reports learned words, flushes the short
 * waits summed per thread).  Included by bpf/gil.bpf.c and by the loader: one
 * definition, no mirror.  Plain fixed-width types only (events.h). */
#pragma once

#include "events.h"

/* ld_gil_addrs key: a futex word of a process (value: ld_u32 enum ld_gil_method
 * that found it). */
struct ld_gil_key {
	ld_u32 tgid;
	ld_u32 _pad;
	ld_u64 uaddr;
};

/* ld_gil_learning, keyed by tgid (ld_u32): set by user space while the
 * learning uprobes are attached. */
struct ld_gil_learn {
	ld_u32 method; /* enum ld_gil_method of the attached uprobes */
	ld_u32 learned;
};

/* ld_gil_aggs, keyed by tid (ld_u32): short waits summed since first_ns. */
struct ld_gil_agg {
	ld_u64 first_ns;
	ld_u64 last_end_ns;
	ld_u64 sum_ns;
	ld_u64 max_ns;
	ld_u64 uaddr;
	ld_u32 tgid;
	ld_u32 count;
	ld_u32 method;
	ld_u32 _pad;
};
