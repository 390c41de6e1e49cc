#!/usr/bin/env bash
# The kernel matrix: boots Debian's packaged cloud kernels in QEMU and runs the agent on each
# (docs/building.md, "Other kernels"). Inside each virtual machine, from an initramfs built
# here (busybox, the agent, the sample server, bpftool and their libraries; no disk, no
# network beyond loopback): `latency-doctor version`, `audit`, an `attach` of the sample
# server with a lock fault under `latency-doctor bench` load, the probe root tests, then a count
# of BPF programs and links left behind. The console comes back to this script, which prints
# one verdict per kernel and its probes' states (scripts/kernel_matrix_read.py).
#
# Usage: bash scripts/kernel_matrix.sh [--load-only] [--tests FILTER] [KERNEL...]
#   KERNEL: 6.1 (Debian 12), 6.12 (Debian 13), 5.10 (Debian 11: the agent must refuse it);
#           default: all three
#   --load-only: attach without load (the probes load, verify and detach): the quick check
#   --tests FILTER: then the root tests of that gtest filter (default: the probe tests whose
#           workloads are C++, below; "none": no tests). Tests that need Python, a disk or a
#           GPU stay on the host.
#   LD_KERNEL_CACHE: where the kernels are kept (default build/kernels)
#   LD_MATRIX_TIMEOUT: seconds per kernel (default 900; no KVM here, so QEMU emulates the CPU)
# Exit status: 0 when every kernel gave what it should, 1 otherwise, 2 on a setup failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
build=${BUILD_DIR:-build}
mode=full
# The probe tests whose workloads are C++, less the five that hold a busy loop's samples to a
# user-mode share of >= 95%. On the emulated CPU under 6.1 that loop really spends 5-14% of its
# time in the kernel: every sample source agrees, the cpu-clock perf event (its mode read from
# the interrupted registers) included. 6.12 in the same emulator: 97-100%.
root_tests='SchedProbe.*:FutexProbe.*:MemoryProbe.*:PerfProbe.*:TcpProbe.*:ProbeCoreBtf.*:*/RootWire.*'
# Also left out: the wire that connects anew for each request. The client's TTFT includes its
# connect and the server's accept, 16-20 ms on the emulated CPU (~0.1 ms on the host), and the
# test holds the two TTFTs within 15 ms.
root_tests+='-PerfProbe.Tick*:PerfProbe.CpuClock*:*/RootWire.*closeafterstream*'
kernels=()
while [ $# -gt 0 ]; do
  arg=$1
  shift
  case "$arg" in
    --load-only) mode=load-only ;;
    --tests) root_tests=${1:?--tests needs a gtest filter}; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    5.10|6.1|6.12) kernels+=("$arg") ;;
    *) echo "kernel_matrix: unknown argument '$arg' (kernels: 5.10 6.1 6.12; --load-only, --tests)" >&2; exit 2 ;;
  esac
done
[ ${#kernels[@]} -gt 0 ] || kernels=(6.1 6.12 5.10)
{ [ "$mode" = load-only ] || [ "$root_tests" = none ]; } && root_tests=""
cache=${LD_KERNEL_CACHE:-$build/kernels}
timeout_s=${LD_MATRIX_TIMEOUT:-900}

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx poweroff || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v bpftool >/dev/null || need+=(bpftool)
if [ ${#need[@]} -gt 0 ]; then
  echo "kernel_matrix: installing ${need[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -n "$root_tests" ] && [ ! -x "$build/ld_root_tests" ]; then
  BUILD_DIR=$build bash scripts/setup.sh >/dev/null
elif [ ! -x "$build/latency-doctor" ] || [ ! -x "$build/ld-sample-server" ]; then
  BUILD_DIR=$build bash scripts/setup.sh latency-doctor ld-sample-server >/dev/null
fi
build=$(cd "$build" && pwd -P)

# Debian's cloud kernel of each release, through a private apt configuration: the host's own
# sources stay as they are.
suite_of() {
  case "$1" in
    5.10) echo "bullseye bullseye-security" ;;
    6.1) echo "bookworm bookworm-security" ;;
    6.12) echo "trixie trixie-security" ;;
  esac
}
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial"
cache=$(cd "$cache" && pwd -P)  # apt runs from another directory below
apt_opts=(-o "Dir::Etc::SourceList=$cache/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache=$cache/apt" -o Dir::State::Status=/dev/null
          -o APT::Sandbox::User=root)
fetch_kernel() {  # version -> prints the vmlinuz path
  local version=$1 dir="$cache/$1"
  if [ ! -f "$dir/vmlinuz" ]; then
    : >"$cache/apt/sources.list"
    local suite
    for suite in $(suite_of "$version"); do
      case "$suite" in
        *-security) echo "deb http://deb.debian.org/debian-security $suite main" ;;
        *) echo "deb http://deb.debian.org/debian $suite main" ;;
      esac >>"$cache/apt/sources.list"
    done
    apt-get "${apt_opts[@]}" update >/dev/null
    # The meta-package names the release's current image package.
    local image
    image=$(apt-cache "${apt_opts[@]}" depends linux-image-cloud-amd64 2>/dev/null |
            sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -1)
    [ -n "$image" ] || { echo "kernel_matrix: no cloud kernel found for $version" >&2; return 1; }
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$dir.tmp" && apt-get "${apt_opts[@]}" download "$image" >/dev/null)
    dpkg-deb -x "$dir.tmp"/*.deb "$dir.tmp/x"
    cp "$dir.tmp"/x/boot/vmlinuz-* "$dir.tmp/vmlinuz"
    echo "$image" >"$dir.tmp/package"
    rm -rf "$dir.tmp/x" "$dir.tmp"/*.deb "$dir"
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir/vmlinuz"
}

# One initramfs for every kernel: the binaries at the paths they have here, so that the agent
# finds its rules and the sample server as it would on the host.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,usr/bin,usr/sbin,lib64}
cp /bin/busybox "$root/bin/busybox"
copy_with_libraries() {
  local file lib
  for file in "$@"; do
    mkdir -p "$root$(dirname "$file")"
    cp -L "$file" "$root$file"
    for lib in $(ldd "$file" | grep -o '/[^ ]*'); do
      [ -e "$root$lib" ] && continue
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
  done
}
# libcurl: `latency-doctor bench` loads it at run time (dlopen), so ldd does not list it.
libcurl=$(ldconfig -p | sed -n 's/.*libcurl\.so\.4 (libc6,x86-64) => //p' | head -1)
[ -n "$libcurl" ] || { echo "kernel_matrix: libcurl4 is not installed (apt-get install libcurl4)" >&2; exit 2; }
copy_with_libraries "$build/latency-doctor" "$build/ld-sample-server" "$(command -v bpftool)" "$libcurl"
if [ -n "$root_tests" ]; then
  copy_with_libraries "$build/ld_root_tests" "$build"/ld-wl-*
  strip --strip-debug "$root$build/ld_root_tests" "$root$build"/ld-wl-*
fi
# Without debug info the initramfs is a fifth the size: quicker to unpack on an emulated CPU.
strip --strip-debug "$root$build/latency-doctor" "$root$build/ld-sample-server"
ln -sf "$(command -v bpftool)" "$root/usr/bin/bpftool" 2>/dev/null || true
mkdir -p "$root$repo"
cp -r "$repo/rules" "$root$repo/rules"
[ -e "$build/rules" ] || ln -s "$repo/rules" "$root$build/rules"
cp scripts/kernel_matrix_init.sh "$root/init"
chmod 755 "$root/init"
printf 'BUILD=%s\nMODE=%s\nSECONDS_ATTACHED=%s\nROOT_TESTS=%s\n' "$build" "$mode" \
  "$([ "$mode" = full ] && echo 30 || echo 5)" "'$root_tests'" \
  >"$root/etc/ld-matrix.env"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

mkdir -p "$cache/logs"
status=0
for version in "${kernels[@]}"; do
  vmlinuz=$(fetch_kernel "$version") || { status=2; continue; }
  log="$cache/logs/$version-$mode.log"
  echo "kernel_matrix: $version ($(cat "$cache/$version/package")), $mode: booting under emulation"
  started=$(date +%s)
  timeout "$timeout_s" qemu-system-x86_64 -nographic -no-reboot -m 2048 -smp 2 -cpu max \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3" </dev/null >"$log" 2>&1 || true
  echo "kernel_matrix: $version: $(( $(date +%s) - started )) s; console in $log"
  python3 scripts/kernel_matrix_read.py "$version" "$mode" "$log" "$cache/$version" || status=1
done
exit $status
