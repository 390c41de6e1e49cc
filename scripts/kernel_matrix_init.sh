#!/bin/busybox sh
# PID 1 of a kernel-matrix virtual machine (scripts/kernel_matrix.sh builds the initramfs around
# it). It runs the agent against the sample server on the kernel under test and prints what it
# saw on the serial console as "LDM <key> <value>" lines; files travel as base64 of gzip between
# "LDM-BEGIN name" and "LDM-END". Then it powers the machine off: nothing is written to the host.
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/usr/sbin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
ip link set lo up
. /etc/ld-matrix.env  # BUILD, MODE, SECONDS_ATTACHED, ROOT_TESTS
say() { echo "LDM $*"; }
send_file() {  # name path
  echo "LDM-BEGIN $1"
  gzip -c "$2" | base64
  echo "LDM-END"
}
finish() {
  say done
  sync
  poweroff -f
}

say kernel "$(uname -r)"
"$BUILD/latency-doctor" version >/tmp/version.txt 2>&1
say version_rc $?
sed 's/^/LDM version_out /' /tmp/version.txt

"$BUILD/latency-doctor" audit --format json -o /tmp/audit.json 2>/tmp/audit.err
say audit_rc $?
[ -s /tmp/audit.json ] && send_file audit /tmp/audit.json
head -c 2000 /tmp/audit.err | sed 's/^/LDM audit_err /'

# A lock fault (a metrics thread holds the token lock): the futex, sched and perf probes each
# have a part in its diagnosis, and it needs no disk (the machine has none).
"$BUILD/ld-sample-server" --port 0 --prefill-base-ms 50 --token-ms 20 --tokens 25 --wire llamacpp \
  --fault lock --fault-ms 250 --fault-period-ms 1000 \
  >/tmp/server.out 2>/tmp/server.err &
server=$!
for _ in $(seq 300); do grep -q "listening on" /tmp/server.out && break; sleep 0.1; done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' /tmp/server.out)
say server_port "${port:-none}"
[ -n "$port" ] || { sed 's/^/LDM server_err /' /tmp/server.err; finish; }

"$BUILD/latency-doctor" attach --pid "$server" --duration "${SECONDS_ATTACHED}s" --verbose \
  --format json -o /tmp/report.json >/tmp/agent.out 2>/tmp/agent.err &
agent=$!
# Attach under emulation takes seconds (the verifier runs on an emulated CPU).
for _ in $(seq 1200); do
  grep -q "attached to pid" /tmp/agent.err && break
  kill -0 "$agent" 2>/dev/null || break
  sleep 0.1
done
if grep -q "attached to pid" /tmp/agent.err && [ "$MODE" = full ]; then
  "$BUILD/latency-doctor" bench --url "http://127.0.0.1:$port/v1/completions" --requests 12 \
    --concurrency 2 --max-tokens 25 --tokens-out /tmp/client.jsonl --quiet >/tmp/bench.out 2>&1
  say bench_rc $?
  head -c 2000 /tmp/bench.out | sed 's/^/LDM bench_out /'
fi
wait "$agent"
say attach_rc $?
kill "$server" 2>/dev/null
# The agent's own lines, then libbpf's log (--verbose), bounded: a verifier log can run to
# megabytes.
grep -v '^libbpf: ' /tmp/agent.err >/tmp/agent.lines
send_file agent_err /tmp/agent.lines
grep '^libbpf: ' /tmp/agent.err | tail -c 200000 >/tmp/libbpf.log
send_file libbpf_log /tmp/libbpf.log
[ -s /tmp/report.json ] && send_file report /tmp/report.json
[ -s /tmp/client.jsonl ] && send_file client /tmp/client.jsonl
# The root tests that need neither Python nor a disk (kernel_matrix.sh --tests).
# A test that fails is run once more: one that then passes is reported as flaky (the emulated
# CPU stretches the timings some tests hold to), one that fails twice fails the kernel.
if [ -n "$ROOT_TESTS" ]; then
  (cd /tmp && "$BUILD/ld_root_tests" --gtest_filter="$ROOT_TESTS" --gtest_brief=1 >/tmp/root_tests.out 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    failed=$(sed -n 's/^\[  FAILED  \] \([^ ,]*\).*/\1/p' /tmp/root_tests.out | sort -u | tr '\n' ':')
    (cd /tmp && "$BUILD/ld_root_tests" --gtest_filter="$failed" --gtest_brief=1 >/tmp/root_tests_again.out 2>&1)
    rc=$?
    say root_tests_retried "$(echo "$failed" | tr ':' ' ')"
    sed 's/^/LDM root_tests_again_out /' /tmp/root_tests_again.out | grep -E 'LDM root_tests_again_out \[  (PASSED|FAILED) ' 
    cat /tmp/root_tests_again.out >>/tmp/root_tests.out
  fi
  say root_tests_rc $rc
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|^\[  SKIPPED \]' /tmp/root_tests.out | sed 's/^/LDM root_tests_out /'
  send_file root_tests /tmp/root_tests.out
fi
say left_programs "$(bpftool prog show 2>/dev/null | grep -c ' name ld_')"
say left_links "$(bpftool link show 2>/dev/null | grep -c 'prog ')"
finish
