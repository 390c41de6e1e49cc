"""GIL contention with a known shape, for the gil probe test.

Waits for SIGUSR1 (the recorder is attached), then runs two threads for ~2 s:
  - busy:    holds the GIL in a pure-Python loop;
  - sleeper: time.sleep(0.001) in a loop. Each wake-up must take the GIL back from
             `busy`, which gives it up only when the sleeper has waited a switch
             interval (set to 20 ms here) and asked for it: GIL waits of ~20 ms on
             the sleeper's thread.
Prints "ready PID" once SIGUSR1 is blocked, then "sleeper TID", "busy TID" (native thread ids),
"wakeups N" and the run's bounds "start_ns"/"stop_ns" (CLOCK_MONOTONIC, the clock of BPF's timestamps).
Usage: gil_hold.py [seconds]
"""
import os
import signal
import sys
import threading
import time

SWITCH_INTERVAL = 0.02


def say(key, value):
    # One write per line: print() from two threads can interleave "busy 1sleeper 2".
    os.write(1, f"{key} {value}\n".encode())


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    say("ready", os.getpid())  # SIGUSR1 is blocked: safe to send now
    signal.sigwait([signal.SIGUSR1])
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    sys.setswitchinterval(SWITCH_INTERVAL)
    start_ns = time.monotonic_ns()
    stop = time.monotonic() + seconds
    wakeups = [0]

    def busy():
        say("busy", threading.get_native_id())
        x = 0
        while time.monotonic() < stop:
            for _ in range(1000):
                x += 1

    def sleeper():
        say("sleeper", threading.get_native_id())
        while time.monotonic() < stop:
            time.sleep(0.001)
            wakeups[0] += 1

    threads = [threading.Thread(target=busy), threading.Thread(target=sleeper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say("wakeups", wakeups[0])
    say("start_ns", start_ns)
    say("stop_ns", time.monotonic_ns())


if __name__ == "__main__":
    main()
