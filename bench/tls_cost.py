#!/usr/bin/python3
"""What the tls probe's uprobes cost a TLS server: SSL_write + SSL_read pairs timed with the agent
attached (--probes tls: only the uprobes) and detached, in alternating rounds of one process.

The process holds both ends of a TLS 1.3 connection over memory BIOs (Python's ssl.SSLObject: each
write() is one SSL_write_ex, each read() one SSL_read_ex; no socket, no syscall), and sends a
token-sized SSE event through it per iteration: one SSL_write_ex and one SSL_read_ex, so with the
probe three uprobe hits (the write's entry, the read's entry and return). Each round times the
same number of iterations; the agent attaches before an "on" round and is stopped (SIGINT) after.

  sudo bench/tls_cost.py [--agent build/latency-doctor] [--rounds 5] [--iterations 200000]

Prints ns per pair for each round, the medians, and the cost per pair and per uprobe hit.
"""
import argparse
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

EVENT = b'data: {"choices":[{"text":"tok","index":0}]}\n\n'


def make_pair(workdir):
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cert)
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):  # the handshake, pumped by hand
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    client.write(b"x")  # both ends past the handshake
    s_in.write(c_out.read())
    server.read(1)
    return server, client, s_out, c_in


def time_round(server, client, s_out, c_in, iterations):
    start = time.perf_counter_ns()
    for _ in range(iterations):
        server.write(EVENT)
        c_in.write(s_out.read())
        client.read(len(EVENT))
    return (time.perf_counter_ns() - start) / iterations


def attach(agent):
    proc = subprocess.Popen([agent, "attach", "--pid", str(os.getpid()), "--probes", "tls", "--duration", "10m",
                             "-o", os.devnull], stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "attached to pid" in line:
            return proc
        if "error" in line:
            sys.exit(f"tls_cost: the agent failed: {line.strip()}")
    sys.exit("tls_cost: the agent ended before attaching")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", default="build/latency-doctor")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=200000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        pair = make_pair(workdir)
    time_round(*pair, args.iterations // 4)  # warm up
    off, on = [], []
    for r in range(args.rounds):
        off.append(time_round(*pair, args.iterations))
        agent = attach(args.agent)
        time.sleep(0.5)  # the probe's look for libssl runs at attach; let it settle
        on.append(time_round(*pair, args.iterations))
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
        print(f"round {r + 1}: off {off[-1]:.0f} ns, on {on[-1]:.0f} ns per SSL_write + SSL_read pair", flush=True)
    cost = statistics.median(on) - statistics.median(off)
    print(f"median: off {statistics.median(off):.0f} ns, on {statistics.median(on):.0f} ns "
          f"(x{statistics.median(on) / statistics.median(off):.2f}); the probe: {cost:.0f} ns per pair, "
          f"{cost / 3:.0f} ns per uprobe hit (write entry, read entry, read return)")


if __name__ == "__main__":
    main()
