#!/usr/bin/python3
"""An SSE completion server shaped like the API layer of vLLM and SGLang, on the real stack:
FastAPI + uvicorn (Debian's python3-fastapi, python3-uvicorn), or FastAPI + hypercorn with
`--server hypercorn` (python3-hypercorn: HTTP/1.1 and HTTP/2, h2c with prior knowledge on a plain
port, h2 by ALPN with --ssl-*).

Each request gets an engine thread that makes its tokens with native work that releases the GIL
(hashlib over a buffer: CPython drops the GIL for large inputs) and hands each token to the event
loop with call_soon_threadsafe; the endpoint streams them from an async generator, one SSE
`data:` event per token, then `[DONE]`. Faults, each off by default:

  --loop-python-ms MS --loop-every N   pure-Python work in the event loop every N tokens (compute)
  --sleep-ms MS --sleep-every N        the engine thread sleeps every N tokens (app_wait)
  --fsync-every N --fsync-mib MIB      the engine thread builds a fresh MIB record, logs it and fsyncs
                                       every N tokens (disk_io and kv_alloc: the record's new pages)
  --log-every N --log-mib MIB          the engine thread writes MIB from a buffer it keeps to a log and
                                       fsyncs every N tokens (disk_io: the page-cache copy and the flush)
  --lock-hold-ms MS                    a metrics thread holds a threading.Lock the engine takes per
                                       token for MS every --lock-period-ms, hashing in C with the
                                       GIL released (lock_contention)
  --gil-hog-ms MS                      a thread runs pure Python for MS every --gil-hog-period-ms,
                                       holding the GIL (gil)
  --nagle                              bind the listening socket as uvicorn --workers does (proto 0):
                                       asyncio then leaves TCP_NODELAY off on every connection, and
                                       small token writes wait for the client's ACK (network)

The same engine streams over WebSocket at /v1/ws (uvicorn with Debian's python3-wsproto): each
text message {"max_tokens": N} is a request, each token a text frame.

Prints "listening on 127.0.0.1:PORT" when ready.
"""
import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time

import uvicorn
from target_work import calibrate, log_and_fsync, native_work, python_work
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse

ARGS = None
TOKEN_LOCK = threading.Lock()


LOG_BUFFER = None  # --log-mib of kept (already faulted) pages


def log_kept_buffer_and_fsync(path):
    with open(path, "ab") as f:
        f.write(LOG_BUFFER)
        f.flush()
        os.fsync(f.fileno())


def engine(loop, queue, tokens):
    """One request's token generator: runs in its own thread."""
    log_path = os.path.join(tempfile.gettempdir(), f"fastapi-engine-{os.getpid()}.log")
    for i in range(tokens):
        with TOKEN_LOCK:  # the engine's bookkeeping per token (a metrics thread may hold it)
            pass
        native_work(ARGS.token_ms)
        if ARGS.sleep_ms and ARGS.sleep_every and (i + 1) % ARGS.sleep_every == 0:
            time.sleep(ARGS.sleep_ms / 1000.0)
        if ARGS.fsync_every and (i + 1) % ARGS.fsync_every == 0:
            log_and_fsync(log_path, ARGS.fsync_mib)
        if ARGS.log_every and (i + 1) % ARGS.log_every == 0:
            log_kept_buffer_and_fsync(log_path)
        loop.call_soon_threadsafe(queue.put_nowait, i)
    loop.call_soon_threadsafe(queue.put_nowait, None)


def metrics_thread():
    while True:
        time.sleep(ARGS.lock_period_ms / 1000.0)
        with TOKEN_LOCK:
            native_work(ARGS.lock_hold_ms)


def gil_hog_thread():
    while True:
        time.sleep(ARGS.gil_hog_period_ms / 1000.0)
        python_work(ARGS.gil_hog_ms)


app = FastAPI()


@app.post("/v1/completions")
@app.post("/v1/chat/completions")
async def completions(request: Request):
    body = await request.json()
    tokens = int(body.get("max_tokens", ARGS.tokens))
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    # The prefill: native work before the first token, in the engine's own thread.
    prefill_ms = ARGS.prefill_ms

    def run():
        native_work(prefill_ms)
        engine(loop, queue, tokens)

    threading.Thread(target=run, daemon=True).start()

    async def stream():
        n = 0
        while True:
            item = await queue.get()
            if item is None:
                break
            n += 1
            if ARGS.loop_python_ms and ARGS.loop_every and n % ARGS.loop_every == 0:
                python_work(ARGS.loop_python_ms)  # in the event loop: every stream waits
            yield f'data: {{"choices":[{{"text":"tok{n}","index":0}}]}}\n\n'
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.websocket("/v1/ws")
async def completions_ws(ws: WebSocket):
    """The same engine over WebSocket: each client message {"max_tokens": N} is a request, each
    token a text frame; nothing marks the end (the client counts its tokens)."""
    await ws.accept()
    loop = asyncio.get_running_loop()
    try:
        while True:
            body = json.loads(await ws.receive_text())
            queue = asyncio.Queue()

            def run(tokens=int(body.get("max_tokens", ARGS.tokens))):
                native_work(ARGS.prefill_ms)
                engine(loop, queue, tokens)

            threading.Thread(target=run, daemon=True).start()
            n = 0
            while (await queue.get()) is not None:
                n += 1
                await ws.send_text(f'{{"choices":[{{"text":"tok{n}","index":0}}]}}')
    except WebSocketDisconnect:
        pass


@app.get("/health")
async def health():
    return {"ok": True}


def serve_hypercorn(sock):
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    sock.listen(128)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    if ARGS.ssl_certfile:
        config.certfile, config.keyfile = ARGS.ssl_certfile, ARGS.ssl_keyfile
    asyncio.run(serve(app, config))


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=30)
    p.add_argument("--nagle", action="store_true")
    p.add_argument("--prefill-ms", type=float, default=20)
    p.add_argument("--tokens", type=int, default=30)
    p.add_argument("--loop-python-ms", type=float, default=0)
    p.add_argument("--loop-every", type=int, default=15)
    p.add_argument("--sleep-ms", type=float, default=0)
    p.add_argument("--sleep-every", type=int, default=12)
    p.add_argument("--fsync-every", type=int, default=0)
    p.add_argument("--fsync-mib", type=int, default=16)
    p.add_argument("--log-every", type=int, default=0)
    p.add_argument("--log-mib", type=int, default=32)
    p.add_argument("--lock-hold-ms", type=float, default=0)
    p.add_argument("--lock-period-ms", type=float, default=1000)
    p.add_argument("--gil-hog-ms", type=float, default=0)
    p.add_argument("--gil-hog-period-ms", type=float, default=1500)
    p.add_argument("--ssl-certfile", help="serve HTTPS with this certificate (PEM), as uvicorn's flag")
    p.add_argument("--ssl-keyfile", help="the certificate's key (PEM)")
    p.add_argument("--server", choices=("uvicorn", "hypercorn"), default="uvicorn",
                   help="the ASGI server: hypercorn also speaks HTTP/2")
    ARGS = p.parse_args()
    calibrate()
    global LOG_BUFFER
    if ARGS.log_every:
        LOG_BUFFER = bytearray(b"\x6c" * (ARGS.log_mib << 20))  # touched now: no page faults later
    if ARGS.lock_hold_ms:
        threading.Thread(target=metrics_thread, daemon=True).start()
    if ARGS.gil_hog_ms:
        threading.Thread(target=gil_hog_thread, daemon=True).start()
    # asyncio sets TCP_NODELAY on an accepted connection only when its socket says IPPROTO_TCP,
    # which it inherits from the listening socket: `uvicorn --host --port` gets one from
    # getaddrinfo; `uvicorn --workers`, gunicorn and servers that bind their own (proto 0) do not.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0 if ARGS.nagle else socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", ARGS.port))
    port = sock.getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", flush=True)
    if ARGS.server == "hypercorn":
        return serve_hypercorn(sock)
    config = uvicorn.Config(app, log_level="warning", access_log=False, ssl_certfile=ARGS.ssl_certfile,
                            ssl_keyfile=ARGS.ssl_keyfile)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
