#!/usr/bin/python3
"""A gRPC server-streaming completion service on Debian's python3-grpcio (gRPC C-core, HTTP/2 over
a plain port, as gRPC front ends of inference servers run inside a cluster).

One method, /ld.Engine/Generate: the request is JSON ({"max_tokens": N}), the answer a stream of
N messages, one per token. No .proto: the handlers take and give raw bytes. Each token is made
with native work that releases the GIL (target_work.native_work), as an engine step would.
With --ssl-certfile/--ssl-keyfile it serves gRPC over TLS (OpenSSL, as Debian builds gRPC).
Faults, off by default:

  --fsync-every N --fsync-mib MIB   the handler builds a fresh MIB record, logs it and fsyncs
                                    every N tokens (disk_io)

Prints "listening on 127.0.0.1:PORT" when ready.
"""
import argparse
import json
import os
import sys
import tempfile
import threading
from concurrent import futures

import grpc
from target_work import calibrate, log_and_fsync, native_work

ARGS = None


def generate(request, context):
    body = json.loads(request or b"{}")
    tokens = int(body.get("max_tokens", ARGS.tokens))
    log_path = os.path.join(tempfile.gettempdir(), f"grpc-engine-{os.getpid()}.log")
    native_work(ARGS.prefill_ms)
    for i in range(tokens):
        native_work(ARGS.token_ms)
        if ARGS.fsync_every and (i + 1) % ARGS.fsync_every == 0:
            log_and_fsync(log_path, ARGS.fsync_mib)
        yield json.dumps({"text": f"tok{i + 1}", "index": i}).encode()


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token-ms", type=float, default=20)
    p.add_argument("--prefill-ms", type=float, default=20)
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--fsync-every", type=int, default=0)
    p.add_argument("--fsync-mib", type=int, default=16)
    p.add_argument("--ssl-certfile", help="serve TLS with this certificate (PEM)")
    p.add_argument("--ssl-keyfile", help="the certificate's key (PEM)")
    ARGS = p.parse_args()
    calibrate()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=ARGS.workers))
    handler = grpc.method_handlers_generic_handler(
        "ld.Engine", {"Generate": grpc.unary_stream_rpc_method_handler(generate)})
    server.add_generic_rpc_handlers((handler,))
    address = f"127.0.0.1:{ARGS.port}"
    if ARGS.ssl_certfile:
        with open(ARGS.ssl_keyfile, "rb") as key, open(ARGS.ssl_certfile, "rb") as cert:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
