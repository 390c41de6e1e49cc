#!/usr/bin/env bash
# The HTML report in a real browser: renders TRACE as HTML, loads it in headless Chromium, and
# fails on any console message (script error, failed resource load) or a blank screenshot.
#
#   bash scripts/html_check.sh [TRACE.ldtrace] [OUT.png]
#
# Defaults: the formats fixture trace, screenshot to build/html-check/report.png. To refresh the
# example in the docs from a fault scenario's trace:
#   bash scripts/html_check.sh path/to/scenario.ldtrace docs/report-example.png
# Installs Debian's chromium when it is missing (large: only this test step needs it).
set -euo pipefail
cd "$(dirname "$0")/.."

trace=${1:-tests/fixtures/formats/sample.ldtrace}
png=${2:-build/html-check/report.png}
min_ink_percent=${LD_HTML_MIN_INK_PERCENT:-3}
min_colours=${LD_HTML_MIN_COLOURS:-12}

fail() { echo "html_check: $*" >&2; exit 1; }

if ! command -v chromium >/dev/null; then
  [ "$(id -u)" -eq 0 ] || fail "chromium is not installed and installing it needs root"
  echo "html_check: installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
[ -x build/latency-doctor ] && [ -x build/ld-png-check ] || cmake --build build -j"$(nproc)" --target latency-doctor ld-png-check

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shot URL OUT.png LOG: a full-height screenshot at a laptop's width.
shot() {
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --enable-logging=stderr --v=0 --user-data-dir="$work/profile" \
    --screenshot="$2" --window-size=1280,2000 "$1" >"$3" 2>&1 || fail "chromium failed on $1: $(tail -5 "$3")"
  [ -s "$2" ] || fail "chromium wrote no screenshot for $1: $(tail -5 "$3")"
}

# "ok" when the PNG has enough ink and colours to be a rendered report.
judge() {
  read -r width height ink colours < <(build/ld-png-check "$1")
  local percent=$((ink * 100 / (width * height)))
  if [ "$percent" -ge "$min_ink_percent" ] && [ "$colours" -ge "$min_colours" ]; then echo ok; else echo blank; fi
  echo "html_check: $1: ${width}x${height}, ${percent}% ink, ${colours} colours" >&2
}

# The judge must be able to say no: an empty page is blank.
printf '<!DOCTYPE html><title>blank</title>' >"$work/blank.html"
shot "file://$work/blank.html" "$work/blank.png" "$work/blank.log"
[ "$(judge "$work/blank.png")" = blank ] || fail "an empty page passed the blank-screenshot check"

build/latency-doctor report "$trace" --format html -o "$work/report.html" 2>"$work/report.err" ||
  fail "report --format html failed: $(cat "$work/report.err")"
shot "file://$work/report.html" "$work/report.png" "$work/chromium.log"
# Chromium logs page console output (errors, failed loads, CSP violations) as CONSOLE lines.
if grep -E 'CONSOLE|Uncaught|Failed to load resource' "$work/chromium.log"; then
  fail "the page logged console messages (above)"
fi
[ "$(judge "$work/report.png")" = ok ] || fail "the report's screenshot looks blank"

mkdir -p "$(dirname "$png")"
cp "$work/report.png" "$png"
echo "html_check: ok, screenshot in $png"
