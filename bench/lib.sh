# Shared by bench/run.sh, bench/compare.sh and bench/bpf_cost.sh: the (a) load on the sample
# server, and waiting for an agent to attach. Sourced; needs $ld (the agent binary) and $work
# (a scratch directory).

# Starts the server under test; sets server_pid and port. ld-sample-server (per-token compute
# is fixed CPU work), or a real engine: LLAMA_SERVER=llama-server LLAMA_MODEL=FILE.gguf
# (llama.cpp on the CPU, 2 slots, LLAMA_THREADS threads (1); built by hand, docs/performance.md
# "On a real engine").
start_server() {
  if [ -n "${LLAMA_SERVER:-}" ]; then
    port=${LLAMA_PORT:-18080}
    # llama-server listens with SO_REUSEPORT: a second one on the port starts fine and the
    # kernel spreads the load's connections over both, so a stale server would take requests.
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "start_server: a server already answers on port $port (a stale llama-server? pgrep -a llama-server)" >&2
      return 1
    fi
    "$LLAMA_SERVER" -m "${LLAMA_MODEL:?LLAMA_MODEL: the model for LLAMA_SERVER}" --port "$port" \
      -t "${LLAMA_THREADS:-1}" --parallel 2 -c 4096 --ignore-eos >"$work/server.out" 2>&1 &
    server_pid=$!
    for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return; sleep 0.1; done
    echo "start_server: llama-server did not come up (see $work/server.out)" >&2
    return 1
  fi
  "${BUILD_DIR:-./build}/ld-sample-server" --port 0 --token-ms 2 --tokens 100 --prefill-base-ms 5 \
    >"$work/server.out" 2>/dev/null &
  server_pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
  port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out")
}

# Stops the server under test: SIGTERM, then SIGKILL after 5 s (llama-server can hang on its
# way out, and one left behind shares the next run's port).
stop_server() {
  [ -n "${server_pid:-}" ] || return 0
  kill "$server_pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
}

# One bench run (REQUESTS x 100 tokens at CONCURRENCY, defaults 60 and 2: ~6 s) with its
# token log written to $1; prints "tokens_per_s tpot_p99_ms server_cpu_ms_per_token". The
# server's CPU per token is the steadier measure on a shared VM: its token work is fixed, so
# what the probes add in its context (tracepoints, sampling interrupts) shows there, while
# tokens/s also moves with the host's noise.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() {
  local before after
  before=$(cpu_ticks "$server_pid")
  "$ld" bench --url "http://127.0.0.1:$port/v1/completions" --requests "${2:-60}" \
    --concurrency "${3:-2}" --max-tokens 100 --quiet --tokens-out "$1" >"$work/bench.txt"
  after=$(cpu_ticks "$server_pid")
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    '/^tokens\/s/ {t=$2} /^TPOT P99/ {p=$4} /^tokens / {n=$2}
     END {printf "%s %s %.4f\n", t, p, (n > 0 ? ticks * 1000 / hz / n : 0)}' "$work/bench.txt"
}

# Waits up to 20 s for the agent whose stderr is $1 to say it attached; 1 (with that stderr
# shown) if it did not.
wait_attached() {
  for _ in $(seq 400); do grep -q "attached to pid" "$1" && return 0; sleep 0.05; done
  cat "$1" >&2
  return 1
}

# The hypervisor's steal time of both CPUs so far, in USER_HZ ticks (/proc/stat): what the
# host took from this VM. On a stealing host a run's TPOT p99 follows it (docs/performance.md,
# "Method"): recorded so that a run the host hit can be told apart.
steal_ticks() { awk '/^cpu /{print $9}' /proc/stat; }
# The steal since steal_ticks gave $1, in ms.
steal_ms_since() { echo $((($(steal_ticks) - $1) * 1000 / $(getconf CLK_TCK))); }

# load, with the run's steal time appended (ms) to $work/steal_$1: steal_load COND LOG [...]
steal_load() {
  local cond=$1 s0
  shift
  s0=$(steal_ticks)
  load "$@"
  steal_ms_since "$s0" >>"$work/steal_$cond"
}
