#!/usr/bin/env bash
# Benchmarks of the agent, measured side by side in one run (docs/performance.md):
#   (a) overhead: token throughput and p99 TPOT of the sample target under `bench` load,
#       paired A/B runs without the agent and with the default probes;
#   (b) the same load under libbpf-tools runqlat + offcputime + biolatency + syscount;
#   (c) event-pipeline stress, 0 lost while writing a trace: the sock probe under a socket
#       workload (the producer side: what a traced syscall costs), and the pipeline alone
#       (ld-bench-stress-pipeline: ring buffer -> poll loop -> TraceWriter, fed by a BPF
#       producer that costs no syscall per record);
#   (d) agent peak RSS; (e) time to load and attach the probes;
#   (f) analysis of a recorded trace: events/s and peak RSS of `report` (bench/analysis.sh).
# Usage: sudo bash bench/run.sh [PAIRS] [STRESS_SECONDS] [ANALYSIS_RECORDS]
#        (defaults 5, 60 and 30000000)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-5}
stress_seconds=${2:-60}
analysis_records=${3:-30000000}
bash scripts/setup.sh >/dev/null
command -v runqlat.bpf >/dev/null 2>&1 || command -v runqlat >/dev/null 2>&1 || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libbpf-tools >/dev/null 2>&1 || true; }

ld=./build/latency-doctor
work=$(mktemp -d)
results=bench/results
mkdir -p "$results"
out="$results/latest.md"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

. bench/lib.sh  # start_server, load

# Starts the agent with default probes; waits until attached.
start_agent() {
  /usr/bin/time -f "%M" -o "$work/agent.rss" "$ld" attach --pid "$server_pid" --duration 10m \
    --format json -o "$work/agent.json" 2>"$work/agent.err" &
  agent_pid=$!
  wait_attached "$work/agent.err" 2>/dev/null || true  # (e) and the A/B runs report what it did
  sleep 1  # the steady state an agent left on runs in, not its start (attach is (e))
}
stop_agent() {
  pkill -INT -P "$agent_pid" 2>/dev/null || true  # the agent runs under /usr/bin/time
  wait "$agent_pid" 2>/dev/null || true
  sed -n 's/.* in \([0-9]*\) ms;.*/\1/p' "$work/agent.err" >>"$work/attach_ms"
  cat "$work/agent.rss" >>"$work/rss_kb"
  python3 - "$work/agent.json" >>"$work/lost" <<'PY' || echo "?" >>"$work/lost"
import json, sys
r = json.load(open(sys.argv[1]))
print(sum(p.get("lost", 0) for p in r["probes"]))
PY
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
mean_of() { awk '{s += $1} END {if (NR) printf "%.1f", s / NR; else print "n/a"}' "$work/$1" 2>/dev/null || echo n/a; }

start_server
load "$work/tok_warm.jsonl" >/dev/null  # warm-up
: >"$work/none"; : >"$work/with"; : >"$work/attach_ms"; : >"$work/rss_kb"; : >"$work/lost"
echo "bench: (a) $pairs paired runs, without / with the agent (order alternates)"
for i in $(seq "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then
    steal_load none "$work/tok_none_$i.jsonl" >>"$work/none"; start_agent
    steal_load with "$work/tok_with_$i.jsonl" >>"$work/with"; stop_agent
  else
    start_agent; steal_load with "$work/tok_with_$i.jsonl" >>"$work/with"; stop_agent
    steal_load none "$work/tok_none_$i.jsonl" >>"$work/none"
  fi
done
logs() { for i in $(seq "$pairs"); do printf '%s,' "$work/tok_$1_$i.jsonl"; done; }
# TPOT p99 over the gaps of all runs of a condition (bench/tpot_pool.py says why).
python3 bench/tpot_pool.py "$(logs none)" "$(logs with)" >"$work/pool_with"
tput_none=$(cut -d' ' -f1 "$work/none" | median); tput_with=$(cut -d' ' -f1 "$work/with" | median)
p99_none=$(cut -d' ' -f2 "$work/none" | median); p99_with=$(cut -d' ' -f2 "$work/with" | median)
cpu_none=$(cut -d' ' -f3 "$work/none" | median); cpu_with=$(cut -d' ' -f3 "$work/with" | median)
# Paired: each with-run against the without-run next to it (the host's drift cancels).
paired_tput=$(paste -d' ' "$work/none" "$work/with" | awk '{print ($4 / $1 - 1) * 100}' | median)
paired_p99=$(paste -d' ' "$work/none" "$work/with" | awk '{print ($5 / $2 - 1) * 100}' | median)
paired_cpu=$(paste -d' ' "$work/none" "$work/with" | awk '{print ($6 / $3 - 1) * 100}' | median)

echo "bench: (b) the same load under libbpf-tools"
tools_status=""
tool() {  # name args...: Debian ships them as NAME or NAME.bpf
  local name=$1; shift
  local bin; bin=$(command -v "$name.bpf" || command -v "$name" || true)
  if [ -z "$bin" ]; then tools_status+="$name: not installed; "; return; fi
  "$bin" "$@" >"$work/$name.out" 2>&1 &
  echo $! >>"$work/tool_pids"
}
: >"$work/tool_pids"; : >"$work/tools"
tool_secs=$((pairs * 8 + 15))  # outlasts the runs below
tool runqlat -p "$server_pid" "$tool_secs"
tool offcputime -p "$server_pid" "$tool_secs"
tool biolatency "$tool_secs" 1
tool syscount -p "$server_pid" -d "$tool_secs"
sleep 3
for pid in $(cat "$work/tool_pids"); do kill -0 "$pid" 2>/dev/null || true; done
for i in $(seq "$pairs"); do steal_load tools "$work/tok_tools_$i.jsonl" >>"$work/tools"; done
for pid in $(cat "$work/tool_pids"); do kill -INT "$pid" 2>/dev/null || true; done
sleep 1
for name in runqlat offcputime biolatency syscount; do
  [ -f "$work/$name.out" ] || continue
  if grep -qiE "failed|error|unsupported|invalid" "$work/$name.out"; then
    tools_status+="$name: $(grep -iE 'failed|error|unsupported|invalid' "$work/$name.out" | head -1 | cut -c1-100); "
  else
    tools_status+="$name: ran; "
  fi
done
tput_tools=$(cut -d' ' -f1 "$work/tools" | median); p99_tools=$(cut -d' ' -f2 "$work/tools" | median)
python3 bench/tpot_pool.py "$(logs none)" "$(logs tools)" >"$work/pool_tools"
pool() { awk -v k="$2" '$1 == k {$1 = ""; sub(/^ /, ""); print}' "$work/$1"; }
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

echo "bench: (c) event-pipeline stress (sock events, trace written)"
stress_once() {  # rate seconds -> "achieved lost trace_bytes", or "" when the run failed
  local rate=$1 secs=$2
  rm -f "$work/stress.ldtrace" "$work/stress.out"
  ./build/ld-bench-stress-sock "$rate" "$secs" 2 --wait >"$work/stress.out" &
  local wl=$!
  "$ld" record --pid "$wl" --probes sock --duration 10m -o "$work/stress.ldtrace" \
    2>"$work/stress.err" &
  local rec=$!
  wait_attached "$work/stress.err" 2>/dev/null || true  # the sweep reports what it achieved
  kill -USR1 "$wl"
  wait "$wl" || true
  wait "$rec" || true
  local achieved lost
  achieved=$(awk '/^achieved/ {print $2}' "$work/stress.out" 2>/dev/null)
  lost=$("$ld" report "$work/stress.ldtrace" --format json 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(p["lost"] for p in r["probes"]))' 2>/dev/null)
  if [ -z "$achieved" ] || [ -z "$lost" ]; then
    echo "  (stress run at $rate/s failed: workload said '$(head -c 200 "$work/stress.out" 2>/dev/null)'; recorder: $(tail -n 2 "$work/stress.err" | tr '\n' ' '))" >&2
    return
  fi
  echo "$achieved $lost $(stat -c %s "$work/stress.ldtrace")"
}
stress() {  # rate seconds -> "achieved lost trace_bytes" (one retry after a failed run)
  local result
  result=$(stress_once "$@")
  [ -n "$result" ] || result=$(stress_once "$@")
  echo "${result:-0 failed 0}"
}
best_rate=0; : >"$work/sweep"
for rate in 100000 200000 400000 800000 1200000 2000000; do
  read -r achieved lost bytes < <(stress "$rate" 10)
  echo "$rate $achieved $lost $bytes" >>"$work/sweep"
  echo "  asked $rate/s: achieved $achieved/s, lost $lost"
  if [ "$lost" = "0" ]; then best_rate=$achieved; else break; fi
  # Stop when the workload itself cannot go faster on this machine.
  awk -v a="$achieved" -v r="$rate" 'BEGIN {exit !(a < 0.8 * r)}' && break
done
read -r sustained sustained_lost sustained_bytes < <(stress "${best_rate%.*}" "$stress_seconds")
raw_max=$(./build/ld-bench-stress-sock 4000000 5 2 | awk '{print $2}')

echo "bench: (c) event pipeline alone (ring buffer -> trace, BPF producer via BPF_PROG_TEST_RUN)"
# rate seconds -> "achieved dropped submitted trace_bytes agent_cpu_pct producer_cpu_pct machine_cpu_pct"
pipeline() {
  ./build/ld-bench-stress-pipeline "$1" "$2" --quiet -o "$work/pipeline.ldtrace" >"$work/pipeline.out" ||
    echo "  (ld-bench-stress-pipeline $1 $2 exited with $?)" >&2
  rm -f "$work/pipeline.ldtrace"
  awk '{v[$1]=$2} END {print v["achieved"], v["dropped"], v["submitted"], v["trace_bytes"],
       v["agent_cpu_pct"], v["producer_cpu_pct"], v["machine_cpu_pct"]}' "$work/pipeline.out"
}
pipe_ok=""; : >"$work/pipe_sweep"
for rate in 250000 500000 1000000 1500000 2000000 2500000 3000000 3500000 4000000 5000000 6000000; do
  read -r achieved dropped submitted bytes agent_cpu producer_cpu machine_cpu < <(pipeline "$rate" 10)
  echo "$rate $achieved $dropped $bytes $agent_cpu $producer_cpu $machine_cpu" >>"$work/pipe_sweep"
  echo "  asked $rate/s: achieved $achieved/s, dropped $dropped, agent CPU $agent_cpu%"
  [ "$dropped" = "0" ] || break
  pipe_ok="$rate $pipe_ok"  # 0-loss rates, best first
  # The producer's own limit: past it, a higher rate measures nothing new.
  awk -v a="$achieved" -v r="$rate" 'BEGIN {exit !(a < 0.9 * r)}' && break
done
# Sustained: the best 0-loss rate of the sweep; when a 10 s step held but the long run drops,
# the next lower one (at most three tries).
: >"$work/pipe_sustained"
for pipe_rate in $(echo ${pipe_ok:-250000} | cut -d' ' -f1-3); do
  read -r pipe_sustained pipe_dropped pipe_submitted pipe_bytes pipe_agent pipe_producer pipe_machine \
    < <(pipeline "$pipe_rate" "$stress_seconds")
  echo "$pipe_rate $pipe_sustained $pipe_dropped $pipe_bytes $pipe_agent $pipe_producer $pipe_machine" >>"$work/pipe_sustained"
  echo "  sustained ${stress_seconds}s at $pipe_rate/s: achieved $pipe_sustained/s, dropped $pipe_dropped"
  [ "$pipe_dropped" = "0" ] && break
done

attach_ms=$(median <"$work/attach_ms"); rss_mb=$(($(sort -n "$work/rss_kb" | tail -1) / 1024))
lost_total=$(paste -sd+ "$work/lost" | bc 2>/dev/null || cat "$work/lost")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.2f%%", (a / b - 1) * 100}'; }
{
  echo "# Benchmark run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs, kernel $(uname -r)"
  echo
  echo "| measure | without agent | with agent (default probes) | libbpf-tools (4 tools) |"
  echo "|---|---|---|---|"
  echo "| tokens/s (median of $pairs) | $tput_none | $tput_with ($(ratio "$tput_with" "$tput_none")) | $tput_tools ($(ratio "$tput_tools" "$tput_none")) |"
  echo "| TPOT p99 ms, pooled gaps of the $pairs runs | $(pool pool_with base_p99_ms) | $(pool pool_with other_p99_ms) ($(pool pool_with p99_ratio_pct)%) | $(pool pool_tools other_p99_ms) ($(pool pool_tools p99_ratio_pct)%) |"
  echo "| TPOT p50 ms, pooled | $(pool pool_with base_p50_ms) | $(pool pool_with other_p50_ms) | $(pool pool_tools other_p50_ms) |"
  echo "| TPOT p99 ms (median of the $pairs runs' p99) | $p99_none | $p99_with ($(ratio "$p99_with" "$p99_none")) | $p99_tools ($(ratio "$p99_tools" "$p99_none")) |"
  echo "| server CPU ms per token (median of $pairs) | $cpu_none | $cpu_with ($(ratio "$cpu_with" "$cpu_none")) | $(cut -d' ' -f3 "$work/tools" | median) |"
  echo
  echo "- pooled TPOT p99 difference, 90% paired bootstrap interval over runs: with agent $(pool pool_with p99_ratio_90ci_pct | sed 's/ / to /')%, libbpf-tools $(pool pool_tools p99_ratio_90ci_pct | sed 's/ / to /')% ($(pool pool_with base_gaps) gaps without, $(pool pool_with other_gaps) with)"
  echo "- paired (median of the $pairs with/without pairs' ratios): tokens/s $(printf '%+.2f' "$paired_tput")%, TPOT p99 $(printf '%+.2f' "$paired_p99")%, server CPU per token $(printf '%+.2f' "$paired_cpu")%"
  echo "- runs (tokens/s, TPOT p99 ms, server CPU ms/token): without: $(paste -sd';' "$work/none"); with: $(paste -sd';' "$work/with")"
  echo "- hypervisor steal per run, both CPUs, mean ms (/proc/stat; a run's p99 follows it): without $(mean_of steal_none), with $(mean_of steal_with), libbpf-tools $(mean_of steal_tools); per run, in the order of the runs above: without $(paste -sd' ' "$work/steal_none"); with $(paste -sd' ' "$work/steal_with")"
  echo "- agent: attach (load + attach all probes) median $attach_ms ms; peak RSS $rss_mb MiB; lost events in the A/B runs: $lost_total"
  echo "- libbpf-tools: $tools_status"
  echo "- stress sweep (asked/s, achieved/s, lost, trace bytes):"
  sed 's/^/  - /' "$work/sweep"
  echo "- sustained ${stress_seconds}s at the best 0-loss rate: achieved $sustained events/s, lost $sustained_lost, trace $sustained_bytes bytes"
  echo "- the stress workload alone, no agent: $raw_max events/s (the machine's ceiling for this workload)"
  echo "- pipeline alone (ld-bench-stress-pipeline, real record mix, 16 MiB ring buffer, trace written): asked/s, achieved/s, dropped, trace bytes, agent CPU %, producer CPU %, machine busy % (of one core, all CPUs):"
  sed 's/^/  - /' "$work/pipe_sweep"
  [ "$(wc -l <"$work/pipe_sustained")" -gt 1 ] &&
    echo "- pipeline sustained runs that dropped (asked/s, achieved/s, dropped, ...): $(head -n -1 "$work/pipe_sustained" | paste -sd';')"
  echo "- pipeline sustained ${stress_seconds}s at $pipe_rate/s: achieved $pipe_sustained records/s, submitted $pipe_submitted, dropped $pipe_dropped, trace $pipe_bytes bytes, agent CPU $pipe_agent% of a core (producer $pipe_producer%, machine busy $pipe_machine%)"
} | tee "$out"

# (f) appends its own section to $out.
bash bench/analysis.sh "$analysis_records"
