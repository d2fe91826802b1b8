#!/usr/bin/env bash
# tests/integration/test_signals.sh: real signals (TERM, INT, HUP, QUIT, and
# PIPE from a closed pipe) to a real `lash run`,
# `lash sandbox exec` and `lash mcp serve --http` while a command runs in a
# real local sandbox or on the Modal fake: the exit code is 128+N, owned
# sandboxes are gone (on the fake: terminated), holder marks released, no
# process of the command is left, --json ends with one exit line; a second
# signal skips the rest of the cleanup but still kills the jails; a cleanup
# that cannot finish (an unreachable Modal) ends at the shutdown bound.
# Times are hang guards only. TAP; skips without a jail.
. "$(dirname "$0")/../lib.sh"
LASH=$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
probe=$(jail_probe)
[ "$probe" = yes ] || skip_all "no bubblewrap jail here"
work=$(mktemp -d /tmp/lash-sig.XXXXXX); chmod 711 "$work"
fake=
at_exit '[ -n "$fake" ] && { kill -CONT $fake; kill $fake; wait $fake; } 2>/dev/null; rm -rf "$work"'
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
sed 's/ lash.sandbox_capability { sandbox_timeout = 600 } / lash.sandbox_capability {} /' "$work/spec.lua" >"$work/attach.lua"
# killed processes take a moment to be reaped on a loaded machine: wait
# for them (bounded; a hang guard, not a timing)
absent() { for _ in $(seq 100); do pgrep -f "$1" >/dev/null || return 0; sleep 0.1; done; return 1; }
gone() { absent "$mark"; }
cleanup_gone() { absent "sleep 988$$"; }
# the command itself running (in the jail, here and on the Modal fake), not
# a client whose request carries the command as text, nor a jail still
# being built
wait_cmd() { for _ in $(seq 300); do pgrep -f "^$mark" >/dev/null && return 0; sleep 0.1; done; return 1; }
# run SIG HOW: start lash run, signal it (to its pid or its process group)
run_case() {
  local sig=$1 how=$2 want=$3
  setsid "$LASH" run "$work/spec.lua" go --json >"$work/out" 2>"$work/err" & local pid=$!
  wait_cmd; check "$sig ($how): the command runs in the sandbox" test $? = 0
  local t0=$SECONDS
  if [ "$how" = group ]; then kill -"$sig" -- -"$pid"; else kill -"$sig" "$pid"; fi
  wait "$pid"; local rc=$?
  check "$sig ($how): exit $want (got $rc)" test "$rc" = "$want"
  check "$sig ($how): exits (hang guard: within 60 s)" test $((SECONDS - t0)) -le 60
  check "$sig ($how): no process of the command left" gone
  check "$sig ($how): the owned sandbox is gone" test "$("$LASH" sandbox list --json)" = "[]"
  check "$sig ($how): --json ends with one exit line" \
    sh -c "tail -n1 '$work/out' | grep -q '\"exit_code\":$want' && [ \$(grep -c '\"type\":\"exit\"' '$work/out') = 1 ]"
}
run_case TERM pid 143
run_case INT group 130
run_case HUP pid 129
run_case QUIT pid 131

# a closed pipe (lash run ... | head -1) is a SIGPIPE: it stops the run
# quietly and cleans up like SIGTERM, both owned sandboxes of the spec
cat >"$work/pipe.lua" <<LUA
local lash = require "lash"
return lash.agent {
  model = function(messages)
    if #messages < 6 then
      return { tool_calls = { { name = "run_command", args = { command = "sleep 1; echo $mark" } },
                              { name = "x_run_command", args = { command = "sleep 1" } } } }
    end
    return "done"
  end,
  capabilities = { lash.sandbox_capability {}, lash.prefix_tools { prefix = "x", capability = lash.sandbox_capability {} } },
}
LUA
( "$LASH" run "$work/pipe.lua" go --no-stream 2>"$work/err"; echo "$?" >"$work/rc" ) | head -1 >/dev/null
check "SIGPIPE: exit 141 (got $(cat "$work/rc"))" test "$(cat "$work/rc")" = 141
check "SIGPIPE: both owned sandboxes are gone" test "$("$LASH" sandbox list --json)" = "[]"
check "SIGPIPE: nothing said on stderr (the reader left; that is not an error)" test ! -s "$work/err"
# sandbox exec interrupted kills its command
ID=$("$LASH" sandbox create --timeout 300)
"$LASH" sandbox exec "$ID" -- sh -c "$mark" 2>/dev/null & pid=$!
wait_cmd; kill -TERM "$pid"; wait "$pid"; rc=$?
check "sandbox exec: SIGTERM exits 143 (got $rc)" test "$rc" = 143
check "sandbox exec: its command is killed" gone
"$LASH" sandbox destroy "$ID"

# an attached run releases its holder mark on a signal, and leaves the
# sandbox (it belongs to its creator)
ID=$("$LASH" sandbox create --timeout 300 --owner dag/run1)
"$LASH" run "$work/attach.lua" go --attach "$ID" --owner dag/run1 --holder dag/run1/task \
  >"$work/out" 2>"$work/err" & pid=$!
wait_cmd; holder=$("$LASH" sandbox tags "$ID" | grep '^lash_holder=')
check "attached (local): the run holds the sandbox ($holder)" test "$holder" = "lash_holder=dag/run1/task"
kill -TERM "$pid"; wait "$pid"; rc=$?
check "attached (local): SIGTERM exits 143 (got $rc)" test "$rc" = 143
check "attached (local): the holder mark is released" sh -c "! '$LASH' sandbox tags '$ID' | grep -q '^lash_holder='"
check "attached (local): the sandbox stays, with its owner" sh -c "'$LASH' sandbox tags '$ID' | grep -q '^lash_owner=dag/run1$'"
check "attached (local): no process of the command left" gone
"$LASH" sandbox destroy "$ID"

# a second signal skips what is left of the cleanup (a close hook that
# runs a long command in a sandbox of its own) but still kills the jails,
# and exits at once: the bound is 300 s, the hang guard 60 s
cat >"$work/slow.lua" <<LUA
local lash = require "lash"
return lash.agent {
  model = function(messages)
    if #messages == 1 then
      return { tool_calls = { { name = "run_command", args = { command = "$mark", timeout_seconds = 200 } } } }
    end
    return "done"
  end,
  capabilities = {
    lash.capability { name = "slow_cleanup", close = function()
      local sb = lash.sandbox.create { timeout = 600 }
      sb:exec({ "sh", "-c", "sleep 988$$" }, { timeout = 280 })
    end },
    lash.sandbox_capability { sandbox_timeout = 600 },
  },
}
LUA
"$LASH" run --shutdown-timeout 300 "$work/slow.lua" go --trust >"$work/out" 2>"$work/err" & pid=$!
wait_cmd
t0=$SECONDS
kill -TERM "$pid"
for _ in $(seq 300); do pgrep -f "sleep 988$$" >/dev/null && break; sleep 0.1; done
cleanup_running() { pgrep -f "sleep 988$$" >/dev/null; }
check "second signal: the first one started the slow cleanup" cleanup_running
kill -TERM "$pid"; wait "$pid"; rc=$?
check "second signal: exits 143 (got $rc)" test "$rc" = 143
check "second signal: exits at once, not at the 300 s bound (hang guard 60 s)" test $((SECONDS - t0)) -le 60
check "second signal: says it skipped the cleanup" grep -q "again: exiting now" "$work/err"
check "second signal: the cleanup's jail is killed too" cleanup_gone
check "second signal: the run's own command is gone" gone
"$LASH" sandbox list --json | grep -o '"id":"lb-[a-z2-7]*"' | cut -d'"' -f4 | while read -r id; do
  "$LASH" sandbox destroy "$id"; done

# lash mcp serve --http: a signal ends every session, destroying the
# sandbox each owns, even with a command running in it
if command -v curl >/dev/null; then
  "$LASH" mcp serve --http 0 2>"$work/serve.err" & spid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.err" && break; sleep 0.1; done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$work/serve.err")
  H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
  curl -s -D "$work/hdr" -o /dev/null -X POST "$URL" "${H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
  SID=$(grep -i '^mcp-session-id:' "$work/hdr" | cut -d' ' -f2 | tr -d '\r')
  H+=(-H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-06-18')
  curl -s -o /dev/null -X POST "$URL" "${H[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  out=$(curl -s -X POST "$URL" "${H[@]}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo hi"}}}')
  check "mcp serve --http: a session ran a command in its sandbox" sh -c "echo '$out' | grep -q 'hi' && [ \"\$('$LASH' sandbox list --json)\" != '[]' ]"
  curl -s -o /dev/null -X POST "$URL" "${H[@]}" -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"'"$mark"'","timeout_seconds":200}}}' &
  cpid=$!
  wait_cmd
  kill -TERM "$spid"; wait "$spid"; rc=$?
  wait "$cpid" 2>/dev/null
  check "mcp serve --http: SIGTERM exits 143 (got $rc)" test "$rc" = 143
  check "mcp serve --http: the session's sandbox is destroyed" test "$("$LASH" sandbox list --json)" = "[]"
  check "mcp serve --http: no process of the command left" gone
  "$LASH" mcp serve --http 0 2>"$work/serve.err" & spid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.err" && break; sleep 0.1; done
  kill -INT "$spid"; wait "$spid"; rc=$?
  check "mcp serve --http: SIGINT exits 130 (got $rc)" test "$rc" = 130
else
  echo "# no curl: skipping lash mcp serve --http"
fi

# ---- the Modal fake ---------------------------------------------------------
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null \
   && command -v protoc >/dev/null; then
  ms=$work/modal; mkdir -p "$ms"
  start_modal_fake "$ms" 600
  export MODAL_CONFIG_PATH="$ms/modal.toml"
  unset MODAL_TOKEN_ID MODAL_TOKEN_SECRET MODAL_SERVER_URL MODAL_PROFILE
  running() { /usr/bin/python3 -c "import json;s=json.load(open('$ms/state.json'))['sandboxes'];print(sum(1 for v in s.values() if v['running']))"; }
  # an owned Modal sandbox: SIGTERM terminates it on Modal
  "$LASH" run "$work/spec.lua" go --backend modal --json >"$work/out" 2>"$work/err" & pid=$!
  wait_cmd; check "modal: the command runs on the fake" test $? = 0
  check "modal: one sandbox running there" test "$(running)" = 1
  kill -TERM "$pid"; wait "$pid"; rc=$?
  check "modal: SIGTERM exits 143 (got $rc)" test "$rc" = 143
  check "modal: the owned sandbox is terminated on Modal" test "$(running)" = 0
  check "modal: --json ends with one exit line" \
    sh -c "tail -n1 '$work/out' | grep -q '\"exit_code\":143' && [ \$(grep -c '\"type\":\"exit\"' '$work/out') = 1 ]"
  # an attached Modal run releases its holder mark
  MID=$("$LASH" sandbox create --backend modal --timeout 600 --owner dag/run2)
  "$LASH" run "$work/attach.lua" go --backend modal --attach "$MID" --owner dag/run2 --holder dag/run2/t \
    >"$work/out" 2>"$work/err" & pid=$!
  wait_cmd
  check "attached (modal): the run holds the sandbox" sh -c "'$LASH' sandbox tags '$MID' --backend modal | grep -q '^lash_holder=dag/run2/t$'"
  kill -INT "$pid"; wait "$pid"; rc=$?
  check "attached (modal): SIGINT exits 130 (got $rc)" test "$rc" = 130
  check "attached (modal): the holder mark is released" sh -c "! '$LASH' sandbox tags '$MID' --backend modal | grep -q '^lash_holder='"
  check "attached (modal): the sandbox keeps running for its creator" test "$(running)" = 1
  "$LASH" sandbox destroy "$MID" --backend modal
  # the bound: Modal stops answering (the fake is frozen) while lash tears
  # down; lash gives up at --shutdown-timeout, says so, and exits 143
  "$LASH" run --shutdown-timeout 2 "$work/spec.lua" go --backend modal --json >"$work/out" 2>"$work/err" & pid=$!
  wait_cmd
  kill -STOP "$fake"
  t0=$SECONDS
  kill -TERM "$pid"; wait "$pid"; rc=$?
  kill -CONT "$fake"
  check "unreachable Modal: SIGTERM still exits 143 (got $rc)" test "$rc" = 143
  check "unreachable Modal: ends at the bound (hang guard 60 s)" test $((SECONDS - t0)) -le 60
  check "unreachable Modal: says the cleanup ran out of time" grep -q "longer than the shutdown bound" "$work/err"
  check "unreachable Modal: --json still ends with one exit line" \
    sh -c "tail -n1 '$work/out' | grep -q '\"exit_code\":143' && [ \$(grep -c '\"type\":\"exit\"' '$work/out') = 1 ]"
  check "unreachable Modal: the sandbox it could not end is still listed (gc's to end)" \
    sh -c "'$LASH' sandbox list --backend modal | grep -q running"
  "$LASH" sandbox gc --backend modal >/dev/null 2>&1
  "$LASH" sandbox list --backend modal --json | grep -o '"id":"[^"]*"' | cut -d'"' -f4 | while read -r id; do
    "$LASH" sandbox destroy "$id" --backend modal; done
  check "modal: nothing left running on the fake" test "$(running)" = 0
else
  echo "# no grpcio/protobuf/protoc: skipping the Modal fake cases"
fi
done_testing
