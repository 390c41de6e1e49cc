#!/usr/bin/python3
"""An HTTP/2 streaming client that keeps one connection, as browsers, the OpenAI SDKs over h2 and
gRPC clients do: every request is a stream of one connection, so no request pays for a connect
or a TLS handshake. Writes latency-doctor's token log (one JSON object a line: start, token, end;
CLOCK_MONOTONIC stamps) for `attach --client`.

  h2_sse_client.py --url http://127.0.0.1:P/v1/completions --requests 6 --concurrency 2 \\
    --tokens 15 --log client.jsonl [--cacert cert.pem]

http:// speaks h2c with prior knowledge, https:// h2 by ALPN (Debian's python3-h2, the protocol
machine hypercorn uses). One thread, blocking reads: a byte's arrival is stamped as the read that
brought it returns. A token is an SSE data event other than [DONE] and a usage summary
("choices":[]). With --grpc PATH each request is a gRPC server-streaming call of that method
(its request message the JSON {"max_tokens": N}) and a token each message of the answer: a gRPC
client without gRPC C-core's threads between the socket and the stamp. Exits 1 when a request
failed or returned fewer tokens than asked for.
"""
import argparse
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.parse

import h2.config
import h2.connection
import h2.events

USAGE_ONLY = re.compile(r'"choices"\s*:\s*\[\s*\]')


class Stream:
    def __init__(self, rid, grpc=False):
        self.rid = rid
        self.grpc = grpc
        self.lines = [self.line("start", time.monotonic_ns())]
        self.tokens = 0
        self.pending = b""
        self.error = ""

    def line(self, event, t_ns):
        return {"request": self.rid, "event": event, "t_ns": t_ns, "clock": "monotonic"}

    def feed(self, data, t_ns):
        self.pending += data
        while self.grpc and len(self.pending) >= 5:  # a message: flag, 32-bit length, bytes
            size = 5 + int.from_bytes(self.pending[1:5], "big")
            if len(self.pending) < size:
                return
            self.pending = self.pending[size:]
            self.lines.append(self.line("token", t_ns))
            self.tokens += 1
        while b"\n\n" in self.pending:
            event, self.pending = self.pending.split(b"\n\n", 1)
            for field in event.split(b"\n"):
                if not field.startswith(b"data:"):
                    continue
                text = field[5:].strip().decode("utf-8", "replace")
                if text != "[DONE]" and not USAGE_ONLY.search(text):
                    self.lines.append(self.line("token", t_ns))
                    self.tokens += 1


def connect(url, cacert):
    sock = socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if url.scheme == "https":
        ctx = ssl.create_default_context(cafile=cacert)
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname=url.hostname)
        if sock.selected_alpn_protocol() != "h2":
            sys.exit(f"the server did not choose h2 by ALPN ({sock.selected_alpn_protocol()})")
    return sock


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--tokens", type=int, default=15)
    p.add_argument("--log", required=True)
    p.add_argument("--cacert", help="verify an https:// server with this CA certificate (PEM)")
    p.add_argument("--grpc", metavar="PATH", help="call this gRPC server-streaming method instead (/pkg.Svc/Method)")
    args = p.parse_args()
    url = urllib.parse.urlsplit(args.url)
    sock = connect(url, args.cacert)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    if args.grpc:
        message = json.dumps({"max_tokens": args.tokens}).encode()
        body = b"\0" + len(message).to_bytes(4, "big") + message
        headers = [(":method", "POST"), (":path", args.grpc), ("content-type", "application/grpc"), ("te", "trailers")]
    else:
        body = json.dumps({"prompt": "hello", "max_tokens": args.tokens, "stream": True}).encode()
        headers = [(":method", "POST"), (":path", url.path or "/"), ("content-type", "application/json")]
    streams, done, failures = {}, [], []
    started = 0

    def start():
        nonlocal started
        rid = f"r{started}"
        started += 1
        sid = conn.get_next_available_stream_id()
        streams[sid] = Stream(rid, bool(args.grpc))  # stamped first: the request begins now
        conn.send_headers(sid, headers[:2] + [(":scheme", url.scheme), (":authority", url.netloc)] + headers[2:] +
                          [("x-request-id", rid)])
        conn.send_data(sid, body, end_stream=True)
        sock.sendall(conn.data_to_send())

    def finish(sid, error=""):
        st = streams.pop(sid)
        st.lines.append(st.line("end", time.monotonic_ns()))
        st.error = st.error or error
        done.append(st)
        if started < args.requests:
            start()

    ready = False
    while len(done) < args.requests:
        data = sock.recv(65536)
        t_ns = time.monotonic_ns()  # first thing: the arrival time of these bytes
        if not data:
            failures.append("the server closed the connection")
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged) and not ready:
                ready = True  # the connection is up: the requests start now, none pays for it
                while started < min(args.concurrency, args.requests):
                    start()
            elif isinstance(ev, h2.events.ResponseReceived) and ev.stream_id in streams:
                status = dict(ev.headers).get(b":status", b"")
                if status != b"200":
                    streams[ev.stream_id].error = f"HTTP {status.decode()}"
            elif isinstance(ev, h2.events.TrailersReceived) and ev.stream_id in streams:
                grpc_status = dict(ev.headers).get(b"grpc-status", b"0")
                if grpc_status != b"0":
                    streams[ev.stream_id].error = f"grpc-status {grpc_status.decode()}"
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id in streams:
                streams[ev.stream_id].feed(ev.data, t_ns)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in streams:
                finish(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset) and ev.stream_id in streams:
                finish(ev.stream_id, f"reset ({ev.error_code})")
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    conn.close_connection()
    sock.sendall(conn.data_to_send())
    sock.close()
    for st in done:
        if st.error:
            failures.append(f"{st.rid}: {st.error}")
        elif st.tokens != args.tokens:
            failures.append(f"{st.rid}: {st.tokens} tokens of {args.tokens}")
    with open(args.log, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as f:
        for st in done:
            f.writelines(json.dumps(line) + "\n" for line in st.lines)
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
