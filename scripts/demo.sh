#!/usr/bin/env bash
# The main job on a bundled default: start the sample LLM server, drive load with
# `latency-doctor bench`, and explain it with `latency-doctor attach --pid`.
# Run as root (BPF needs CAP_BPF/CAP_PERFMON).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null

workdir=$(mktemp -d)
cleanup() { kill "${server_pid:-}" 2>/dev/null || true; rm -rf "$workdir"; }
trap cleanup EXIT

# A server with 200 ms prefill and 40 ms per token, mimicking llama.cpp on the wire.
./build/ld-sample-server --port 0 --prefill-base-ms 200 --token-ms 40 --tokens 30 --wire llamacpp \
  >"$workdir/server.out" 2>"$workdir/server.err" &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$workdir/server.out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$workdir/server.out")
echo "demo: sample server pid $server_pid on port $port"

./build/latency-doctor attach --pid "$server_pid" --duration 60s --record "$workdir/demo.ldtrace" \
  >"$workdir/report.txt" 2>"$workdir/agent.err" &
agent_pid=$!
# Start the load once the probes are in the kernel (the agent says so on stderr).
for _ in $(seq 200); do grep -q "attached to pid" "$workdir/agent.err" && break; sleep 0.05; done
cat "$workdir/agent.err"

echo "demo: bench drives 10 requests, 2 at a time"
./build/latency-doctor bench --url "http://127.0.0.1:$port/v1/completions" --requests 10 \
  --concurrency 2 --max-tokens 30 --quiet
kill -INT "$agent_pid"   # Ctrl-C: the agent still writes its report
wait "$agent_pid"
grep -v "attached to pid" "$workdir/agent.err" || true
echo
echo "=============== latency-doctor attach --pid $server_pid ==============="
cat "$workdir/report.txt"
