#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a bounded time.
# Usage: scripts/fuzz.sh [seconds-per-target]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
werror=OFF
[ "${LD_WERROR:-0}" = 1 ] && werror=ON  # as scripts/setup.sh: clang's warnings are errors too
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLD_FUZZ=ON \
  -DLD_BUILD_TESTS=OFF -DLD_WERROR="$werror" >/dev/null
cmake --build build-fuzz --target ld_fuzzers -j"$(nproc)" >/dev/null
status=0
for target in build-fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  name=$(basename "$target")
  corpus="build-fuzz/corpus-$name"
  mkdir -p "$corpus"
  seeds="tests/fuzz/seeds/${name#fuzz_}"
  args=("$corpus")
  [ -d "$seeds" ] && args+=("$seeds")
  echo "fuzz: $name for ${seconds}s"
  if ! "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/$name-" "${args[@]}" >"build-fuzz/$name.log" 2>&1; then
    echo "fuzz: $name FAILED (see build-fuzz/$name.log)"; tail -40 "build-fuzz/$name.log"; status=1
  else
    grep -E "stat::number_of_executed_units" "build-fuzz/$name.log" | sed "s/^/fuzz: $name /"
  fi
done
exit $status
