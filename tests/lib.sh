# tests/lib.sh: what every integration test shares, sourced first thing:
#   . "$(dirname "$0")/../lib.sh"
# It moves to the checkout's root, sets BUILD (the build directory,
# $LASH_BUILD or build), counts TAP results and prints them, skips a whole
# test, makes temporary directories and runs the cleanups at exit. A test
# ends with `done_testing`: the plan 1..N, and an exit status saying
# whether everything passed (tests/run.sh checks both).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${LASH_BUILD:-build}
n=0; failed=0

# not_ok DESC [DETAIL...]: a failed test; each DETAIL (a string, maybe of
# several lines) follows as TAP comment lines.
not_ok() {
  local d
  n=$((n + 1)); failed=$((failed + 1))
  echo "not ok $n - $1"; shift
  for d in "$@"; do printf '%s\n' "$d" | sed 's/^/# /'; done
}

# ok DESC: a passed test. ok RC DESC: passes when RC is 0 (`ok $? "..."`).
ok() {
  if [ $# -ge 2 ]; then
    if [ "$1" = 0 ]; then ok "$2"; else not_ok "$2"; fi
    return
  fi
  n=$((n + 1)); echo "ok $n - $1"
}

# check DESC COMMAND...: passes when COMMAND succeeds.
check() {
  local d=$1; shift
  if "$@"; then ok "$d"; else not_ok "$d" "failed: $*"; fi
}

# same DESC GOT WANT: passes when the two strings are equal.
same() {
  if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "got:
$2
want:
$3"; fi
}

# contains DESC TEXT PART / lacks DESC TEXT PART: PART is in TEXT, or not.
contains() {
  case "$2" in *"$3"*) ok "$1" ;; *) not_ok "$1" "missing: $3
in:
$2" ;; esac
}
lacks() {
  case "$2" in *"$3"*) not_ok "$1" "unexpected: $3
in:
$2" ;; *) ok "$1" ;; esac
}

# skip DESC REASON: one test that does not apply here (counted as skipped).
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

# rerun_unprivileged MARK: as root, run this test again under an unprivileged
# uid of its own with no passwd entry (setpriv), with MARK=1 in its
# environment (the re-run tests it to not recurse), and report the re-run's
# results as this test's, each prefixed "as uid N:". A no-op when not root or
# when MARK is set.
rerun_unprivileged() {
  local mark=$1 as_uid sub sub_rc sub_n=0 line
  [ "$(id -u)" = 0 ] && [ -z "${!mark:-}" ] || return 0
  as_uid=$((61000 + $$ % 4000))
  if ! command -v setpriv >/dev/null; then
    skip "" "the unprivileged run: setpriv is missing (util-linux)"; return 0
  fi
  sub=$(setpriv --reuid "$as_uid" --regid "$as_uid" --clear-groups env -i PATH="$PATH" HOME=/tmp \
        "$mark=1" LASH_BUILD="$BUILD" ${LASH_BIN:+LASH_BIN="$LASH_BIN"} bash "$0" 2>&1)
  sub_rc=$?
  while IFS= read -r line; do
    case $line in
      "ok "*"# SKIP"*) sub_n=$((sub_n+1)); skip "as uid $as_uid:" "${line#*# SKIP }" ;;
      "ok "*) sub_n=$((sub_n+1)); ok "as uid $as_uid: ${line#ok * - }" ;;
      "not ok "*) sub_n=$((sub_n+1)); not_ok "as uid $as_uid: ${line#not ok * - }" ;;
      "1..0"*) sub_n=1; skip "as uid $as_uid:" "${line#*# SKIP }" ;;
      "#"*) echo "$line" ;;
    esac
  done <<<"$sub"
  check "as uid $as_uid: the unprivileged run ran (exit $sub_rc)" test "$sub_n" -gt 0 -a "$sub_rc" = 0
}

# skip_all REASON: the whole test does not apply here.
skip_all() { echo "1..0 # SKIP $1"; exit 0; }

# done_testing: the plan, and the exit status (0 when nothing failed).
done_testing() { echo "1..$n"; [ "$failed" -eq 0 ]; exit; }

# jail_probe: "yes" when $LASH can run a bubblewrap jail here, else "no WHY"
# (stdout only: a sanitized build may print warnings on stderr).
jail_probe() {
  "$LASH" eval 'local ok, why = lash.sandbox.probe(); return ok and "yes" or "no " .. tostring(why)' 2>/dev/null
}

# start_modal_fake DIR [LIFETIME]: the Modal fake (tests/modal_fake) on
# loopback, its state in DIR, stopped at exit (continued first: a test may
# have stopped it); sets $fake and $port and writes DIR/modal.toml, a
# profile pointing at it. Fails when the fake did not start.
start_modal_fake() {
  local dir=$1 _
  /usr/bin/python3 tests/modal_fake/server.py --state "$dir" --lifetime "${2:-300}" --watch-pid $$ \
    >"$dir/server.log" 2>&1 &
  fake=$!
  at_exit "kill -CONT $fake 2>/dev/null; kill $fake 2>/dev/null; wait $fake 2>/dev/null"
  for _ in $(seq 300); do [ -f "$dir/ports.json" ] && break; sleep 0.1; done
  port=$(/usr/bin/python3 -c "import json;print(json.load(open('$dir/ports.json'))['control'])" 2>/dev/null)
  [ -n "$port" ] || return 1
  cat >"$dir/modal.toml" <<TOML
[ci]
active = true
token_id = "ak-fake-id"
token_secret = "as-fake-secret"
server_url = "http://127.0.0.1:$port"
TOML
}

# at_exit COMMAND: run COMMAND (a string, evaluated) when the test exits,
# the last registered first. new_tmp VAR [TEMPLATE]: a fresh directory in
# $VAR, removed at exit.
_lash_at_exit=()
at_exit() { _lash_at_exit+=("$1"); }
new_tmp() {
  local d
  d=$(mktemp -d ${2:+"$2"}) || { echo "Bail out! mktemp failed"; exit 1; }
  printf -v "$1" '%s' "$d"
  at_exit "rm -rf '$d'"
}
_lash_exit() {
  local rc=$? i
  for ((i = ${#_lash_at_exit[@]} - 1; i >= 0; i--)); do eval "${_lash_at_exit[i]}"; done
  exit "$rc"
}
trap _lash_exit EXIT
