#!/usr/bin/env bash
# The whole test suite: the lint (no build), unit tier (no root), root tier (real BPF probes;
# skips with the reason where BPF is unavailable), then the fuzzers for a bounded time. Every
# build treats warnings as errors.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/lint.sh
export LD_WERROR=1  # scripts/setup.sh and scripts/fuzz.sh: -Werror for C++ and BPF
bash scripts/setup.sh
ctest --test-dir build --output-on-failure --timeout 300 -j1
bash scripts/html_check.sh  # the HTML report in headless Chromium (installs chromium)
# ... and the report of a real fault scenario recorded by the root tier (scenario_test.cpp)
if [ -f build/scenarios/LockHeldByAMetricsThread.ldtrace ]; then
  bash scripts/html_check.sh build/scenarios/LockHeldByAMetricsThread.ldtrace build/html-check/scenario.png
fi
bash scripts/fuzz.sh "${LD_FUZZ_SECONDS:-30}"  # per target; six targets
# No BPF program of ours may outlive the tests.
if command -v bpftool >/dev/null && bpftool prog list 2>/dev/null | grep -q "name ld_"; then
  echo "test: BPF programs named ld_* are still loaded after the tests" >&2
  exit 1
fi
echo "test: all tiers passed"
