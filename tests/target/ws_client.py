#!/usr/bin/python3
"""A WebSocket streaming client (Debian's python3-wsproto over a plain socket): one connection,
each request a text message {"max_tokens": N} answered by N text frames, one after another.
Writes latency-doctor's token log (one JSON object a line: start, token, end; CLOCK_MONOTONIC
stamps, the start line with the connection's local port) for `attach --client`.

  ws_client.py --url ws://127.0.0.1:P/v1/ws --requests 6 --tokens 15 --log client.jsonl

One thread, blocking reads: a frame's arrival is stamped as the read that brought it returns.
Exits 1 when a request got fewer tokens than asked for or the server closed.
"""
import argparse
import json
import os
import socket
import sys
import time
import urllib.parse

import wsproto
import wsproto.events


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--tokens", type=int, default=15)
    p.add_argument("--log", required=True)
    args = p.parse_args()
    url = urllib.parse.urlsplit(args.url)
    sock = socket.create_connection((url.hostname, url.port or 80))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = sock.getsockname()[1]
    ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    sock.sendall(ws.send(wsproto.events.Request(host=url.netloc, target=url.path or "/")))
    lines, failures = [], []

    def events():
        """(arrival, event) pairs; an empty read is the server's close."""
        while True:
            data = sock.recv(65536)
            t_ns = time.monotonic_ns()  # first thing: the arrival time of these bytes
            ws.receive_data(data or None)
            for ev in ws.events():
                yield t_ns, ev
            if not data:
                return

    stream = events()
    for _, ev in stream:
        if isinstance(ev, wsproto.events.AcceptConnection):
            break
        if isinstance(ev, wsproto.events.RejectConnection):
            sys.exit("the server refused the WebSocket upgrade")
    for n in range(args.requests):
        rid = f"r{n}"
        lines.append({"request": rid, "event": "start", "t_ns": time.monotonic_ns(), "clock": "monotonic",
                      "local_port": port})
        sock.sendall(ws.send(wsproto.events.TextMessage(json.dumps({"max_tokens": args.tokens}))))
        got = 0
        for t_ns, ev in stream:
            if isinstance(ev, wsproto.events.TextMessage):
                lines.append({"request": rid, "event": "token", "t_ns": t_ns, "clock": "monotonic"})
                got += 1
                if got == args.tokens:
                    break
            elif isinstance(ev, wsproto.events.CloseConnection):
                break
        lines.append({"request": rid, "event": "end", "t_ns": time.monotonic_ns(), "clock": "monotonic"})
        if got != args.tokens:
            failures.append(f"{rid}: {got} tokens of {args.tokens}")
            break
    sock.sendall(ws.send(wsproto.events.CloseConnection(code=1000)))
    sock.close()
    with open(args.log, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
