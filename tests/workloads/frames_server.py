#!/usr/bin/env python3
"""A threaded SSE completion server for the frames root tests (tests/integration/frames_*).

Every token costs --token-ms of pure-Python CPU in step_token(); every --slow-every-th token
also runs render_usage_summary() for --slow-ms: the slow tokens ran extra Python code, and the
report must name that function. Standard library only: runs on any CPython 3.10-3.13 (pyenv
builds with symbols, Debian's stripped /usr/bin/python3.11).
Prints "listening on 127.0.0.1:PORT" when ready.
"""
import argparse
import http.server
import json
import sys
import time


def step_token(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1
    return x


def render_usage_summary(ms, i):
    """The extra work: a pure-Python loop (no Python calls), so the samples land in it."""
    end = time.thread_time() + ms / 1000.0
    parts = []
    n = 0
    while time.thread_time() < end:
        for k in range(300):
            n = (n * 31 + k + i) % 1000003
        parts.append(n)
        if len(parts) > 512:
            parts = parts[256:]
    return n


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        tokens = self.server.tokens
        try:
            tokens = int(json.loads(body or b"{}").get("max_tokens", tokens))
        except (ValueError, AttributeError):
            pass
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        o = self.server.opts
        for i in range(tokens):
            step_token(o.token_ms)
            if o.slow_every > 0 and i > 0 and i % o.slow_every == 0:
                render_usage_summary(o.slow_ms, i)
            event = "data: " + json.dumps({"choices": [{"text": " tok%d" % i}]}) + "\n\n"
            self.wfile.write(("%x\r\n%s\r\n" % (len(event), event)).encode())
        done = "data: [DONE]\n\n"
        self.wfile.write(("%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)).encode())

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=8)
    p.add_argument("--slow-ms", type=float, default=250)
    p.add_argument("--slow-every", type=int, default=15)
    p.add_argument("--tokens", type=int, default=40)
    a = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.tokens, server.opts = a.tokens, a
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
