// Cooperative pacing of the agent's work: short stretches on a CPU a traced thread waits for.
#pragma once

#include <cstdint>

namespace ld::util {

// The agent reads the ring buffer and samples /proc and cgroup files on one thread that wakes
// a few times a second. On a busy server every CPU runs a server thread, so each wake-up takes
// a CPU from one of them, and a stretch of agent work delays that thread's token by its
// length: one of ~200 us once a second pushes a token past the TPOT p99 on the bench load,
// while many of ~30 us only move the body of the distribution. So the work is done in steps,
// and between steps pace() gives the CPU back (sched_yield: the waiting thread runs, the agent
// waits for the end of its slice) once the stretch since the last wake-up or yield has reached
// kPaceBudgetNs. With no one waiting the yield returns at once.
//
// Time is wall time (CLOCK_MONOTONIC, a vDSO read): being preempted meanwhile only makes the
// next yield come sooner. The state is per thread.
inline constexpr uint64_t kPaceBudgetNs = 30'000;

// A stretch begins: after a wait that blocked (poll) or a yield.
void pace_begin();
// Yields when the current stretch has lasted kPaceBudgetNs (and begins the next); true if it
// yielded.
bool pace();

}  // namespace ld::util
