#!/usr/bin/env python3
"""A threaded Python SSE completion server for the GIL scenario (tests/integration).

Every token costs --token-ms of pure-Python CPU work. With --gil-hog-ms, a background
thread sorts a shuffled list every --gil-hog-period-ms: list.sort() of ints runs in C and never
releases the GIL, so the token threads wait for the GIL for about --gil-hog-ms, the way a
json.dumps of a huge object or a metrics serialiser stalls a real server's streams.
Prints "listening on 127.0.0.1:PORT" when ready. Standard library only.
"""
import argparse
import http.server
import json
import random
import sys
import threading
import time


def burn(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1
    return x


def sized_list_for(ms):
    """A shuffled list whose sort takes about `ms` milliseconds here."""
    n = 100_000
    while True:
        items = list(range(n))
        random.shuffle(items)
        t = time.perf_counter()
        sorted(items)
        took = (time.perf_counter() - t) * 1000
        if took >= ms or n > 20_000_000:
            return items
        n = int(n * max(1.2, min(4.0, ms / max(took, 1.0))))


def gil_hog(items, period_ms):
    time.sleep(period_ms / 1000.0)
    while True:
        sorted(items)  # holds the GIL throughout
        time.sleep(period_ms / 1000.0)


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
        for i in range(tokens):
            burn(self.server.token_ms)
            event = "data: " + json.dumps({"choices": [{"text": " tok%d" % i}]}) + "\n\n"
            self.wfile.write(("%x\r\n%s\r\n" % (len(event), event)).encode())
        done = "data: [DONE]\n\n"
        self.wfile.write(("%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)).encode())

    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=20)
    p.add_argument("--tokens", type=int, default=30)
    p.add_argument("--gil-hog-ms", type=float, default=0)
    p.add_argument("--gil-hog-period-ms", type=float, default=1500)
    a = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    server.token_ms, server.tokens = a.token_ms, a.tokens
    if a.gil_hog_ms > 0:
        items = sized_list_for(a.gil_hog_ms)
        threading.Thread(target=gil_hog, args=(items, a.gil_hog_period_ms), daemon=True).start()
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
