#!/usr/bin/env bash
# What `top` costs (docs/performance.md, "top"): the agent's own CPU, as a share of one CPU,
# while the sample server streams under bench, beside `attach --read-interval 1s` (the same
# wake-ups without the live model) in the same round. Two loads: a clean server (the
# attribution never runs) and one whose every 10th token fsyncs for 300 ms (a slow token every
# second or so: the attribution runs at most once a second). top runs on a real terminal
# (a tmux pane, the screen drawn every second) and in line mode.
# Usage: sudo bash bench/top_cost.sh [ROUNDS] [REQUESTS]   (defaults 3 120: ~12 s a clean run;
#        the fsync load runs a quarter of the requests: each stall appends ~20 MiB to its log)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
requests=${2:-120}
bash scripts/setup.sh latency-doctor ld-sample-server >/dev/null
command -v tmux >/dev/null || { echo "top_cost: needs tmux (apt-get install tmux)" >&2; exit 2; }
ld=$PWD/build/latency-doctor
work=$(mktemp -d)
sock=ld-top-cost-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; kill "${server_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh
hz=$(getconf CLK_TCK)

# Starts the agent of condition $1 on $server_pid; sets agent_pid once it has attached.
start_agent() {
  case $1 in
    attach) "$ld" attach --pid "$server_pid" --duration 10m --read-interval 1s -q -o /dev/null 2>"$work/agent.err" &
            agent_pid=$! ;;
    top-lines) "$ld" top --pid "$server_pid" --lines >"$work/top.out" 2>"$work/agent.err" &
            agent_pid=$! ;;
    top-screen) tmux -L "$sock" new-session -d -x 160 -y 48 "$ld top --pid $server_pid"
            for _ in $(seq 100); do agent_pid=$(pgrep -n -f "latency-doctor top --pid $server_pid$" || true)
              [ -n "$agent_pid" ] && break; sleep 0.1; done ;;
  esac
  sleep 8  # attached well before this (BPF load and attach take 1-4 s here)
}
stop_agent() {
  kill -INT "$agent_pid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.1; done
  tmux -L "$sock" kill-server 2>/dev/null || true
}

echo "load condition round agent_cpu_percent_of_one_cpu"
for fault in clean fsync; do
  if [ "$fault" = fsync ]; then
    "./build/ld-sample-server" --port 0 --token-ms 2 --tokens 100 --prefill-base-ms 5 --fault disk_io \
      --fault-every 10 --fault-ms 300 --fault-file "$work/fault.log" >"$work/server.out" 2>/dev/null &
    server_pid=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
    port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
  else
    start_server
  fi
  for round in $(seq "$rounds"); do
    for cond in attach top-lines top-screen; do
      start_agent "$cond"
      t0=$(cpu_ticks "$agent_pid"); w0=$(date +%s%N)
      load "$work/tokens.jsonl" "$([ "$fault" = fsync ] && echo $((requests / 4)) || echo "$requests")" 2 >/dev/null
      t1=$(cpu_ticks "$agent_pid"); w1=$(date +%s%N)
      stop_agent
      [ "$fault" = fsync ] && : >"$work/fault.log"  # the fault appends ~20 MiB a stall: keep the disk
      awk -v t=$((t1 - t0)) -v hz="$hz" -v ns=$((w1 - w0)) -v c="$cond" -v f="$fault" -v r="$round" \
        'BEGIN {printf "%s %s %d %.2f\n", f, c, r, t / hz * 1e9 / ns * 100}'
    done
  done
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
done
