#!/usr/bin/env bash
# (f) Analysis of a recorded trace: events/s of `report`'s read + analyse path on one
# core, and its peak RSS (docs/performance.md). Two inputs:
#   - a real trace: `record` of ld-sample-server (a disk_io fault every 1000 tokens) for 20 s
#     under `bench` load;
#   - a large synthetic trace (RECORDS records) written with the real TraceWriter, in the
#     record-type proportions of the real one (ld-bench-analysis generate --mix).
# Appends the table to bench/results/latest.md. Run by bench/run.sh, or alone:
# Usage: sudo bash bench/analysis.sh [RECORDS] [REPEAT]     (defaults 30000000 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-30000000}
repeat=${2:-3}
ld=./build/latency-doctor
tool=./build/ld-bench-analysis
for bin in "$ld" "$tool" ./build/ld-sample-server; do
  [ -x "$bin" ] || { echo "bench/analysis.sh: $bin missing; build it first:" \
    "cmake --build build --target ld-bench-analysis latency-doctor ld-sample-server" >&2; exit 1; }
done
out=bench/results/latest.md
mkdir -p bench/results
work=$(mktemp -d)
server_pid=""
# LD_BENCH_KEEP=DIR keeps the two traces there (to profile or re-measure the same inputs).
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  if [ -n "${LD_BENCH_KEEP:-}" ] && [ -f "$work/synthetic.ldtrace" ]; then
    mkdir -p "$LD_BENCH_KEEP" && mv "$work"/*.ldtrace "$LD_BENCH_KEEP"/
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "bench: (f) analysis: recording a real trace (20 s)"
./build/ld-sample-server --port 0 --token-ms 2 --tokens 100 --prefill-base-ms 5 \
  --fault disk_io --fault-ms 300 --fault-every 1000 --fault-file "$work/fault.log" \
  >"$work/server.out" 2>/dev/null &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
"$ld" record --pid "$server_pid" --duration 20s -o "$work/real.ldtrace" 2>"$work/record.err" &
rec=$!
. bench/lib.sh  # wait_attached
wait_attached "$work/record.err" || exit 2
# More load than 20 s can serve: the recording ends first, then the load is stopped.
"$ld" bench --url "http://127.0.0.1:$port/v1/completions" --requests 400 --concurrency 2 \
  --max-tokens 100 --quiet >/dev/null 2>&1 &
load=$!
wait "$rec"
kill "$load" 2>/dev/null || true
wait "$load" 2>/dev/null || true
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

echo "bench: (f) analysis: generating a synthetic trace of $records records"
"$tool" generate "$work/synthetic.ldtrace" --records "$records" --mix "$work/real.ldtrace" \
  2>"$work/generate.err"
tail -1 "$work/generate.err"
# The generated file's pages are still being written back: measure the analysis, not that.
sync
sleep 2

echo "bench: (f) analysis: measuring ($repeat runs each)"
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_gib=$(awk '/^MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
{
  echo
  echo "## (f) Analysis of a recorded trace, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Machine: $(nproc) CPUs ($cpu_model), ${mem_gib} GiB, kernel $(uname -r)."
  echo "real.ldtrace: \`record\` of ld-sample-server (--token-ms 2, a 300 ms disk_io fault every"
  echo "1000 tokens) for 20 s under \`bench -c 2\`. synthetic.ldtrace: $(tail -1 "$work/generate.err" |
    sed 's/^wrote [^:]*: //'), in real.ldtrace's mix."
  echo
  "$tool" measure "$work/real.ldtrace" "$work/synthetic.ldtrace" --repeat "$repeat"
} | tee -a "$out"
