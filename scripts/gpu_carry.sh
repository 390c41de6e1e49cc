#!/usr/bin/env bash
# Run here before a GPU check: puts into .gpu/ (ignored by git) what scripts/gpu_check.sh needs
# on a GPU host that has Python, PyTorch, transformers and aiohttp but none of our Debian
# libraries: the stripped agent, and the shared libraries it and libcurl (bench's client) link,
# less the C and C++ runtimes the host has. Then the device tool runs
#   bash scripts/gpu_check.sh        with carry [".gpu"]   (about 25 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/latency-doctor ] || { echo "gpu_carry: build/latency-doctor is missing: build first (bash scripts/setup.sh)" >&2; exit 1; }
rm -rf .gpu
mkdir -p .gpu/lib
strip -o .gpu/latency-doctor build/latency-doctor
curl=$(ldconfig -p | awk '/libcurl.so.4 /{print $NF; exit}')
[ -n "$curl" ] || { echo "gpu_carry: libcurl.so.4 not found (apt-get install libcurl4)" >&2; exit 1; }
{ ldd build/latency-doctor; ldd "$curl"; echo "libcurl.so.4 => $curl (0)"; } |
  awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
du -sh .gpu
