#!/usr/bin/env bash
# Soak test of `latency-doctor serve` (not in CI): the sample server under continuous bench
# load for DURATION seconds with serve attached (found by --listen-port, as deployed), sampling
# serve's RSS, CPU and the flight recorder's disk use every INTERVAL seconds. After WARMUP
# seconds (the flight recorder's --flight-keep plus a segment: its disk use is then at its
# steady state) RSS and the segments' disk must stay within 10% of their mean. Prints a summary (exit 1 when either is not within
# 10%); the samples go to OUT/soak.tsv.
#
# Usage: sudo bash bench/soak.sh [DURATION=3600] [WARMUP=1200]
# Environment: KEEP (flight recorder --flight-keep, 15m), INTERVAL (30), OUT (a directory to keep),
#   SERVE_ARGS (more serve flags), BUILD_DIR (the build directory, build; as bench/compare.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-3600}
warmup=${2:-1200}
interval=${INTERVAL:-30}
build=${BUILD_DIR:-build}
ld=$build/latency-doctor
[ -x "$ld" ] && [ -x "$build/ld-sample-server" ] || { echo "soak: build $ld and $build/ld-sample-server first" >&2; exit 2; }
work=${OUT:-$(mktemp -d)}
mkdir -p "$work"
. bench/lib.sh  # start_server, wait_attached
start_server
metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086
# Found as deployed, by a discovery rule (the node's processes scanned every read interval), not --pid.
setsid "$ld" serve --listen-port "$port" --metrics-addr "127.0.0.1:$metrics_port" --flight-dir "$work/flight" \
  --flight-keep "${KEEP:-15m}" --socket "$work/serve.sock" ${SERVE_ARGS:-} 2>"$work/serve.err" &
serve_pid=$!
load_pid=""
trap 'kill $server_pid 2>/dev/null; kill -TERM $serve_pid 2>/dev/null; kill $load_pid 2>/dev/null; true' EXIT
wait_attached "$work/serve.err" || exit 2

# Continuous load: bench runs back to back (each ~6 s, 60 x 100 tokens at concurrency 2).
( while :; do "$ld" bench --url "http://127.0.0.1:$port/v1/completions" --requests 60 --concurrency 2 \
      --max-tokens 100 --quiet >/dev/null 2>&1 || sleep 1; done ) &
load_pid=$!

# The TTFT count from serve's /metrics (python3: curl is not among the packages setup.sh installs).
ttft_count() {
  python3 - "http://127.0.0.1:$metrics_port/metrics" <<'PY' 2>/dev/null || echo 0
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
print(next((l.split()[1] for l in text.splitlines()
            if l.startswith("gen_ai_server_time_to_first_token_seconds_count")), 0))
PY
}

echo -e "t_s\trss_kib\tcpu_s\tflight_bytes\tttft_count\tcapture_bytes" >"$work/soak.tsv"
start=$(date +%s)
hz=$(getconf CLK_TCK)
while :; do
  now=$(date +%s)
  t=$((now - start))
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$serve_pid/status")
  cpu=$(awk -v hz="$hz" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$serve_pid/stat")
  # The segments (bounded by --flight-keep/--flight-max) apart from the captures (bounded by
  # --captures-max: they grow by one a trigger until the cap, so they are shown on their own).
  disk=$(find "$work/flight" -maxdepth 1 -name 'flight-*.ldtrace' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  captures=$(find "$work/flight/captures" -name '*.ldtrace' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}')
  count=$(ttft_count)
  echo -e "$t\t$rss\t$cpu\t$disk\t${count:-0}\t$captures" >>"$work/soak.tsv"
  [ "$t" -ge "$duration" ] && break
  sleep "$interval"
done
kill "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
# The kernel ids of the programs serve holds (/proc/PID/fdinfo), to check none outlives it.
prog_ids=$(cat /proc/"$serve_pid"/fdinfo/* 2>/dev/null | awk '/^prog_id:/ {print $2}' | sort -u)
kill -TERM "$serve_pid"
code=0
wait "$serve_pid" || code=$?
sleep 2  # programs are freed an RCU grace period after their last fd closes
left=0
for id in $prog_ids; do bpftool prog show id "$id" >/dev/null 2>&1 && left=$((left + 1)); done
echo "serve held $(echo "$prog_ids" | wc -w) programs"
status=0
python3 - "$work/soak.tsv" "$warmup" "$code" "$left" <<'PY' || status=$?
import sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:]]
warm = int(sys.argv[2])
after = [r for r in rows if int(r[0]) >= warm]
def spread(col):
    vals = [float(r[col]) for r in after]
    mean = sum(vals) / len(vals)
    return min(vals), max(vals), mean, (max(vals) - min(vals)) / mean * 100 if mean else 0
print(f"soak: {rows[-1][0]} s, {len(rows)} samples, {len(after)} after the {warm} s warm-up")
failed = False
for name, col, unit in (("RSS", 1, "KiB"), ("flight recorder disk", 3, "bytes")):
    lo, hi, mean, pct = spread(col)
    within = mean > 0 and max(hi - mean, mean - lo) / mean <= 0.10
    failed = failed or not within
    ok = "within 10%" if within else "NOT within 10%"
    print(f"  {name}: {lo:.0f}..{hi:.0f} {unit} (mean {mean:.0f}; {ok} of the mean, spread {pct:.1f}%)")
cpu0, cpu1 = float(rows[0][2]), float(rows[-1][2])
print(f"  serve CPU: {cpu1 - cpu0:.1f} s in {int(rows[-1][0]) - int(rows[0][0])} s "
      f"({100 * (cpu1 - cpu0) / max(1, int(rows[-1][0]) - int(rows[0][0])):.2f}% of one CPU)")
print(f"  requests counted (TTFT histogram): {rows[-1][4]}")
print(f"  captures: {int(rows[-1][5])} bytes at the end (bounded by --captures-max, not by the 10% rule)")
print(f"  serve exit code {sys.argv[3]}, programs left loaded {sys.argv[4]}")
sys.exit(1 if failed or sys.argv[3] != "0" or sys.argv[4] != "0" else 0)
PY
echo "samples: $work/soak.tsv"
exit $status
