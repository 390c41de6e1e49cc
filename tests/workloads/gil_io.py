"""IO-heavy Python loop for measuring the gil probe's cost.

Waits for SIGUSR1, then:
  1. contends the GIL for `warm` seconds (a busy thread + a sleeping one), so that a
     GIL probe can learn the GIL's futex words and detach its uprobes;
  2. idles `settle` seconds;
  3. runs 2 threads doing os.write(/dev/null, 1 byte) for `seconds`: every write
     releases and re-takes the GIL (take_gil / PyEval_RestoreThread per call).
Prints "ready PID", then "ops N", "ops_per_s N" and "ops_per_cpu_s N".
Usage: gil_io.py [seconds=3] [warm=0.5] [settle=1.5]
"""
import os
import signal
import sys
import threading
import time


def say(key, value):
    os.write(1, f"{key} {value}\n".encode())


def contend(seconds):
    sys.setswitchinterval(0.005)
    stop = time.monotonic() + seconds

    def busy():
        x = 0
        while time.monotonic() < stop:
            for _ in range(1000):
                x += 1

    def sleeper():
        while time.monotonic() < stop:
            time.sleep(0.001)

    threads = [threading.Thread(target=busy), threading.Thread(target=sleeper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def io_loop(seconds):
    fd = os.open("/dev/null", os.O_WRONLY)
    counts = [0, 0]
    stop = time.monotonic() + seconds

    def writer(i):
        n = 0
        data = b"x"
        while True:
            for _ in range(200):
                os.write(fd, data)
            n += 200
            if time.monotonic() >= stop:
                break
        counts[i] = n

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    start = time.monotonic()
    cpu0 = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    cpu = time.process_time() - cpu0
    os.close(fd)
    return sum(counts), elapsed, cpu


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    say("ready", os.getpid())
    signal.sigwait([signal.SIGUSR1])
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    warm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    settle = float(sys.argv[3]) if len(sys.argv) > 3 else 1.5
    if warm > 0:
        contend(warm)
    time.sleep(settle)
    ops, elapsed, cpu = io_loop(seconds)
    say("ops", ops)
    say("ops_per_s", int(ops / elapsed))
    # Less sensitive to other load on the host than wall-clock throughput.
    say("ops_per_cpu_s", int(ops / cpu))


if __name__ == "__main__":
    main()
