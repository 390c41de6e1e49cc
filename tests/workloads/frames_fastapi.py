#!/usr/bin/env python3
"""A FastAPI/uvicorn streaming server for the frames root tests (tests/integration/frames_*).

An OpenAI-style /v1/completions endpoint streams Server-Sent Events from an async generator;
every token awaits --token-ms (the model step, off the event loop), and every --slow-every-th
token runs build_usage_report() in the event loop itself for --slow-ms of pure-Python work:
every stream on the loop stalls behind it. The report's finding must name that function.
Needs the Debian packages python3-fastapi and python3-uvicorn.
Prints "listening on 127.0.0.1:PORT" when ready.
"""
import argparse
import asyncio
import json
import socket
import sys
import time

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
import uvicorn

app = FastAPI()
OPTS = None


def build_usage_report(ms, i):
    """Pure-Python work in the event loop: a loop with no Python calls in it."""
    end = time.thread_time() + ms / 1000.0
    acc = {}
    n = 0
    while time.thread_time() < end:
        for k in range(300):
            n = (n * 33 + k + i) % 999983
        acc[n % 97] = n
    return len(acc)


async def stream(tokens):
    for i in range(tokens):
        await asyncio.sleep(OPTS.token_ms / 1000.0)
        if OPTS.slow_every > 0 and i > 0 and i % OPTS.slow_every == 0:
            build_usage_report(OPTS.slow_ms, i)
        yield "data: " + json.dumps({"choices": [{"text": " tok%d" % i}]}) + "\n\n"
    yield "data: [DONE]\n\n"


@app.post("/v1/completions")
async def completions(request: Request):
    body = await request.json()
    tokens = int(body.get("max_tokens", OPTS.tokens))
    return StreamingResponse(stream(tokens), media_type="text/event-stream")


def main():
    global OPTS
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=10)
    p.add_argument("--slow-ms", type=float, default=250)
    p.add_argument("--slow-every", type=int, default=15)
    p.add_argument("--tokens", type=int, default=40)
    OPTS = p.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", OPTS.port))
    print("listening on 127.0.0.1:%d" % sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
