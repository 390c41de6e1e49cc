#!/usr/bin/env bash
# Interleaved comparison of agent configurations under the (a) load of bench/run.sh: one
# sample server, rounds of one run per condition in rotating order, so that the host's drift
# falls on every condition alike (docs/performance.md, "Method").
#
# Usage: sudo bash bench/compare.sh ROUNDS COND...
#   COND: none                       no agent
#         PROBES                     `attach --probes PROBES` (all, sock, sched,perf, ...)
#         PROBES@ARG,ARG             with more attach flags (perf@--sample-hz,499)
#         BINARY:PROBES              another agent binary (an older build, to compare)
#         ...+own                    the agent started by setsid, in an autogroup of its own (last)
#         ...+stop                   the agent SIGSTOPped once attached: its probes stay on in
#                                    the kernel, its user space does nothing during the run
#         serve[@ARG,ARG]            `serve --pid` (the node daemon: default probes, metrics on
#                                    127.0.0.1:$SERVE_PORT (19464), a flight recorder) with
#                                    --window 1s unless ARG gives one: a run is ~7 s, so the
#                                    deployed 10 s window would analyse nothing during it; at 1 s
#                                    the analysis runs 10x as often, each over all since attach
#         dummy[-PROBES]             probes (all, or a comma list) attached to an idle process, not
#                                    the server: every hook on, every filter fails, nothing recorded
#         burn@US                    no agent; bench/burn.py spins US us every 10 ms meanwhile
#                                    (CPU taken with no probe: a control for the agent's CPU);
#                                    its CPU share of one CPU is printed after the summary
# Environment: REQUESTS (60), CONCURRENCY (2), OUT (a directory to keep the token logs in),
#   BUILD_DIR (the build with latency-doctor and ld-sample-server, ./build),
#   TRACE=1: record each run's scheduler events with ftrace (sched_switch, sched_wakeup(_new),
#   sched_migrate_task; trace_clock mono, the token logs' clock) into OUT/trace_ROUND_I.txt.gz
#   and the agent's thread ids into OUT/agenttids_ROUND_I (I: the condition's position), for
#   bench/sched_slices.py: who held the CPU while a server thread waited. It costs every
#   condition alike (~0.1 us an event). Do not run anything else meanwhile: it shows up.
# Prints per condition: median tokens/s, the median of its ratios to the none run of the same
# round, the same for the server's CPU per token, and the pooled gap quantiles
# (bench/gap_tail.py), and the steal time per run (OUT/steal: round, condition, ms).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?rounds}; shift
conds=("$@")
[ ${#conds[@]} -gt 0 ] || { echo "compare: no conditions" >&2; exit 1; }
bash scripts/setup.sh >/dev/null
ld=${BUILD_DIR:-./build}/latency-doctor
work=${OUT:-$(mktemp -d)}
mkdir -p "$work"
: >"$work/results"
: >"$work/steal"
. bench/lib.sh  # start_server, load
start_server
sleep 1000000 &
idle=$!
trap 'stop_server; kill $idle 2>/dev/null || true' EXIT

T=/sys/kernel/tracing
[ -d $T/events ] || T=/sys/kernel/debug/tracing
trace_on() { [ -z "${TRACE:-}" ] || { echo >$T/trace; echo 1 >$T/tracing_on; }; }
trace_off() { [ -z "${TRACE:-}" ] || { echo 0 >$T/tracing_on; gzip -1 -c $T/trace >"$1.gz" 2>/dev/null || true; }; }
trace_restore() {  # the tracing settings as they were
  [ -z "${TRACE:-}" ] || [ -z "${saved_kb:-}" ] || {
    echo 0 >$T/tracing_on; echo 0 >$T/events/sched/enable; echo "$saved_clock" >$T/trace_clock
    echo "$saved_kb" >$T/buffer_size_kb; echo 1 >$T/tracing_on; saved_kb=""; }
}
if [ -n "${TRACE:-}" ]; then
  # Until first used the buffer reads "7 (expanded: 1408)", which cannot be written back.
  saved_kb=$(sed 's/.*expanded: \([0-9]*\).*/\1/' $T/buffer_size_kb)
  saved_clock=$(sed 's/.*\[\(.*\)\].*/\1/' $T/trace_clock)
  trap 'trace_restore; stop_server; kill $idle 2>/dev/null || true' EXIT
  echo 0 >$T/tracing_on
  echo 65536 >$T/buffer_size_kb  # per CPU: a run's ~20k events with room to spare
  echo mono >$T/trace_clock
  echo >$T/set_event
  for e in sched_switch sched_wakeup sched_wakeup_new sched_migrate_task; do echo 1 >$T/events/sched/$e/enable; done
fi

run_condition() {  # cond round index
  local cond=$1 agent=$ld pid=$server_pid stop="" own="" probes extra="" ap="" burner=""
  if [[ "$cond" == burn@* ]]; then
    python3 bench/burn.py "${cond#burn@}" >>"$work/burn_${cond#burn@}" &
    burner=$!
    sleep 1  # as the agent's settling
  elif [ "$cond" != none ]; then
    if [[ "$cond" == *:* ]]; then agent=${cond%%:*}; cond=${cond#*:}; fi
    if [[ "$cond" == *+own ]]; then own=1; cond=${cond%+own}; fi
    if [[ "$cond" == *+stop ]]; then stop=1; cond=${cond%+stop}; fi
    probes=${cond%%@*}
    [[ "$cond" == *@* ]] && extra=${cond#*@}
    if [[ "$probes" == dummy || "$probes" == dummy-* ]]; then
      pid=$idle
      probes=${probes#dummy}; probes=${probes#-}; probes=${probes:-all}
    fi
    # shellcheck disable=SC2086  # extra holds flags
    # +own: the agent started by setsid (no fork, the script has no job control), so in an
    # autogroup of its own, as when an operator's shell or a service starts it beside a
    # server; otherwise it shares the script's autogroup with the server and the bench
    # client.
    if [ "$probes" = serve ]; then  # the node daemon instead of attach: metrics, flight recorder
      local window="--window 1s"
      [[ "$extra" == *--window* ]] && window=""
      ${own:+setsid} "$agent" serve --pid "$pid" $window ${extra//,/ } --metrics-addr "127.0.0.1:${SERVE_PORT:-19464}" \
        --flight-dir "$work/flight" --socket "$work/serve.sock" 2>"$work/agent.err" &
    else
    ${own:+setsid} "$agent" attach --pid "$pid" --probes "$probes" ${extra//,/ } --duration 10m --format json \
      -o "$work/agent.json" 2>"$work/agent.err" &
    fi
    ap=$!
    wait_attached "$work/agent.err" || exit 2
    [ -z "$own" ] || [ "$(ps -o sid= -p "$ap" | tr -d ' ')" = "$ap" ] || { echo "compare: setsid forked" >&2; exit 2; }
    sleep 1  # the steady state, as in bench/run.sh
    [ -z "${TRACE:-}" ] || ls "/proc/$ap/task" >"$work/agenttids_$2_$3"
    [ -n "$stop" ] && kill -STOP "$ap"
  fi
  local log="$work/tok_$2_$3.jsonl"
  trace_on
  local tput p99 cpu steal0
  steal0=$(steal_ticks)
  read -r tput p99 cpu < <(load "$log" "${REQUESTS:-60}" "${CONCURRENCY:-2}")
  echo "$2 $1 $tput $cpu $log" >>"$work/results"
  echo "$2 $1 $(steal_ms_since "$steal0")" >>"$work/steal"
  trace_off "$work/trace_$2_$3.txt"
  if [ -n "$ap" ]; then kill -CONT "$ap"; kill -INT "$ap"; wait "$ap" || true; fi
  if [ -n "$burner" ]; then kill -TERM "$burner"; wait "$burner" || true; fi
}

load "$work/warm.jsonl" >/dev/null
n=${#conds[@]}
for r in $(seq "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(((k + r) % n))
    run_condition "${conds[$i]}" "$r" "$i"
  done
done
python3 bench/gap_tail.py "$work/results"
awk '{n[$2]++; s[$2] += $3} END {for (c in n) printf "%s: steal %.1f ms per run (both CPUs)\n", c, s[c] / n[c]}' "$work/steal"
for f in "$work"/burn_*; do  # CPU seconds and wall seconds per run of each burner
  if [ -e "$f" ]; then awk -v n="${f##*/}" '{c += $1; w += $2} END {printf "%s: %.2f%% of one CPU over %d runs\n", n, 100 * c / w, NR}' "$f"; fi
done
[ -z "${TRACE:-}" ] || { trace_restore; python3 bench/sched_slices.py "$work"; }
