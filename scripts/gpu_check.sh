#!/usr/bin/env bash
# On a host with an NVIDIA GPU, PyTorch, transformers and aiohttp, as root: does the agent split a
# real PyTorch server's tokens into the engine's CPU time and its GPU waits? Three runs of
# tests/target/torch_server.py (a random-weight GPT-2-size model in fp16, one engine thread per
# request, an aiohttp loop in front), each attached for one bench run:
#   clean  the typical token is the engine's CPU time and GPU waits, not `gil`
#   slow   every 8th step queues ~210 ms more GPU work: outliers' top cause `gpu_busy`
#   stall  every 8th step the engine spends 250 ms in Python first: outliers' top cause is
#          CPU-side (not `gpu_busy`), with the GPU's idle time as evidence
# Prints the probes, the typical token, the outliers' top causes and the findings per run, and a
# PASS/FAIL line per check; then the cost: the clean load's TPOT without the agent, with it, and
# with --cuda-launches off. The reports stay in $OUT (else gpu-check/). Exit 0 when all pass.
# Prepare here with scripts/gpu_carry.sh; the device tool then runs this with carry [".gpu"].
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
mkdir -p "$out"
ld=$PWD/.gpu/latency-doctor
py=${PYTHON:-python3}
requests=${GPU_CHECK_REQUESTS:-12}
tokens=${GPU_CHECK_TOKENS:-64}
[ -x "$ld" ] || { echo "gpu_check: no .gpu/latency-doctor: run scripts/gpu_carry.sh first and carry .gpu" >&2; exit 1; }
export LD_LIBRARY_PATH=$PWD/.gpu/lib  # the agent's libraries; the Python server keeps its own
echo "kernel $(uname -r)"
nvidia-smi -L 2>/dev/null || echo "gpu_check: nvidia-smi found no GPU"
if [ ! -r /sys/kernel/btf/vmlinux ]; then
  echo "gpu_check: no /sys/kernel/btf/vmlinux: this kernel cannot run the agent (a gVisor sandbox reports 4.4.0)" >&2
  exit 1
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true
"$ld" version
"$ld" audit > "$out/audit.txt" 2>&1 || true

# run NAME [server flags...]: server up, agent attached (with $AGENT_FLAGS; AGENT=none: no
# agent), bench, agent stopped, report summarised.
run() {
  local name=$1
  shift
  local slog="$out/$name-server.log" alog="$out/$name-agent.log"
  PYTHONUNBUFFERED=1 "$py" tests/target/torch_server.py --port 0 "$@" > "$slog" 2>&1 &
  local spid=$! port=""
  for _ in $(seq 1 240); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$slog")
    [ -n "$port" ] && break
    kill -0 $spid 2>/dev/null || break
    sleep 0.5
  done
  if [ -z "$port" ]; then
    echo "FAIL $name: the server did not start"; tail -20 "$slog"; kill $spid 2>/dev/null
    return 1
  fi
  local apid=""
  if [ "${AGENT:-}" != none ]; then
    # shellcheck disable=SC2086  # AGENT_FLAGS is a list of flags
    "$ld" attach --pid $spid --duration 300s ${AGENT_FLAGS:-} --format json -o "$out/$name.json" 2> "$alog" &
    apid=$!
    for _ in $(seq 1 120); do grep -q "attached to pid" "$alog" && break; kill -0 $apid 2>/dev/null || break; sleep 0.5; done
  fi
  "$ld" bench --url "http://127.0.0.1:$port/v1/completions" --requests "$requests" --concurrency 1 \
    --max-tokens "$tokens" > "$out/$name-bench.txt" 2>&1
  [ -n "$apid" ] && { kill -INT $apid 2>/dev/null; wait $apid; }
  kill $spid 2>/dev/null
  wait $spid 2>/dev/null
  grep -E "TTFT P50|TPOT median|TPOT P99|tokens/s|requests failed" "$out/$name-bench.txt" | sed "s/^/  $name bench: /"
  [ -z "$apid" ] && return 0
  "$py" - "$name" "$out/$name.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"FAIL {name}: no report ({e})"); sys.exit(1)
probes = {p["name"]: p for p in r["probes"]}
for n in ("cuda", "nvml", "gil", "perf", "sched", "sock"):
    p = probes.get(n, {})
    print(f"  {name} probe {n}: {p.get('status')} lost {p.get('lost')}: {str(p.get('reason', ''))[:160]}")
a = r.get("agent", {})
print(f"  {name} agent: {a.get('cpu_percent_of_one_cpu', 0):.2f}% of a CPU, peak RSS {a.get('peak_rss_mib')} MiB")
typical = {c["cause"]: c["share"] for c in r["attribution"]["typical"]["causes"]}
print(f"  {name} typical token: " + ", ".join(f"{k} {v:.1%}" for k, v in typical.items()))
outliers = r["outliers"]
tops = [o["causes"][0]["cause"] for o in outliers if o.get("causes")]
counts = {c: tops.count(c) for c in sorted(set(tops))}
print(f"  {name} outliers: {len(outliers)}, top causes {counts}")
for o in outliers[:3]:
    print(f"    {o['kind']} {o['duration_ms']:.1f} ms (baseline {o['baseline_ms']:.1f}): "
          + ", ".join(f"{c['cause']} {c['ms']:.1f}" for c in o["causes"][:3]) + f"; facts {o.get('facts', {})}")
print(f"  {name} findings: {[f['rule'] for f in r['findings']]}")
ok, why = True, ""
entry = str(probes.get("cuda", {}).get("reason", ""))
if probes.get("cuda", {}).get("status") != "attached" or "nothing hooked" in entry:
    ok, why = False, "the cuda probe hooked no CUDA library"
elif name.startswith("clean"):
    engine = typical.get("compute", 0) + typical.get("gpu_busy", 0)
    ok = typical.get("gil", 0) < 0.5 and engine > 0.5
    why = f"gil {typical.get('gil', 0):.1%}, compute + gpu_busy {engine:.1%}"
elif name == "slow":
    ok = len(tops) >= 3 and counts.get("gpu_busy", 0) >= 0.9 * len(tops)
    why = f"{counts.get('gpu_busy', 0)} of {len(tops)} outliers gpu_busy on top"
elif name == "stall":
    host = len(tops) - counts.get("gpu_busy", 0)
    ok = len(tops) >= 3 and host >= 0.9 * len(tops)
    why = f"{host} of {len(tops)} outliers with a CPU-side top cause"
print(f"{'PASS' if ok else 'FAIL'} {name}: {why}")
sys.exit(0 if ok else 1)
PY
}

status=0
run clean || status=1
run slow --slow-every 8 || status=1
run stall --host-stall-every 8 || status=1
# The cost on this server: the same clean load without the agent and with the launches untraced.
AGENT=none run bare
AGENT_FLAGS="--cuda-launches off" run clean-launches-off || status=1
echo "cost (TPOT median, ms): without the agent $(awk '/TPOT median/{print $4}' "$out/bare-bench.txt"), with it $(awk '/TPOT median/{print $4}' "$out/clean-bench.txt"), with --cuda-launches off $(awk '/TPOT median/{print $4}' "$out/clean-launches-off-bench.txt")"
echo "gpu_check: reports in $out; $([ $status = 0 ] && echo 'all checks passed' || echo 'a check failed')"
exit $status
