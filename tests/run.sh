#!/usr/bin/env bash
# tests/run.sh [unit|specs|integration]...: runs lash's tests and prints one
# summary. Unit tests are the TAP binaries under $LASH_BUILD/tests, specs are
# busted (on Lua 5.4) over specs/, integration tests are
# tests/integration/test_*.sh (TAP lines, or one result from the exit code).
set -u
cd "$(dirname "$0")/.."
BUILD=${LASH_BUILD:-build}
export LASH_BUILD=$BUILD
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(unit specs integration)
pass=0; fail=0; skip=0; failed_names=()
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT

if [ -n "${LASH_SANITIZED:-}" ]; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

# count NAME FILE RC: add the TAP results in FILE to the totals.
count() {
  local name=$1 file=$2 rc=$3 ok nok sk
  ok=$(grep -cE '^ok [0-9]+' "$file" || true)
  nok=$(grep -cE '^not ok [0-9]+' "$file" || true)
  sk=$(grep -cE '^ok [0-9]+.*# *(SKIP|skip)' "$file" || true)
  if [ "$ok" -eq 0 ] && [ "$nok" -eq 0 ]; then
    if [ "$rc" -eq 0 ]; then ok=1; else nok=1; fi
  elif [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
    nok=1   # crashed or exited non-zero after passing checks
  fi
  pass=$((pass + ok - sk)); fail=$((fail + nok)); skip=$((skip + sk))
  if [ "$nok" -ne 0 ]; then
    failed_names+=("$name")
    echo "--- $name: FAILED (exit $rc)"
    grep -vE '^ok [0-9]+' "$file" | tail -n 60
  else
    echo "--- $name: $ok ok${sk:+, $sk skipped}"
  fi
}

run_unit() {
  local t
  for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    timeout 900 "$t" >"$log/out" 2>&1; count "unit/$(basename "$t")" "$log/out" $?
  done
}

run_specs() {
  local preload=() f
  if [ -n "${LASH_SANITIZED:-}" ]; then
    preload=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0)
  fi
  for f in specs/*_spec.lua; do
    [ -f "$f" ] || continue
    timeout 900 "${preload[@]}" lua5.4 /usr/bin/busted --cpath="$BUILD/?.so" -o TAP "$f" >"$log/out" 2>&1
    count "specs/$(basename "$f")" "$log/out" $?
  done
}

run_integration() {
  local f
  for f in tests/integration/test_*.sh; do
    [ -f "$f" ] || continue
    timeout 900 bash "$f" >"$log/out" 2>&1; count "integration/$(basename "$f")" "$log/out" $?
  done
}

for p in "${parts[@]}"; do "run_$p"; done
echo
if [ ${#failed_names[@]} -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
