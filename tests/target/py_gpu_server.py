#!/usr/bin/python3
"""An SSE completion server shaped like a simple PyTorch server: FastAPI + uvicorn in front, one
engine thread running the model for every request on a GPU through the CUDA runtime
(--cuda-lib, loaded with ctypes as PyTorch's wheels load libcudart at run time).

The engine thread runs one forward per step for all active requests (continuous batching): a
forward is --layers layers, each pure-Python work (~--layer-python-us, holding the GIL: PyTorch's
dispatcher and the module's Python code) followed by a cudaLaunchKernel of --kernel-us (ctypes
drops the GIL during the call, as PyTorch's op dispatch does), then a cudaStreamSynchronize (GIL
dropped too: the `.item()` / `.cpu()` that fetches the sampled tokens). The launches only queue
work, so the GPU runs layer k while Python prepares layer k+1, as in eager PyTorch: a step takes
about max(layers * layer-python-us, layer-python-us + layers * kernel-us). Each request's token
goes to the event loop with call_soon_threadsafe; the endpoint streams one OpenAI-style SSE
`data:` event per token, then `data: [DONE]`.

Faults, off by default:
  --gpu-slow-every N --gpu-slow-ms MS   every Nth forward queues MS more GPU time (spread over its
                                        kernels: a GPU-bound slow step)

Prints "listening on 127.0.0.1:PORT" when ready (--port 0: a free port).
"""
import argparse
import asyncio
import ctypes
import socket
import sys
import threading
import time

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

ARGS = None
ENGINE = None


class Dim3(ctypes.Structure):
    """cuda_runtime_api.h's dim3, passed by value."""
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class Cuda:
    """The two runtime calls a forward makes, through ctypes (which releases the GIL per call)."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        self.launch = lib.cudaLaunchKernel
        self.launch.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_size_t, ctypes.c_void_p]
        self.launch.restype = ctypes.c_int
        self.sync = lib.cudaStreamSynchronize
        self.sync.argtypes = [ctypes.c_void_p]
        self.sync.restype = ctypes.c_int
        # The kernel handle: any stable address serves the stand-in library.
        self.kernel = ctypes.cast(ctypes.create_string_buffer(16), ctypes.c_void_p)
        self.args = (ctypes.c_void_p * 1)()
        self.reported = False

    def check(self, call, err):
        if err and not self.reported:
            self.reported = True
            print(f"py_gpu_server: {call} returned {err}", file=sys.stderr, flush=True)

    def launch_kernel(self, us):
        """Queues a kernel of `us` microseconds (the stand-in runs gridDim.x microseconds)."""
        err = self.launch(self.kernel, Dim3(max(1, int(us)), 1, 1), Dim3(1, 1, 1), self.args, 0, None)
        self.check("cudaLaunchKernel", err)

    def synchronize(self):
        self.check("cudaStreamSynchronize", self.sync(None))


def python_work(us):
    """`us` microseconds of pure-Python bytecode: holds the GIL, in the caller's thread."""
    end = time.thread_time() + us / 1e6
    x = 0
    while time.thread_time() < end:
        for _ in range(20):
            x += 1
    return x


class Stream:
    """One request in the engine: its tokens go to `queue` in the event loop `loop`."""

    def __init__(self, loop, queue, tokens):
        self.loop, self.queue, self.left = loop, queue, tokens


class Engine:
    """The model thread: one forward per step for every active request."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.cv = threading.Condition()
        self.pending = []
        self.forwards = 0
        threading.Thread(target=self.run, name="engine", daemon=True).start()

    def submit(self, stream):
        with self.cv:
            self.pending.append(stream)
            self.cv.notify()

    def forward(self):
        self.forwards += 1
        extra_us = 0.0
        if ARGS.gpu_slow_every and self.forwards % ARGS.gpu_slow_every == 0:
            extra_us = ARGS.gpu_slow_ms * 1000 / ARGS.layers  # a slower step, not a deeper model
        for _ in range(ARGS.layers):
            python_work(ARGS.layer_python_us)
            self.cuda.launch_kernel(ARGS.kernel_us + extra_us)
        self.cuda.synchronize()

    def run(self):
        active = []
        while True:
            with self.cv:
                while not active and not self.pending:
                    self.cv.wait()
                active += self.pending
                self.pending = []
            self.forward()
            for s in active:
                s.left -= 1
                s.loop.call_soon_threadsafe(s.queue.put_nowait, s.left)
            active = [s for s in active if s.left > 0]


app = FastAPI()


@app.post("/v1/completions")
@app.post("/v1/chat/completions")
async def completions(request: Request):
    body = await request.json()
    max_tokens = body.get("max_tokens")
    tokens = ARGS.tokens if max_tokens is None else int(max_tokens)
    queue = asyncio.Queue()
    if tokens > 0:
        ENGINE.submit(Stream(asyncio.get_running_loop(), queue, tokens))

    async def stream():
        left = tokens
        n = 0
        while left > 0:
            left = await queue.get()
            n += 1
            finish = "null" if left > 0 else '"length"'
            yield f'data: {{"choices":[{{"text":"tok{n}","index":0,"finish_reason":{finish}}}]}}\n\n'
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.get("/health")
async def health():
    return {"ok": True}


def main():
    global ARGS, ENGINE
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cuda-lib", required=True, help="the CUDA runtime library (libcudart.so.12)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tokens", type=int, default=30, help="tokens when the body has no max_tokens")
    p.add_argument("--layers", type=int, default=24, help="layers per forward, one kernel each")
    p.add_argument("--layer-python-us", type=float, default=100, help="pure-Python work per layer")
    p.add_argument("--kernel-us", type=float, default=500, help="GPU time of each layer's kernel")
    p.add_argument("--gpu-slow-every", type=int, default=0, help="every Nth forward is GPU-slow")
    p.add_argument("--gpu-slow-ms", type=float, default=100, help="extra GPU time of a slow forward")
    ARGS = p.parse_args()
    if ARGS.layers < 1:
        p.error("--layers must be at least 1")
    ENGINE = Engine(Cuda(ARGS.cuda_lib))
    # IPPROTO_TCP, not 0: asyncio then sets TCP_NODELAY on each connection, as for `uvicorn --port`.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", ARGS.port))
    sock.listen(128)  # before the line below: a client that reads it may connect at once
    port = sock.getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
