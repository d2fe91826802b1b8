#!/usr/bin/env bash
# tests/integration/test_signals.sh: real signals to a real `lash run` and
# `lash sandbox exec` while a command runs in a real local sandbox: the exit
# code is 128+N, the owned sandbox is gone, no process of the command is
# left, and --json ends with one exit line. TAP; skips without a jail.
set -u
cd "$(dirname "$0")/../.."
BUILD=${LASH_BUILD:-build}
LASH=$BUILD/bin/lash
n=0; failed=0
ok()  { n=$((n+1)); echo "ok $n - $1"; }
nok() { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
[ -x "$LASH" ] || { echo "1..0 # SKIP $LASH is not built"; exit 0; }
probe=$("$LASH" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
[ "$probe" = yes ] || { echo "1..0 # SKIP no bubblewrap jail here"; exit 0; }
work=$(mktemp -d /tmp/lash-sig.XXXXXX); chmod 711 "$work"
trap 'rm -rf "$work"' EXIT
export LASH_SANDBOX_ROOT=$work/state
mark="sleep 987$$"
cat >"$work/spec.lua" <<LUA
local lash = require "lash"
return lash.agent {
  model = function(messages)
    if #messages == 1 then
      return { tool_calls = { { name = "run_command", args = { command = "$mark", timeout_seconds = 200 } } } }
    end
    return "done"
  end,
  capabilities = { lash.sandbox_capability { sandbox_timeout = 600 } },
}
LUA
# SIGKILL reaches the jail at once, but its processes leave the process table
# asynchronously (slowly on a loaded machine): wait for that, bounded.
gone() { for _ in $(seq 200); do pgrep -f "$mark" >/dev/null || return 0; sleep 0.05; done; return 1; }
wait_cmd() { for _ in $(seq 100); do pgrep -f "$mark" >/dev/null && return 0; sleep 0.1; done; return 1; }
# run SIG HOW: start lash run, signal it (to its pid or its process group)
run_case() {
  local sig=$1 how=$2 want=$3
  setsid "$LASH" run "$work/spec.lua" go --json >"$work/out" 2>"$work/err" & local pid=$!
  wait_cmd; check "$sig ($how): the command runs in the sandbox" test $? = 0
  local t0=$SECONDS
  if [ "$how" = group ]; then kill -"$sig" -- -"$pid"; else kill -"$sig" "$pid"; fi
  wait "$pid"; local rc=$?
  check "$sig ($how): exit $want (got $rc)" test "$rc" = "$want"
  check "$sig ($how): within the bound" test $((SECONDS - t0)) -le 12
  check "$sig ($how): no process of the command left" gone
  check "$sig ($how): the owned sandbox is gone" test "$("$LASH" sandbox list --json)" = "[]"
  check "$sig ($how): --json ends with one exit line" \
    sh -c "tail -n1 '$work/out' | grep -q '\"exit_code\":$want' && [ \$(grep -c '\"type\":\"exit\"' '$work/out') = 1 ]"
}
run_case TERM pid 143
run_case INT group 130
run_case HUP pid 129
# sandbox exec interrupted kills its command
ID=$("$LASH" sandbox create --timeout 300)
"$LASH" sandbox exec "$ID" -- sh -c "$mark" 2>/dev/null & pid=$!
wait_cmd; kill -TERM "$pid"; wait "$pid"; rc=$?
check "sandbox exec: SIGTERM exits 143 (got $rc)" test "$rc" = 143
check "sandbox exec: its command is killed" gone
"$LASH" sandbox destroy "$ID"
echo "1..$n"
exit $failed
