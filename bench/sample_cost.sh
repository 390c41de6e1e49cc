#!/usr/bin/env bash
# What an on-CPU sample costs the task it interrupts (docs/performance.md): a target of two
# threads pinned one per CPU, each counting loop iterations for SECONDS, run without the agent
# and with `--probes perf` at each rate given, in rotating rounds. The work lost at a rate,
# divided by the samples that rate takes, is the cost of one sample. At rates up to HZ the
# perf probe samples at the scheduler tick; above it, from cpu-clock perf events (the probes
# table says which).
# Usage: sudo bash bench/sample_cost.sh [ROUNDS] [SECONDS] [HZ...]   (defaults 5 3 99 249 999)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
secs=${2:-3}
shift $(($# > 2 ? 2 : $#))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(99 249 999)
bash scripts/setup.sh >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/spin.c" <<'EOF'
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double secs;
static volatile sig_atomic_t go;
static unsigned long long counts[2];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *run(void *arg) {
  long cpu = (long)arg;
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  while (!go) usleep(1000);
  double end = now() + secs;
  unsigned long long n = 0;
  volatile unsigned x = 1;
  do { for (int k = 0; k < 10000; k++) x = x * 1664525u + 1013904223u; n++; } while (now() < end);
  counts[cpu] = n;
  return 0;
}
static void on_usr1(int s) { (void)s; go = 1; }
int main(int argc, char **argv) {
  secs = atof(argv[1]);
  signal(SIGUSR1, on_usr1);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  printf("%llu\n", counts[0] + counts[1]);
  return 0;
}
EOF
cc -O2 -pthread -o "$work/spin" "$work/spin.c"
. bench/lib.sh  # wait_attached
conds=(none "${rates[@]}")
: >"$work/results"
for r in $(seq "$rounds"); do
  for k in $(seq 0 $((${#conds[@]} - 1))); do
    c=${conds[$(((k + r) % ${#conds[@]}))]}
    "$work/spin" "$secs" >"$work/spin.out" &
    target=$!
    sleep 0.2  # its SIGUSR1 handler is in place
    agent=""
    if [ "$c" != none ]; then
      ./build/latency-doctor attach --pid "$target" --probes perf --sample-hz "$c" --duration 10m \
        --format json -o "$work/agent.json" 2>"$work/agent.err" &
      agent=$!
      wait_attached "$work/agent.err" || exit 2
      sleep 0.5
    fi
    kill -USR1 "$target"
    wait "$target"
    if [ -n "$agent" ]; then
      kill -INT "$agent"; wait "$agent" || true
      source=$(python3 -c 'import json,sys; print([p["reason"] for p in json.load(open(sys.argv[1]))["probes"] if p["name"] == "perf"][0].split(" (")[0])' "$work/agent.json")
      echo "$c $source" >>"$work/sources"
    fi
    echo "$r $c $(cat "$work/spin.out")" >>"$work/results"
  done
done
python3 - "$work/results" "$secs" "$work/sources" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
secs = float(sys.argv[2])
sources = dict(l.rstrip("\n").split(" ", 1) for l in open(sys.argv[3]))
by = {}
for r, c, n in rows:
    by.setdefault(c, {})[r] = int(n)
base = by["none"]
print(f"{'rate':>6s} {'work vs none (median)':>22s} {'range':>18s}  us per sample  source")
for c, d in by.items():
    if c == "none":
        continue
    lost = [1 - d[r] / base[r] for r in d if r in base]
    med = statistics.median(lost)
    # two threads, each sampled `rate` times a second of its CPU time
    us = med * 1e6 / float(c)
    print(f"{c:>6s} {-med * 100:+21.2f}% [{-max(lost) * 100:+.2f}..{-min(lost) * 100:+.2f}]%  {us:12.1f}  {sources.get(c, '?')}")
PY
