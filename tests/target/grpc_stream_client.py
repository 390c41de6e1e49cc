#!/usr/bin/python3
"""Drives grpc_stream_server.py as a client would and writes latency-doctor's token log (one JSON
object a line: start, token, end; CLOCK_MONOTONIC stamps) for `attach --client`.

  grpc_stream_client.py --port P --requests 6 --concurrency 2 --tokens 15 --log client.jsonl

All requests share one channel (one HTTP/2 connection, a stream each), as gRPC clients do.
Exits 1 when a request failed or returned fewer messages than asked for.
"""
import argparse
import json
import os
import sys
import threading
import time

import grpc


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--requests", type=int, default=6)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--tokens", type=int, default=15)
    p.add_argument("--log", required=True)
    p.add_argument("--cacert", help="TLS, verifying the server with this CA certificate (PEM)")
    args = p.parse_args()
    if args.cacert:
        with open(args.cacert, "rb") as f:
            channel = grpc.secure_channel(f"127.0.0.1:{args.port}", grpc.ssl_channel_credentials(f.read()))
    else:
        channel = grpc.insecure_channel(f"127.0.0.1:{args.port}")
    generate = channel.unary_stream("/ld.Engine/Generate")
    grpc.channel_ready_future(channel).result(timeout=10)
    lines, failures = [], []
    lock = threading.Lock()
    next_request = iter(range(args.requests))

    def worker():
        while True:
            with lock:
                n = next(next_request, None)
            if n is None:
                return
            rid = f"r{n}"
            got = [{"request": rid, "event": "start", "t_ns": time.monotonic_ns(), "clock": "monotonic"}]
            count = 0
            try:
                for _ in generate(json.dumps({"max_tokens": args.tokens}).encode()):
                    got.append({"request": rid, "event": "token", "t_ns": time.monotonic_ns(), "clock": "monotonic"})
                    count += 1
            except grpc.RpcError as e:
                failures.append(f"{rid}: {e.code()}")
            got.append({"request": rid, "event": "end", "t_ns": time.monotonic_ns(), "clock": "monotonic"})
            if count != args.tokens:
                failures.append(f"{rid}: {count} messages of {args.tokens}")
            with lock:
                lines.extend(got)

    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    for failure in failures:
        print(f"grpc_stream_client: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
