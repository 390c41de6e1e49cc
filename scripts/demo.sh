#!/usr/bin/env bash
# The main job on a bundled default: start the sample LLM server with a realistic fault mix (a
# logger that fsyncs on the token path, a noisy neighbour that takes the CPUs in bursts), drive
# load with `latency-doctor bench`, explain it with `latency-doctor attach --pid`, and show the
# client's times beside the server's. Prints the text report and where the HTML report is.
#
# Run as root (BPF needs CAP_BPF/CAP_PERFMON); `sudo` is used only where it exists. Installs the
# Debian packages it needs and builds only the agent and the sample server into $BUILD_DIR
# (default build/); the results stay in $DEMO_OUT (default $BUILD_DIR/demo).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then exec sudo --preserve-env=BUILD_DIR,DEMO_OUT bash "$0" "$@"; fi
  echo "demo: run as root (BPF needs CAP_BPF and CAP_PERFMON)" >&2
  exit 2
fi

started=$(date +%s.%N)
build=${BUILD_DIR:-build}
out=${DEMO_OUT:-$build/demo}
echo "demo: installing what is missing and building $build/latency-doctor and the sample server" \
     "(a first build takes a few minutes)"
BUILD_DIR=$build bash scripts/setup.sh latency-doctor ld-sample-server >"${TMPDIR:-/tmp}/latency-doctor-demo-setup.log" 2>&1 || {
  tail -20 "${TMPDIR:-/tmp}/latency-doctor-demo-setup.log" >&2
  echo "demo: setup failed (full log: ${TMPDIR:-/tmp}/latency-doctor-demo-setup.log)" >&2
  exit 2
}
built=$(date +%s.%N)
# The agent finds the shipped rules beside its binary (build/../rules); a build directory
# elsewhere gets a link to them.
if [ ! -e "$build/rules" ] && [ "$(cd "$build/.." && pwd -P)" != "$(pwd -P)" ]; then
  ln -s "$(pwd -P)/rules" "$build/rules"
fi

mkdir -p "$out"
chmod 700 "$out"
out=$(cd "$out" && pwd -P)
rm -f "$out"/report.* "$out"/demo.ldtrace "$out"/client.jsonl
work=$(mktemp -d)
cleanup() {
  [ -n "${agent_pid:-}" ] && kill -INT "$agent_pid" 2>/dev/null || true
  [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# 200 ms prefill and 40 ms per token (CPU work), llama.cpp's wire pattern; every 40th token the
# server's logger appends and fdatasyncs for 250 ms; a neighbour process spins 8 threads for
# 600 ms every 3 s on the same CPUs.
"$build/ld-sample-server" --port 0 --prefill-base-ms 200 --token-ms 40 --tokens 30 --wire llamacpp \
  --fault disk_io --fault-every 40 --fault-ms 250 --fault-file "$work/server.log" \
  --neighbour-threads 8 --neighbour-burst-ms 600 --neighbour-period-ms 3000 \
  >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
target_pid=$server_pid
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
[ -n "$port" ] || { cat "$work/server.err" >&2; echo "demo: the sample server did not start" >&2; exit 2; }
echo "demo: sample server pid $server_pid on 127.0.0.1:$port: a logger that fsyncs every 40th token,"
echo "      and a noisy neighbour ($(sed -n 's/.*noisy neighbour \(pid [0-9]*\).*/\1/p' "$work/server.err"): 8 threads, 600 ms bursts every 3 s)"

# --client: the bench's token log is joined to the server's requests when the trace ends.
echo "demo: latency-doctor attach --pid $server_pid --record $out/demo.ldtrace --client $out/client.jsonl"
"$build/latency-doctor" attach --pid "$server_pid" --duration 120s --record "$out/demo.ldtrace" \
  --client "$out/client.jsonl" -o "$out/report.txt" 2>"$work/agent.err" &
agent_pid=$!
# Start the load once the probes are in the kernel (the agent says so on stderr).
for _ in $(seq 400); do
  grep -q "attached to pid" "$work/agent.err" && break
  kill -0 "$agent_pid" 2>/dev/null || break
  sleep 0.05
done
grep -q "attached to pid" "$work/agent.err" || { cat "$work/agent.err" >&2; echo "demo: the agent did not attach" >&2; exit 2; }
grep "attached to pid" "$work/agent.err" | tail -1 | tr '\r' '\n' | grep -v '^$' | tail -1

echo "demo: latency-doctor bench: 12 requests, 2 at a time, 30 tokens each (--tokens-out $out/client.jsonl)"
"$build/latency-doctor" bench --url "http://127.0.0.1:$port/v1/completions" --requests 12 \
  --concurrency 2 --max-tokens 30 --tokens-out "$out/client.jsonl" --quiet | sed 's/^/  bench: /'
kill -INT "$agent_pid"   # Ctrl-C: the agent still writes its report
wait "$agent_pid" || { cat "$work/agent.err" >&2; echo "demo: the agent failed" >&2; exit 2; }
agent_pid=
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=

# The same trace as HTML (plots) and JSON: `report` reads the trace back.
"$build/latency-doctor" report "$out/demo.ldtrace" --client "$out/client.jsonl" --format html -o "$out/report.html" 2>/dev/null
"$build/latency-doctor" report "$out/demo.ldtrace" --client "$out/client.jsonl" --format json -o "$out/report.json" 2>/dev/null
done_at=$(date +%s.%N)

echo
echo "=============== latency-doctor attach --pid $target_pid ==============="
cat "$out/report.txt"
echo "======================================================================="
echo "demo: HTML report (plots, one offline file): $out/report.html"
echo "demo: also $out/report.json, the trace $out/demo.ldtrace (latency-doctor report $out/demo.ldtrace)"
echo "      and the client's token log $out/client.jsonl"
awk -v a="$started" -v b="$built" -v c="$done_at" \
  'BEGIN { printf "demo: %.0f s in all: %.0f s to install and build, %.0f s for the demo itself\n", c - a, b - a, c - b }'
