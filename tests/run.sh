#!/usr/bin/env bash
# tests/run.sh [unit|specs|integration]...: runs lash's tests and prints one
# summary, ending with the line `N passed, N failed, N skipped`.
#
# Unit tests are the TAP binaries under $LASH_BUILD/tests, specs are busted
# (on Lua 5.4) over specs/, integration tests are tests/integration/test_*.sh.
# Every test must print TAP. A test fails as a whole, named in the summary
# with the reason, when it
#   - exits non-zero (even after printing only `ok` lines),
#   - is killed by a signal (a crash: SIGSEGV, SIGABRT, ...),
#   - runs past its time limit ($LASH_TEST_TIMEOUT seconds, default 900),
#   - prints no result at all (no `ok`/`not ok` line and no `1..0 # SKIP`),
#   - prints a plan `1..N` that does not match the results it printed.
# A test that skips itself prints `1..0 # SKIP reason` and exits 0.
#
# Selecting and parallel runs:
#   LASH_TEST_ONLY="json sandbox_cli" (`make test T="json sandbox_cli"`) runs
#   only the tests whose name (unit/test_x, specs/x_spec.lua,
#   integration/test_x.sh) contains one of the words; none matching is an
#   error listing how names look.
#   LASH_TEST_JOBS=N (`make test -j2` sets it from make's -j) runs N tests at
#   once; each test's lines print whole, in the order the tests finish. An
#   integration test whose script has a line `# test: alone` (it uses state
#   of the whole machine: cgroups, loop devices, its own dockerd) runs with
#   nothing else running.
#
# The directories can be pointed elsewhere (LASH_TEST_UNIT_DIR,
# LASH_TEST_SPEC_DIR, LASH_TEST_INTEGRATION_DIR); the runner's own test
# (tests/integration/test_runner.sh) uses that to plant failing tests.
set -u
cd "$(dirname "$0")/.."
BUILD=${LASH_BUILD:-build}
export LASH_BUILD=$BUILD
UNIT_DIR=${LASH_TEST_UNIT_DIR:-$BUILD/tests}
SPEC_DIR=${LASH_TEST_SPEC_DIR:-specs}
INTEGRATION_DIR=${LASH_TEST_INTEGRATION_DIR:-tests/integration}
TIMEOUT=${LASH_TEST_TIMEOUT:-900}
ONLY=${LASH_TEST_ONLY:-}
JOBS=${LASH_TEST_JOBS:-1}
case $JOBS in ''|*[!0-9]*|0) echo "tests/run.sh: LASH_TEST_JOBS must be a positive number (got '$JOBS')" >&2; exit 2 ;; esac
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(unit specs integration)
pass=0; fail=0; skip=0; failed_names=(); started=$SECONDS
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT
# saved sessions of the runs under test go here, never into the user's state
export XDG_STATE_HOME="$log/state"

if [ -n "${LASH_SANITIZED:-}" ]; then
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

# why_failed RC: the reason a non-zero exit status stands for.
why_failed() {
  local rc=$1
  if [ "$rc" -eq 124 ]; then echo "timed out after ${TIMEOUT}s"
  elif [ "$rc" -gt 128 ]; then echo "killed by signal $(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
  else echo "exit status $rc"; fi
}

# count NAME FILE RC SECONDS: add the TAP results in FILE to the totals; a
# test that broke one of the rules above counts as (at least) one failure.
count() {
  local name=$1 file=$2 rc=$3 secs=$4 ok nok sk plan ran reason="" sk_note
  ok=$(grep -cE '^ok [0-9]+' "$file" || true)
  nok=$(grep -cE '^not ok [0-9]+' "$file" || true)
  sk=$(grep -cE '^ok [0-9]+.*# *(SKIP|skip)' "$file" || true)
  plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$file" | tail -n 1)
  ran=$((ok + nok))
  if [ "$rc" -ne 0 ]; then
    reason=$(why_failed "$rc")
  elif [ "$ran" -eq 0 ]; then
    if [ "$plan" = 0 ] && grep -qE '^1\.\.0 *# *(SKIP|skip)' "$file"; then
      skip=$((skip + 1))
      echo "--- $name: skipped ($(sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$file" | head -n 1))"
      return
    fi
    reason="printed no test result"
  elif [ -n "$plan" ] && [ "$plan" -ne "$ran" ]; then
    reason="planned $plan tests, printed $ran results"
  elif [ -z "$plan" ]; then
    reason="printed no TAP plan (1..N)"
  fi
  if [ -n "$reason" ] && [ "$nok" -eq 0 ]; then nok=1; fi
  pass=$((pass + ok - sk)); fail=$((fail + nok)); skip=$((skip + sk))
  if [ "$nok" -ne 0 ]; then
    failed_names+=("$name${reason:+ ($reason)}")
    echo "--- $name: FAILED${reason:+: $reason} ($nok failed, ${secs}s)"
    grep -vE '^ok [0-9]+' "$file" | tail -n 60
  else
    if [ "$sk" -gt 0 ]; then sk_note=", $sk skipped"; else sk_note=""; fi
    echo "--- $name: $((ok - sk)) ok$sk_note (${secs}s)"
  fi
}

# selected NAME: whether LASH_TEST_ONLY lets the test NAME run.
selected() {
  local w
  [ -z "$ONLY" ] && return 0
  for w in $ONLY; do case $1 in *"$w"*) return 0 ;; esac; done
  return 1
}

# run_one NAME COMMAND...: run one test under the time limit and count it;
# with LASH_TEST_JOBS above 1, start it and count it when it ends.
started_tests=0; running=0; alone_running=0; jobs_seq=0
declare -A job_name=() job_alone=()
run_one() {
  local name=$1 t0=$SECONDS rc alone=0; shift
  selected "$name" || return 0
  started_tests=$((started_tests + 1))
  if [ "$JOBS" -eq 1 ]; then
    timeout -k 10 "$TIMEOUT" "$@" >"$log/out" 2>&1 </dev/null
    rc=$?
    count "$name" "$log/out" "$rc" $((SECONDS - t0))
    return
  fi
  case $name in integration/*) grep -q '^# test: alone' "${@: -1}" && alone=1 ;; esac
  # an `alone` test waits for every other; every test waits for an `alone` one
  while [ "$running" -ge "$JOBS" ] || { [ "$running" -gt 0 ] && { [ $alone = 1 ] || [ $alone_running = 1 ]; }; }; do
    reap_one
  done
  jobs_seq=$((jobs_seq + 1))
  local j=$jobs_seq
  ( timeout -k 10 "$TIMEOUT" "$@" >"$log/$j.out" 2>&1 </dev/null
    echo "$? $((SECONDS - t0))" >"$log/$j.rc" ) &
  job_name[$j]=$name; job_alone[$j]=$alone
  running=$((running + 1)); [ $alone = 1 ] && alone_running=1
}

# reap_one: wait for one started test to end and count it.
reap_one() {
  local j rc secs
  wait -n 2>/dev/null
  for j in "${!job_name[@]}"; do
    [ -f "$log/$j.rc" ] || continue
    read -r rc secs <"$log/$j.rc"
    count "${job_name[$j]}" "$log/$j.out" "$rc" "$secs"
    [ "${job_alone[$j]}" = 1 ] && alone_running=0
    unset "job_name[$j]" "job_alone[$j]"
    running=$((running - 1))
  done
}

run_unit() {
  local t
  for t in "$UNIT_DIR"/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    run_one "unit/$(basename "$t")" "$t"
  done
}

run_specs() {
  local preload=() f
  if [ -n "${LASH_SANITIZED:-}" ]; then
    preload=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0)
  fi
  for f in "$SPEC_DIR"/*_spec.lua; do
    [ -f "$f" ] || continue
    run_one "specs/$(basename "$f")" "${preload[@]}" lua5.4 /usr/bin/busted --cpath="$BUILD/?.so" -o TAP "$f"
  done
}

run_integration() {
  local f
  for f in "$INTEGRATION_DIR"/test_*.sh; do
    [ -f "$f" ] || continue
    run_one "integration/$(basename "$f")" bash "$f"
  done
}

for p in "${parts[@]}"; do
  case $p in
    unit|specs|integration) "run_$p" ;;
    *) echo "tests/run.sh: unknown part '$p' (known: unit specs integration)" >&2; exit 2 ;;
  esac
done
while [ "$running" -gt 0 ]; do reap_one; done
if [ -n "$ONLY" ] && [ "$started_tests" -eq 0 ]; then
  echo "tests/run.sh: no test name contains any of: $ONLY (names look like unit/test_json," \
    "specs/json_spec.lua, integration/test_sandbox_cli.sh; ls specs tests/integration)" >&2
  exit 2
fi
echo
if [ "$JOBS" -gt 1 ]; then echo "# took $((SECONDS - started))s, $JOBS tests at a time"; else echo "# took $((SECONDS - started))s"; fi
if [ ${#failed_names[@]} -gt 0 ]; then
  echo "failed:"; printf '  %s\n' "${failed_names[@]}"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
