#!/usr/bin/env bash
# What each BPF program of the agent costs under the (a) load (bench/lib.sh), from the kernel's
# own accounting (kernel.bpf_stats_enabled: run count and run time per program). Steadier than
# the TPOT percentiles: it counts the work, not its effect through the scheduler. It does not
# include the tracepoint machinery around a program (perf_syscall_enter and the like).
#
# Usage: sudo bash bench/bpf_cost.sh [PROBES] [REQUESTS] [ATTACH_FLAGS...]
#        (defaults all and 60: ~6 s of load); e.g. bench/bpf_cost.sh perf 30 --sample-hz 249
# Environment: AGENT=PATH measures another agent binary (an older build, side by side)
# Prints the total and, per program, runs, ms and ns per run over the load.
set -euo pipefail
cd "$(dirname "$0")/.."
probes=${1:-all}
requests=${2:-60}
shift $(($# < 2 ? $# : 2))
bash scripts/setup.sh >/dev/null
ld=${AGENT:-./build/latency-doctor}  # AGENT: another build, to compare
work=$(mktemp -d)
. bench/lib.sh  # start_server, load
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
agent=""
cleanup() {
  sysctl -qw kernel.bpf_stats_enabled="$stats_before"
  [ -z "$agent" ] || { kill -INT "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true; }
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
start_server
"$ld" attach --pid "$server_pid" --probes "$probes" "$@" --duration 10m --format json \
  -o "$work/agent.json" 2>"$work/agent.err" &
agent=$!
wait_attached "$work/agent.err" || exit 2
sleep 1
sysctl -qw kernel.bpf_stats_enabled=1
bpftool prog show -j >"$work/before.json"
read -r tput p99 cpu < <(load "$work/tokens.jsonl" "$requests" 2)
bpftool prog show -j >"$work/after.json"
sysctl -qw kernel.bpf_stats_enabled="$stats_before"
echo "load: $requests requests, $tput tokens/s, TPOT p99 $p99 ms, server CPU $cpu ms/token"
# The agent's report says how many records each probe wrote (the perf probe: its samples).
kill -INT "$agent"
wait "$agent" 2>/dev/null || true
agent=""
python3 - "$work/before.json" "$work/after.json" "$(grep -c '"event": *"token"' "$work/tokens.jsonl" || true)" "$work/agent.json" <<'PY'
import json, sys
before = {p["id"]: p for p in json.load(open(sys.argv[1]))}
rows = []
for p in json.load(open(sys.argv[2])):
    if not p.get("name", "").startswith("ld_"):
        continue  # not ours
    b = before.get(p["id"], {})
    runs = p.get("run_cnt", 0) - b.get("run_cnt", 0)
    ns = p.get("run_time_ns", 0) - b.get("run_time_ns", 0)
    if runs:
        rows.append((ns, runs, p["name"], p.get("type", "")))
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
tokens = int(sys.argv[3] or 0)
per_token = f", {total / tokens / 1000:.2f} us per token ({tokens} tokens)" if tokens else ""
print(f"BPF run time over the load: {total / 1e6:.2f} ms{per_token}")
for ns, runs, name, kind in rows:
    print(f"  {name:24s} {kind:15s} {runs:9d} runs {ns / 1e6:8.2f} ms {ns / runs:7.0f} ns/run")
# Per perf sample: the tick program's whole time (ticks it skipped included) over the samples
# it wrote, since attach (the samples of the second before the load and of the stop are in).
try:
    probes = {p["name"]: p for p in json.load(open(sys.argv[4])).get("probes", [])}
except (OSError, ValueError):
    probes = {}
tick_ns = sum(ns for ns, _, name, _ in rows if name == "ld_perf_tick")
samples = probes.get("perf", {}).get("events", 0)
if samples and tick_ns:
    print(f"perf: {samples} samples written, {tick_ns / samples:.0f} ns of ld_perf_tick per sample")
PY
