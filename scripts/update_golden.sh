#!/usr/bin/env bash
# Rewrites tests/fixtures/golden/expected/ from build/latency-doctor: run it only when a change
# to the reports is intended, and review the diff (html and perfetto are kept as size + FNV-1a
# digest, too large to diff usefully; the text, json and markdown files show what changed).
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${LD:-build/latency-doctor}  # LD=path: another build directory's binary
out=tests/fixtures/golden/expected
traces=(tests/fixtures/golden/*.ldtrace tests/fixtures/formats/sample.ldtrace)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for trace in "${traces[@]}"; do
  name=$(basename "$trace" .ldtrace)
  for format in text json markdown html perfetto; do
    "$exe" report "$trace" --format "$format" -o "$tmp/$name.$format" 2>/dev/null
    case $format in
      html|perfetto)
        python3 - "$tmp/$name.$format" > "$out/$name.$format.fnv1a" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
h = 0xcbf29ce484222325
for c in data:
    h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
print('%d %016x' % (len(data), h))
PY
        ;;
      *) cp "$tmp/$name.$format" "$out/$name.$format" ;;
    esac
  done
done
echo "update_golden: rewrote $out"
