#!/usr/bin/env bash
# Fast checks that need no build, run first by scripts/test.sh (and so by CI). Each finding is
# one line, "lint: FILE:LINE: what", and any finding makes the exit status 1.
#   format      C++ in agent/, tests/, bench/ as .clang-format has it (clang-format --dry-run)
#   shell       bash -n on scripts/*.sh and .ci/run
#   dated       no dated lab notes in code comments (agent/ bpf/ tests/ bench/): a comment says
#               why, and a measurement that matters goes to docs/performance.md without a date
#   doc-size    docs/performance.md at most 250 lines: today's figures, the method, re-running
#   file-size   agent/analysis/*.cpp at most 500 lines each
#   func-size   no function in agent/analysis/*.cpp over 60 lines
# Usage: bash scripts/lint.sh [CHECK...]   (default: all of them, in that order)
set -uo pipefail
cd "$(dirname "$0")/.."

readonly PERFORMANCE_DOC_MAX_LINES=250
readonly ANALYSIS_FILE_MAX_LINES=500
readonly ANALYSIS_FUNCTION_MAX_LINES=60

failures=0
fail() {  # fail FILE:LINE MESSAGE
  echo "lint: $1: $2" >&2
  failures=$((failures + 1))
}

# Tracked files under the given paths, one per line, NUL-free names assumed.
tracked() { git ls-files -- "$@"; }

check_format() {
  if ! command -v clang-format >/dev/null; then
    echo "lint: installing clang-format" >&2
    if [ "$(id -u)" -ne 0 ]; then fail "scripts/lint.sh:1" "no clang-format, and not root to install it"; return; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-format >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
          apt-get install -y -qq --no-install-recommends clang-format >/dev/null; } ||
      { fail "scripts/lint.sh:1" "could not install clang-format (apt-get install clang-format)"; return; }
    command -v clang-format >/dev/null || { fail "scripts/lint.sh:1" "clang-format installed but not on PATH"; return; }
  fi
  # bpf/ and bench/hook_cost/ are kernel-style C (their .clang-format disables formatting);
  # tests/fixtures holds data, not code.
  local files
  mapfile -t files < <(tracked agent tests bench |
    grep -E '\.(cpp|hpp|cc|h|c)$' | grep -vE '^tests/fixtures/|\.bpf\.c$|^bench/hook_cost/')
  [ ${#files[@]} -gt 0 ] || return
  # --dry-run prints "FILE:LINE:COL: error: code should be clang-formatted" per difference:
  # keep the first per file, so a file never formatted does not bury the rest.
  local out rc=0 findings
  out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -ne 0 ] || return 0
  findings=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$out" |
    awk -F: '!seen[$1]++ { print $1, $2 }')
  if [ -z "$findings" ]; then  # clang-format itself failed (a bad .clang-format, a crash)
    fail ".clang-format:1" "clang-format failed: $(head -1 <<<"$out")"
    return
  fi
  local file at
  while read -r file at; do
    fail "$file:$at" "not formatted as .clang-format says (clang-format -i $file)"
  done <<<"$findings"
}

check_shell() {
  local f msg
  for f in scripts/*.sh .ci/run; do
    [ -f "$f" ] || continue
    if ! msg=$(bash -n "$f" 2>&1); then
      # "FILE: line N: message"
      local n
      n=$(grep -oE 'line [0-9]+' <<<"$msg" | head -1 | grep -oE '[0-9]+')
      fail "$f:${n:-1}" "bash -n: $(head -1 <<<"$msg" | sed -E 's/^[^:]+: line [0-9]+: //')"
    fi
  done
}

# Comments only: a date in a string (a test's expected output) is data. C-family comments
# (// and /* */ blocks) in C and C++, # comments and docstrings in shell and Python.
check_dated() {
  # No {m,n}: Debian's awk (mawk) has no interval expressions.
  local date='(19|20)[0-9][0-9]-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
  local month='(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? [0-9][0-9]?(st|nd|rd|th)?,? (19|20)[0-9][0-9]'
  local when="($date|$month|(last|this) (week|month|night|morning)|yesterday|today)"
  local diary="((measured|tried|run|ran|seen|kept|dropped)( on| at| in| until| since)?|as of) $when"
  local files
  mapfile -t files < <(tracked agent bpf tests bench |
    grep -E '\.(cpp|hpp|cc|h|c|sh|py)$' | grep -vE '^tests/(fixtures|data)/')
  [ ${#files[@]} -gt 0 ] || return
  local hits
  hits=$(awk -v date="$date" -v month="$month" -v diary="$diary" '
    FNR == 1 { block = 0; doc = 0; c = FILENAME ~ /\.(cpp|hpp|cc|h|c)$/ }
    {
      line = $0; text = ""
      if (c) {
        if (block) { text = line; if (index(line, "*/")) block = 0 }
        else if ((i = index(line, "//")) > 0) text = substr(line, i)
        else if ((i = index(line, "/*")) > 0) { text = substr(line, i); if (!index(text, "*/")) block = 1 }
      } else {
        q = gsub(/"""/, "&", line)
        if (doc || q > 0) text = line
        if (q % 2) doc = !doc
        if (!text && match(line, /(^|[ \t])#/)) text = substr(line, RSTART)
      }
      if (text == "") next
      text = tolower(text)
      if (text ~ diary) print FILENAME ":" FNR ": a dated lab note in a comment (a comment says why; figures go to docs/performance.md, undated)"
      else if (text ~ date || text ~ month) print FILENAME ":" FNR ": a date in a comment (a comment says why, not when)"
    }' "${files[@]}")
  [ -n "$hits" ] || return 0
  while IFS= read -r line; do
    fail "${line%%: *}" "${line#*: }"
  done <<<"$hits"
}

check_doc_size() {
  local f=docs/performance.md n
  [ -f "$f" ] || return 0
  n=$(wc -l <"$f")
  if [ "$n" -gt "$PERFORMANCE_DOC_MAX_LINES" ]; then
    fail "$f:$((PERFORMANCE_DOC_MAX_LINES + 1))" \
      "$n lines, more than $PERFORMANCE_DOC_MAX_LINES: keep today's figures, the method and how to re-run"
  fi
}

# A per-file line limit: max_lines LIMIT WHY FILE...
max_lines() {
  local limit=$1 why=$2 f n
  shift 2
  for f in "$@"; do
    [ -f "$f" ] || continue
    n=$(wc -l <"$f")
    [ "$n" -le "$limit" ] || fail "$f:$((limit + 1))" "$n lines, more than $limit ($why)"
  done
}

check_file_size() {
  local files
  mapfile -t files < <(tracked 'agent/analysis/*.cpp')
  max_lines "$ANALYSIS_FILE_MAX_LINES" "split it by concern" "${files[@]}"
}

# A function is a definition that opens at column 0 (Google style: namespaces are not indented)
# and closes with a "}" alone at column 0; types and tables close with "};" or "});".
check_func_size() {
  local files hits
  mapfile -t files < <(tracked 'agent/analysis/*.cpp')
  [ ${#files[@]} -gt 0 ] || return
  hits=$(awk -v limit="$ANALYSIS_FUNCTION_MAX_LINES" '
    FNR == 1 { start = 0 }
    !start && /^[A-Za-z_].*\{ *(\/\/.*)?$/ && !/^(namespace|struct|class|enum|union|extern)/ && !/ = / { start = FNR; next }
    start && /^\}$/ {
      if (FNR - start - 1 > limit) print FILENAME ":" start ": a function of " FNR - start - 1 " lines, more than " limit " (split it)"
      start = 0
    }
    start && /^\}/ { start = 0 }  # "};", "});": a type or a table, not a function' "${files[@]}")
  [ -n "$hits" ] || return 0
  while IFS= read -r line; do
    fail "${line%%: *}" "${line#*: }"
  done <<<"$hits"
}

checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(format shell dated doc-size file-size func-size)
for c in "${checks[@]}"; do
  case $c in
    format) check_format ;;
    shell) check_shell ;;
    dated) check_dated ;;
    doc-size) check_doc_size ;;
    file-size) check_file_size ;;
    func-size) check_func_size ;;
    *) echo "lint: unknown check '$c' (format shell dated doc-size file-size func-size)" >&2; exit 2 ;;
  esac
done
if [ "$failures" -gt 0 ]; then
  echo "lint: $failures finding(s)" >&2
  exit 1
fi
echo "lint: ${checks[*]}: clean"
