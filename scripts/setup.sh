#!/usr/bin/env bash
# Installs what latency-doctor needs on Debian 12 and builds it into build/.
# Idempotent: safe to run again; installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake make g++ pkg-config            # build
  clang libclang-rt-dev                # BPF objects (-target bpf) and libFuzzer
  libbpf-dev bpftool libelf-dev zlib1g-dev   # CO-RE probes and skeletons
  libfmt-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev
  libtomlplusplus-dev                  # rule files (TOML)
  libdeflate-dev                       # trace chunks: zlib streams, 2-3x zlib's speed
  libgtest-dev util-linux              # tests (setpriv drops privileges in one)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "setup: run as root to install packages" >&2; exit 2; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Tracepoints are attached through tracefs.
if [ ! -d /sys/kernel/tracing/events ] && [ ! -d /sys/kernel/debug/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || echo "setup: warning: could not mount tracefs" >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/latency-doctor"
