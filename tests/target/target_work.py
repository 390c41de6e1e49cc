"""Work of a known length for the Python targets (fastapi_engine_server.py, vllm_shaped_server.py):
native work that releases the GIL, and pure-Python work that holds it."""
import hashlib
import os
import time

WORK = b"\x5a" * (1 << 20)  # hashed for native work: CPython releases the GIL for large inputs
HASHES_PER_MS = 1.0


def calibrate():
    """How many 1 MiB hashes make a millisecond here (best of a few runs)."""
    global HASHES_PER_MS
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(20):
            hashlib.sha256(WORK).digest()
        took_ms = (time.perf_counter() - t) * 1000
        best = max(best, 20 / max(took_ms, 1e-3))
    HASHES_PER_MS = best


def native_work(ms):
    """ms of CPU in C code that releases the GIL."""
    n = max(1, int(round(ms * HASHES_PER_MS)))
    for _ in range(n):
        hashlib.sha256(WORK).digest()


def python_work(ms):
    """ms of pure-Python bytecode: holds the GIL, runs in the caller's thread."""
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1
    return x


def log_and_fsync(path, mib):
    """Builds a fresh MIB record (new pages), appends it to path and fsyncs: a logger on the
    token path."""
    with open(path, "ab") as f:
        f.write(b"\0" * (mib << 20))
        f.flush()
        os.fsync(f.fileno())
