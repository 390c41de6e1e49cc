/* The perf probe's map layouts that user space reads too (perf_probe.cpp
 * watches the tick source at attach through ld_tick_state).  Included by
 * bpf/perf.bpf.c and by the loader: one definition, no mirror.  Plain
 * fixed-width types only (events.h). */
#pragma once

#include "events.h"

/* ld_tick_state, a per-CPU array of one: when the next sample is due, and the
 * ticks seen (user space measures the tick period from them at attach, to
 * check the tick runs through this hook at all and is at least as fast as the
 * asked rate). */
struct ld_tick_cpu {
	ld_u64 due_ns;
	ld_u64 first_ns;
	ld_u64 last_ns;
	ld_u64 ticks;
	/* While ld_calibrating: ticks of a task, those in which the two ways
	 * of telling user mode agreed, and those in user mode by the walk. */
	ld_u64 calib_ticks;
	ld_u64 calib_agree;
	ld_u64 calib_user;
};
