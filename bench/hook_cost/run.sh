#!/usr/bin/env bash
# What the agent's hooks cost processes it does not trace, per call, and what other ways of
# hooking the same syscalls would cost (docs/performance.md, "Per call" and "Per-syscall
# tracepoints, not one raw dispatcher"). Each condition attaches its hooks to an idle `sleep`
# (every filter fails) and times bench/hook_cost/syscall_loop.c on CPU 1; conditions alternate
# over ROUNDS rounds and each prints its median over rounds, and the difference to `none`.
#
# Usage: sudo bash bench/hook_cost/run.sh [ROUNDS] [CALLS]     (defaults 3 and 1000000)
# Conditions: none; `agent:PROBES` (latency-doctor attach --probes PROBES on the idle
# process) for each probe family and all; `pe-exit` (one perf-event sys_exit_read
# tracepoint, as the agent hooks); `raw-exit` (one tp_btf sys_exit program for every
# syscall, dispatching on the number); `raw-both` (that and one on sys_enter); `raw-both-x5`
# (five of each: one per family that hooks syscalls); `sock-tp` (tp_btf on
# sock_send_length/sock_recv_length, 6.3+); `agent-exits:PROBES` (the agent with the sock
# probe on the syscall exits older kernels get, --sock-hook syscall-exits). Environment: CONDS="..."
# runs those conditions only (none first). Do not run anything else meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
calls=${2:-1000000}
bash scripts/setup.sh >/dev/null
out=build/hook_cost
mkdir -p "$out"
[ "$(uname -m)" = x86_64 ] || { echo "hook_cost: the variants use x86-64 syscall numbers" >&2; exit 2; }
# build/bpf holds the vmlinux.h the agent's build generated (scripts/setup.sh)
clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Ibuild/bpf -Ibpf -c bench/hook_cost/hook_variants.bpf.c \
  -o "$out/hook_variants.bpf.o"
cc -O2 -Wall -o "$out/load_variants" bench/hook_cost/load_variants.c -lbpf
cc -O2 -Wall -o "$out/syscall_loop" bench/hook_cost/syscall_loop.c
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

sleep 100000 &
idle=$!
holder=""
cleanup() {
  [ -z "$holder" ] || { kill -INT "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true; }
  kill "$idle" 2>/dev/null || true
}
trap cleanup EXIT

# The hook_variants.bpf.c programs of each variant condition (NAME:COPIES).
declare -A variants=(
  [pe-exit]="pe_exit_read:1" [raw-exit]="raw_exit:1" [raw-both]="raw_exit:1 raw_enter:1"
  [raw-both-x5]="raw_exit:5 raw_enter:5" [sock-tp]="sock_send:1 sock_recv:1")

# Starts the condition's hooks in the background ($holder), waiting until attached.
attach() {
  local cond=$1 log=$out/holder.err
  : >"$log"
  case "$cond" in
    none) return 0 ;;
    agent:* | agent-exits:*)
      local hook=auto
      [[ $cond != agent-exits:* ]] || hook=syscall-exits
      ./build/latency-doctor attach --pid "$idle" --probes "${cond#*:}" --sock-hook "$hook" \
        --duration 1h --format json -o "$out/agent.json" 2>"$log" & ;;
    *) [ -n "${variants[$cond]:-}" ] || { echo "hook_cost: unknown condition $cond" >&2; exit 2; }
       # shellcheck disable=SC2086  # a list of NAME:COPIES
       "$out/load_variants" "$out/hook_variants.bpf.o" ${variants[$cond]} 2>"$log" & ;;
  esac
  holder=$!
  for _ in $(seq 100); do
    # the agent's "attached to pid", the loader's "attached"
    grep -Eq '^attached$|attached to pid' "$log" && { sleep 0.5; return 0; }
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.1
  done
  # A probe this host lacks (cpufreq without cpufreq) is left out, with the agent's reason.
  echo "hook_cost: $cond left out, it did not attach: $(tail -1 "$log")" >&2
  detach
  return 1
}

detach() {
  [ -z "$holder" ] || { kill -INT "$holder" 2>/dev/null; wait "$holder" || true; holder=""; }
}

conds=(none agent:sched agent:sock agent:perf agent:memory agent:disk agent:gil agent:futex
       agent:tcp agent:cgroup agent:reclaim agent:cpufreq agent:all pe-exit raw-exit raw-both
       raw-both-x5 sock-tp)
[ -z "${CONDS:-}" ] || read -r -a conds <<<"$CONDS"
results=$out/results
: >"$results"
for r in $(seq "$rounds"); do
  for cond in "${conds[@]}"; do
    attach "$cond" || continue
    echo "$cond $("$out/syscall_loop" "$calls")" >>"$results"
    detach
  done
  echo "hook_cost: round $r of $rounds done" >&2
done
python3 - "$results" "${conds[@]}" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows.setdefault(name, []).append([float(v) for v in vals])
med = {c: [statistics.median(col) for col in zip(*rows[c])] for c in rows}
base = med["none"]
print(f"{'condition':<16} {'getppid':>9} {'read':>9} {'pipe rt':>9} {'unix rt':>9}   (ns, median of {len(rows['none'])} rounds; +ns against none)")
for c in sys.argv[2:]:
    if c not in med:
        continue
    m = med[c]
    cells = " ".join(f"{v:9.0f}" for v in m)
    delta = " ".join(f"{v - b:+7.0f}" for v, b in zip(m, base))
    print(f"{c:<16} {cells}   {delta if c != 'none' else ''}")
PY
