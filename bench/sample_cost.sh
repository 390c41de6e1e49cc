#!/usr/bin/env bash
# What an on-CPU sample costs the task it interrupts (docs/performance.md): a target of two
# threads pinned one per CPU, each spinning for SECONDS, run without the agent and with
# `--probes perf` at each rate given, in rotating rounds. Two measures per condition:
#  - work: loop iterations done; the work lost at a rate, divided by the samples that rate
#    takes, is the cost of one sample (all of it, cache effects included, but on a shared
#    machine the noise of other tasks is often larger than the effect);
#  - stolen: time taken from the spinning threads by short interruptions (1.5-500 us between
#    two clock reads of the loop; longer ones are other tasks, left out), per second of each
#    thread's run; the paired difference to the same round's run without the agent, divided
#    by the rate, is the time one sample took from the thread (interrupt and program).
# At rates up to HZ the perf probe samples at the scheduler tick; above it, from cpu-clock perf
# events (the probes table says which). RATE:SOURCE asks for a source (--sample-source auto,
# tick or perf-event): `bash bench/sample_cost.sh 11 3 99:tick 99:perf-event` compares the
# two ways at one rate.
# Usage: sudo bash bench/sample_cost.sh [ROUNDS] [SECONDS] [RATE[:SOURCE]...]
#        (defaults 5 3 99 249 999); RAW=1 also prints each run: round, condition, work, stolen.
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
static double stolen_us_per_s[2];
static unsigned long long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ULL + t.tv_nsec; }
static void *run(void *arg) {
  long cpu = (long)arg;
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  while (!go) usleep(1000);
  unsigned long long start = ns(), end = start + (unsigned long long)(secs * 1e9), prev = start, t;
  unsigned long long n = 0, stolen = 0, away = 0;
  volatile unsigned x = 1;
  /* ~0.1-0.3 us of work between clock reads: a longer gap is time taken from the thread */
  while ((t = ns()) < end) {
    unsigned long long gap = t - prev;
    if (gap > 1500) { if (gap < 500000) stolen += gap; else away += gap; }
    prev = t;
    for (int k = 0; k < 100; k++) x = x * 1664525u + 1013904223u;
    n++;
  }
  counts[cpu] = n;
  stolen_us_per_s[cpu] = stolen / 1e3 / ((end - start - away) / 1e9);
  return 0;
}
static void on_usr1(int s) { (void)s; go = 1; }
int main(int argc, char **argv) {
  secs = atof(argv[1]);
  signal(SIGUSR1, on_usr1);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  /* work, and the mean stolen us per second of the two threads */
  printf("%llu %.1f\n", counts[0] + counts[1], (stolen_us_per_s[0] + stolen_us_per_s[1]) / 2);
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
      source_flag=()
      [[ $c != *:* ]] || source_flag=(--sample-source "${c#*:}")
      ./build/latency-doctor attach --pid "$target" --probes perf --sample-hz "${c%%:*}" \
        "${source_flag[@]}" --duration 10m --format json -o "$work/agent.json" 2>"$work/agent.err" &
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
[ -z "${RAW:-}" ] || cat "$work/results"
python3 - "$work/results" "$work/sources" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
sources = dict(l.rstrip("\n").split(" ", 1) for l in open(sys.argv[2]))
work, stolen = {}, {}
for r, c, n, s in rows:
    work.setdefault(c, {})[r] = int(n)
    stolen.setdefault(c, {})[r] = float(s)
base_w, base_s = work["none"], stolen["none"]
print(f"none: {statistics.median(base_s.values()):.0f} us stolen per second of a thread (median)")
print(f"{'rate':>16s} {'work vs none (median)':>22s} {'range':>18s}  us/sample  stolen us/sample  source")
for c in work:
    if c == "none":
        continue
    rate = float(c.split(":")[0])
    lost = [1 - work[c][r] / base_w[r] for r in work[c] if r in base_w]
    med = statistics.median(lost)
    # each thread is sampled `rate` times a second of its CPU time
    us = med * 1e6 / rate
    extra = statistics.median(stolen[c][r] - base_s[r] for r in stolen[c] if r in base_s)
    print(f"{c:>16s} {-med * 100:+21.2f}% [{-max(lost) * 100:+.2f}..{-min(lost) * 100:+.2f}]%  {us:9.1f}  "
          f"{extra / rate:16.1f}  {sources.get(c, '?')}")
PY
