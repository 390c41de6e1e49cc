#!/usr/bin/env python3
"""A control for bench/compare.sh: CPU taken in short stretches, with no agent at all.

Usage: burn.py US [PERIOD_MS]: spins US microseconds every PERIOD_MS (default 10) until
SIGTERM, then prints the CPU seconds it used and the wall seconds it ran. If its cost to the
TPOT p99 matches the agent's at the same CPU, the agent's p99 cost is its CPU on a host with
no CPU to spare, not anything its probes do to the scheduler.
"""
import signal
import sys
import time

spin_s = float(sys.argv[1]) / 1e6
period_s = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.010
running = True


def stop(*_):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)
cpu_begin = time.process_time()  # the interpreter's start-up is not what is measured
begin = time.monotonic()
while running:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < spin_s:
        pass
    time.sleep(max(0.0, period_s - (time.perf_counter() - t0)))
cpu = time.process_time() - cpu_begin
print(f"{cpu:.4f} {time.monotonic() - begin:.4f}", flush=True)
