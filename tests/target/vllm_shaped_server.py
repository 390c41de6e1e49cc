#!/usr/bin/python3
"""An SSE completion server shaped like vLLM v1 (and SGLang): two processes, on the real stack
(Debian's python3-fastapi, python3-uvicorn, python3-zmq).

The API server process (the one started) runs FastAPI + uvicorn on an asyncio loop. At start-up it
forks the engine-core process (multiprocessing "fork" context, as vLLM does on Linux: a child of
the API process, same command line) and talks to it over ZMQ IPC in a private temp dir: a PUSH
socket sends requests (id, prompt bytes, max_tokens), a zmq.asyncio PULL socket receives one
message per engine step. One asyncio task reads that socket and hands each token to its request's
asyncio.Queue; the endpoint streams them, one SSE `data:` event per token, then `[DONE]`.

The engine core is one thread running continuous-batching steps: take the requests that arrived
(non-blocking), then one step's native work that releases the GIL (hashlib over a buffer):
--token-ms for the whole batch, plus, for each request that joined in this step, its prefill of
--prefill-ms + --prefill-ms-per-kb per KiB of prompt (the UTF-8 bytes of "prompt", or of the chat
"messages" contents), so a long prompt stalls every running stream: batch interference. Then one message with a token for every running request. With nothing
running it blocks on its input socket. It exits when the API process goes away. Faults, each off
by default:

  --api-python-ms MS --api-every N           pure-Python work in the API process's event loop every
                                             N tokens of a stream (compute; every stream waits)
  --engine-python-ms MS --engine-every N     pure-Python work in the engine step every N steps
                                             (compute in the engine process)
  --engine-fsync-every N --engine-fsync-mib MIB
                                             every N steps the engine writes MIB MiB to a log file
                                             in the temp dir (appended, cut back at 512 MiB) and
                                             fsyncs it, inside the step (disk_io;
                                             the temp dir is under $TMPDIR: not on tmpfs)

Prints "listening on 127.0.0.1:PORT" when the engine is ready and the port listens.
"""
import argparse
import asyncio
import itertools
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile

import uvicorn
from target_work import calibrate, native_work, python_work
import zmq
import zmq.asyncio
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

ARGS = None


# ---- engine-core process ----------------------------------------------------------------------

def engine_main(args, tmpdir, api_pid):
    """The engine core: one thread of continuous-batching steps. Runs in the forked child."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C goes to the API; it stops us
    ctx = zmq.Context()
    inp = ctx.socket(zmq.PULL)
    inp.connect(f"ipc://{tmpdir}/input.sock")
    out = ctx.socket(zmq.PUSH)
    out.setsockopt(zmq.SNDTIMEO, 1000)
    out.setsockopt(zmq.LINGER, 0)
    out.connect(f"ipc://{tmpdir}/output.sock")
    out.send_pyobj("ready")
    log_fd = buf = None
    if args.engine_fsync_every:
        log_fd = os.open(os.path.join(tmpdir, "engine.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        buf = b"\x6c" * (args.engine_fsync_mib << 20)  # preallocated, touched now: no page faults later
    running = {}  # request id -> [tokens left, tokens made]

    def orphaned():  # the API process is gone (killed): clean its temp dir and stop
        if os.getppid() == api_pid:
            return False
        shutil.rmtree(tmpdir, ignore_errors=True)
        return True

    for step in itertools.count(1):
        if orphaned():
            return
        if not running and not inp.poll(200):
            continue  # idle: block on the input socket (waking to check the parent)
        work_ms = args.token_ms
        while True:  # everything that arrived, without waiting
            try:
                msg = inp.recv_pyobj(zmq.NOBLOCK)
            except zmq.Again:
                break
            if msg[0] == "add":
                _, rid, prompt_bytes, max_tokens = msg
                running[rid] = [max_tokens, 0]
                work_ms += args.prefill_ms + args.prefill_ms_per_kb * prompt_bytes / 1024.0
            else:  # ("abort", rid): the client went away
                running.pop(msg[1], None)
        if not running:
            continue
        native_work(work_ms)  # the batch's forward pass, with this step's prefills
        if args.engine_fsync_every and step % args.engine_fsync_every == 0:
            # Appended: each flush writes new blocks, as a growing log does (an overwrite of
            # the same blocks flushes faster on some filesystems). Cut back at 512 MiB.
            if os.lseek(log_fd, 0, os.SEEK_END) >= 512 << 20:
                os.ftruncate(log_fd, 0)
                os.lseek(log_fd, 0, os.SEEK_SET)
            os.write(log_fd, buf)
            os.fsync(log_fd)
        if args.engine_python_ms and args.engine_every and step % args.engine_every == 0:
            python_work(args.engine_python_ms)
        outputs = []
        for rid, r in list(running.items()):
            if r[0] > 0:
                r[0] -= 1
                r[1] += 1
            outputs.append((rid, r[1], r[0] == 0))
            if r[0] == 0:
                del running[rid]
        while True:  # one message per step, for the whole batch
            try:
                out.send_pyobj(outputs)
                break
            except zmq.Again:  # nobody reading for a second: the API process may be gone
                if orphaned():
                    return


# ---- API server process -----------------------------------------------------------------------

app = FastAPI()
QUEUES = {}  # request id -> asyncio.Queue of (token number or 0, finished), None if the engine died
IDS = itertools.count(1)
ENGINE = {}  # "proc", "input", "output"


def prompt_bytes(body):
    prompt = body.get("prompt")
    if prompt is None:
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    return len(str(prompt).encode())


async def read_outputs():
    """The one task that reads the engine's step outputs and dispatches them to the requests."""
    out = ENGINE["output"]
    while True:
        if not await out.poll(500):
            if not ENGINE["proc"].is_alive():
                for q in QUEUES.values():
                    q.put_nowait(None)
                os.kill(os.getpid(), signal.SIGTERM)  # no engine, no server (as vLLM)
                return
            continue
        for rid, n, finished in await out.recv_pyobj():
            q = QUEUES.get(rid)
            if q is not None:
                q.put_nowait((n, finished))


@app.post("/v1/completions")
@app.post("/v1/chat/completions")
async def completions(request: Request):
    body = await request.json()
    tokens = int(body.get("max_tokens", ARGS.tokens))
    rid = next(IDS)
    queue = QUEUES[rid] = asyncio.Queue()
    await ENGINE["input"].send_pyobj(("add", rid, prompt_bytes(body), tokens))

    async def stream():
        finished = False
        try:
            while not finished:
                item = await queue.get()
                if item is None:
                    return  # the engine died: cut the stream
                n, finished = item
                if not n:
                    continue
                if ARGS.api_python_ms and ARGS.api_every and n % ARGS.api_every == 0:
                    python_work(ARGS.api_python_ms)  # in the event loop: every stream waits
                yield f'data: {{"choices":[{{"text":"tok{n}","index":0}}]}}\n\n'
            yield "data: [DONE]\n\n"
        finally:
            QUEUES.pop(rid, None)
            if not finished:  # the client went away: free its slot in the batch
                sent = ENGINE["input"].send_pyobj(("abort", rid))
                sent.add_done_callback(lambda f: f.cancelled() or f.exception())

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.get("/health")
async def health():
    return {"ok": True}


async def serve(sock):
    ctx = zmq.asyncio.Context()
    tmpdir = ENGINE["tmpdir"]
    ENGINE["input"] = ctx.socket(zmq.PUSH)
    ENGINE["input"].bind(f"ipc://{tmpdir}/input.sock")
    ENGINE["output"] = ctx.socket(zmq.PULL)
    ENGINE["output"].bind(f"ipc://{tmpdir}/output.sock")
    if await asyncio.wait_for(ENGINE["output"].recv_pyobj(), 60) != "ready":
        raise RuntimeError("engine core did not start")
    reader = asyncio.create_task(read_outputs())
    sock.listen(2048)
    print(f"listening on 127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    await server.serve(sockets=[sock])
    reader.cancel()
    ctx.destroy(linger=0)


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=30, help="native work per engine step (the batch)")
    p.add_argument("--prefill-ms", type=float, default=20, help="native work per request joining a step")
    p.add_argument("--prefill-ms-per-kb", type=float, default=0, help="more prefill per KiB of prompt")
    p.add_argument("--tokens", type=int, default=30, help="tokens per request without max_tokens")
    p.add_argument("--api-python-ms", type=float, default=0)
    p.add_argument("--api-every", type=int, default=15)
    p.add_argument("--engine-python-ms", type=float, default=0)
    p.add_argument("--engine-every", type=int, default=15)
    p.add_argument("--engine-fsync-every", type=int, default=0)
    p.add_argument("--engine-fsync-mib", type=int, default=16)
    ARGS = p.parse_args()
    calibrate()  # before the fork: the engine inherits it
    ENGINE["tmpdir"] = tempfile.mkdtemp(prefix="vllm-shaped-")
    proc = ENGINE["proc"] = multiprocessing.get_context("fork").Process(
        target=engine_main, args=(ARGS, ENGINE["tmpdir"], os.getpid()), name="EngineCore", daemon=True)
    proc.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # until uvicorn takes it: still clean up
    try:
        # IPPROTO_TCP, not 0: asyncio then sets TCP_NODELAY on each connection, as for `uvicorn --port`.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", ARGS.port))
        asyncio.run(serve(sock))
    except KeyboardInterrupt:
        pass
    finally:
        proc.terminate()
        proc.join(2)
        if proc.is_alive():
            proc.kill()
        shutil.rmtree(ENGINE["tmpdir"], ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
