#!/usr/bin/env bash
# The whole test suite: the lint (no build), unit tier (no root), root tier (real BPF probes;
# skips with the reason where BPF is unavailable), the unit tier again under AddressSanitizer
# and UBSan, then the fuzzers for a bounded time, then the agent on another kernel (Debian 12's
# 6.1 in QEMU, its probes loaded and detached; `--kernels`: the whole matrix, 6.1, 6.12 and
# 5.10, under load with the probe tests: scripts/kernel_matrix.sh). The plain and fuzz builds
# treat warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
kernels=(--load-only 6.1)
case "${1:-}" in
  --kernels) kernels=() ;;
  "") ;;
  *) echo "test: unknown argument '$1' (--kernels: the whole kernel matrix)" >&2; exit 2 ;;
esac
bash scripts/lint.sh
export LD_WERROR=1  # scripts/setup.sh and scripts/fuzz.sh: -Werror for C++ and BPF
bash scripts/setup.sh
ctest --test-dir build --output-on-failure --timeout 300 -j1
# Sanitizer tier: the unit tests (and the latency-doctor they run as a child) built with ASan
# and UBSan in build-asan/: memory errors, leaks and undefined behaviour end the test. Not with
# -Werror: the instrumentation makes GCC's flow warnings misfire (-Wmaybe-uninitialized inside
# libstdc++'s <regex>), and GCC's manual advises against combining the two; the plain build
# above already holds the same sources to -Werror.
LD_WERROR=0 BUILD_DIR=build-asan LD_SANITIZE=address,undefined bash scripts/setup.sh \
  ld_unit_tests ld-sample-server ld_fake_cudart  # the live tests run these beside the tests
ctest --test-dir build-asan -L unit --output-on-failure --timeout 300 -j1
bash scripts/html_check.sh  # the HTML report in headless Chromium (installs chromium)
# ... and the report of a real fault scenario recorded by the root tier (scenario_test.cpp)
if [ -f build/scenarios/LockHeldByAMetricsThread.ldtrace ]; then
  bash scripts/html_check.sh build/scenarios/LockHeldByAMetricsThread.ldtrace build/html-check/scenario.png
fi
bash scripts/fuzz.sh "${LD_FUZZ_SECONDS:-30}"  # per target; eight targets
bash scripts/kernel_matrix.sh "${kernels[@]}"
# No BPF program of ours may outlive the tests.
if command -v bpftool >/dev/null && bpftool prog list 2>/dev/null | grep -q "name ld_"; then
  echo "test: BPF programs named ld_* are still loaded after the tests" >&2
  exit 1
fi
echo "test: all tiers passed"
