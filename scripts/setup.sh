#!/usr/bin/env bash
# Installs what latency-doctor needs on Debian 12 and builds it into build/ (or $BUILD_DIR).
# Idempotent: safe to run again; installs only what is missing. With arguments, builds only those
# targets (scripts/demo.sh: latency-doctor ld-sample-server); without, everything (tests too).
# Usage: [BUILD_DIR=DIR] [LD_WERROR=1] [LD_SANITIZE=address,undefined] bash scripts/setup.sh [TARGET...]
#   LD_WERROR=1     warnings are errors, C++ and BPF (CMake LD_WERROR; scripts/test.sh sets it);
#                   unset: a build directory keeps what it has, 0: off
#   LD_SANITIZE=... compile and link every target with those sanitizers (CMake LD_SANITIZE)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake make g++ pkg-config            # build
  clang libclang-rt-dev                # BPF objects (-target bpf) and libFuzzer
  libbpf-dev bpftool libelf-dev zlib1g-dev   # CO-RE probes and skeletons
  libfmt-dev libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev
  libtomlplusplus-dev                  # rule files (TOML)
  libdeflate-dev                       # trace chunks: zlib streams, 2-3x zlib's speed
  prometheus-cpp-dev                   # serve: the /metrics endpoint (core + pull; push is not linked)
  libgtest-dev util-linux              # tests (setpriv drops privileges in one)
  nginx-light                          # tests: a real proxy in front of the sample server
  python3.11 python3-fastapi python3-uvicorn   # tests: Python targets (frames, gil), a FastAPI server
  python3-zmq                          # tests: a two-process server shaped like vLLM v1 (ZMQ IPC)
  python3-grpcio python3-hypercorn python3-h2 python3-wsproto  # tests: gRPC, HTTP/2 and WebSocket
  nodejs                               # tests: an HTTP/2 SSE server on Node's own http2 module
  tmux                                 # tests: top driven as a user would (send-keys, capture-pane)
  prometheus                           # tests: a real Prometheus scraping serve
  protobuf-compiler python3-protobuf   # tests: OTLP bodies decoded with the OTLP .proto files
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
  # RUNLEVEL=1: invoke-rc.d starts no service a package brings (nginx: the tests run their own).
  RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Tracepoints are attached through tracefs.
if [ ! -d /sys/kernel/tracing/events ] && [ ! -d /sys/kernel/debug/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || echo "setup: warning: could not mount tracefs" >&2
fi

build_dir=${BUILD_DIR:-build}
# Both always passed, so that a build directory follows the environment of each run. With
# LD_WERROR unset a build directory keeps its own setting: a benchmark script that calls this
# must not flip it and rebuild the whole tree.
werror=OFF
if [ -z "${LD_WERROR+set}" ] && [ -f "$build_dir/CMakeCache.txt" ]; then
  grep -q '^LD_WERROR:BOOL=ON$' "$build_dir/CMakeCache.txt" && werror=ON
elif [ "${LD_WERROR:-0}" = 1 ]; then
  werror=ON
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLD_WERROR="$werror" \
  -DLD_SANITIZE="${LD_SANITIZE:-}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$build_dir" -j"$(nproc)" --target "$@"
else
  cmake --build "$build_dir" -j"$(nproc)"
fi
echo "setup: built $build_dir/latency-doctor"
