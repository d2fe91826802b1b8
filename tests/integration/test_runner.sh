#!/usr/bin/env bash
# The test runner cannot be fooled: plant tests that crash after passing
# checks, fail without a word, hang, print nothing, print fewer results than
# they planned, or stop a spec half-way with exit 0; run tests/run.sh (and
# `make test`) over them and check that each is reported as a failure, by
# name and reason, that a real skip is a skip, and that the exit status is
# non-zero. TAP.
. "$(dirname "$0")/../lib.sh"
root=$(pwd)

new_tmp plant
mkdir -p "$plant/unit" "$plant/specs" "$plant/integration"

# unit: one good binary, one that passes a check and then segfaults
cat >"$plant/crash.c" <<'EOF'
#include <signal.h>
#include <stdio.h>
int main(void) {
  printf("ok 1 - looks fine so far\n");
  fflush(stdout);
  raise(SIGSEGV);
  printf("1..1\n");
  return 0;
}
EOF
printf '#include <stdio.h>\nint main(void) { printf("ok 1 - fine\\n1..1\\n"); return 0; }\n' >"$plant/good.c"
cc -o "$plant/unit/test_crash" "$plant/crash.c" && cc -o "$plant/unit/test_good" "$plant/good.c"
ok $? "the planted unit tests build"

# specs: one passing, one that ends the process with status 0 half-way
cat >"$plant/specs/pass_spec.lua" <<'EOF'
describe("planted", function() it("passes", function() assert.equal(2, 1 + 1) end) end)
EOF
cat >"$plant/specs/quits_spec.lua" <<'EOF'
describe("planted", function()
  it("passes first", function() end)
  it("then quits with status 0", function() os.exit(0) end)
  it("never runs", function() end)
end)
EOF

# integration: silent failure, hang, no output, short plan, a skip, a pass
printf 'exit 1\n' >"$plant/integration/test_silent_fail.sh"
printf 'echo "ok 1 - started"; sleep 60; echo "1..1"\n' >"$plant/integration/test_hangs.sh"
printf 'exit 0\n' >"$plant/integration/test_says_nothing.sh"
printf 'echo "ok 1 - one"; echo "1..3"\n' >"$plant/integration/test_short_plan.sh"
printf 'echo "1..0 # SKIP nothing to do here"\n' >"$plant/integration/test_skips.sh"
printf 'echo "ok 1 - one"; echo "ok 2 - two # SKIP not here"; echo "1..2"\n' >"$plant/integration/test_passes.sh"

# this test may itself run under `make test T=... -j2`: the planted runs
# choose their own selection and parallelism
unset LASH_TEST_ONLY LASH_TEST_JOBS MAKEFLAGS MAKELEVEL
export LASH_TEST_UNIT_DIR=$plant/unit LASH_TEST_SPEC_DIR=$plant/specs \
       LASH_TEST_INTEGRATION_DIR=$plant/integration LASH_TEST_TIMEOUT=3
out=$(bash tests/run.sh 2>&1); rc=$?
printf '%s\n' "$out" | sed 's/^/#   /'

[ $rc -ne 0 ]; ok $? "tests/run.sh exits non-zero (exit $rc)"
has() { printf '%s\n' "$out" | grep -qF -- "$1"; }
has "--- unit/test_crash: FAILED: killed by signal SEGV"
ok $? "a unit test that crashes after an ok line is a failure, named as a crash"
has "--- unit/test_good: 1 ok"
ok $? "a good unit test passes"
has "--- specs/quits_spec.lua: FAILED: printed no TAP plan"
ok $? "a spec that exits 0 half-way is a failure"
has "--- specs/pass_spec.lua: 1 ok"
ok $? "a passing spec passes"
has "--- integration/test_silent_fail.sh: FAILED: exit status 1"
ok $? "an integration test that exits 1 without output is a failure"
has "--- integration/test_hangs.sh: FAILED: timed out after 3s"
ok $? "a test that runs past its time limit is a failure"
has "--- integration/test_says_nothing.sh: FAILED: printed no test result"
ok $? "a test that prints no result is a failure"
has "--- integration/test_short_plan.sh: FAILED: planned 3 tests, printed 1 results"
ok $? "a test that prints fewer results than it planned is a failure"
has "--- integration/test_skips.sh: skipped (nothing to do here)"
ok $? "a test that skips itself is a skip"
has "--- integration/test_passes.sh: 1 ok, 1 skipped"
ok $? "a skipped check inside a passing test is a skip"
for t in unit/test_crash specs/quits_spec.lua integration/test_silent_fail.sh integration/test_hangs.sh \
         integration/test_says_nothing.sh integration/test_short_plan.sh; do
  printf '%s\n' "$out" | sed -n '/^failed:$/,$p' | grep -q "^  $t ("
  ok $? "the summary names $t"
done
[ "$(printf '%s\n' "$out" | tail -n 1)" = "7 passed, 6 failed, 2 skipped" ]
ok $? "the closing line counts them: $(printf '%s\n' "$out" | tail -n 1)"

# The same tests two at a time: the same lines (in another order) and totals.
out2=$(LASH_TEST_JOBS=2 bash tests/run.sh 2>&1)
[ "$(printf '%s\n' "$out2" | tail -n 1)" = "7 passed, 6 failed, 2 skipped" ]
ok $? "two at a time, the same totals: $(printf '%s\n' "$out2" | tail -n 1)"
[ "$(printf '%s\n' "$out" | grep '^--- ' | sed 's/[0-9]*s)$//' | sort)" = \
  "$(printf '%s\n' "$out2" | grep '^--- ' | sed 's/[0-9]*s)$//' | sort)" ]
ok $? "two at a time, the same line for each test"
printf '%s\n' "$out2" | grep -q '^# took [0-9]*s, 2 tests at a time$'
ok $? "the summary says how many ran at a time"

# A selection runs only the tests whose names hold one of its words.
out3=$(LASH_TEST_ONLY="passes good" bash tests/run.sh 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$out3" | grep -c '^--- ')" = 2 ]
ok $? "LASH_TEST_ONLY='passes good' runs test_passes.sh and test_good only (exit $rc)"
out3=$(LASH_TEST_ONLY=nosuch bash tests/run.sh 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s\n' "$out3" | grep -q 'no test name contains any of: nosuch'
ok $? "a selection no test matches is an error that says how names look (exit $rc)"

# make test is tests/run.sh after `make all`; run it for real where the
# build is the default one and up to date (under make check it is not).
if [ "${LASH_BUILD:-build}" = build ] && make -q all 2>/dev/null; then
  make --no-print-directory -s test >/dev/null 2>&1; rc=$?
  [ $rc -ne 0 ]; ok $? "make test over the planted tests exits non-zero (exit $rc)"
else
  skip "make test over the planted tests" "the default build is not up to date here"
fi
done_testing
