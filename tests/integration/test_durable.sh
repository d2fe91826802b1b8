#!/usr/bin/env bash
# Durable turns through the real CLI (lash.durable): the ledger of tool
# side effects makes `lash run --resume` after SIGKILL never run a finished
# call again, re-run a call that started and never finished, and ask before
# re-running one of a tool marked idempotent = false; with --durable the
# sandbox's workspace is recorded with each finished call, so a run killed
# mid-command resumes in a sandbox holding exactly the last committed
# state (every file's bytes and mode), leaving no sandbox behind; `lash
# sessions rewind|fork` move the workspace with the conversation. TAP.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3"
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for b in "$T"/sbx/lb-*; do
    [ -d "$b" ] && LASH_SANDBOX_ROOT=$T/sbx "$LASH" sandbox destroy "${b##*/}" >/dev/null 2>&1
  done
  rm -rf "$T"
}
at_exit cleanup
unset LASH_CONFIG LASH_MODEL LASH_NO_SAVE LASH_SESSIONS_DB
export HOME=$T/home XDG_STATE_HOME=$T/state XDG_CONFIG_HOME=$T/cfg
mkdir -p "$HOME"
DB=$XDG_STATE_HOME/lash/sessions.db
py() { "$PY" -c "import json,sys; v=json.load(sys.stdin); print($1)"; }
exit_line() { grep '"type":"exit"' | tail -1; }
latest() { "$LASH" sessions list --json | py 'v[0]["id"]'; }
sql() { "$PY" -c "import sqlite3,sys; c=sqlite3.connect('$DB'); print('\n'.join(' '.join(str(x) for x in r) for r in c.execute(sys.argv[1])))" "$1"; }
# wait_for FILE: bounded wait (a hang guard, not a timing assertion)
wait_for() { for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
lines() { tr '\n' ' ' < "$1" | sed 's/ $//'; }

# Each of STEPS turns calls `append` twice (Ka, then Kb); the call named by
# HANG_AT marks that it started and hangs, unless RESUMED is set. Every
# execution of a handler is logged to $T/exec (outside anything lash
# restores); the effect, appended after the hang, to $T/log.
cat > "$T/agent.lua" <<'LUA'
local lash = require "lash"
local N = tonumber(os.getenv("STEPS") or "4")
return lash.agent {
  name = "appender",
  model = function(messages)
    local done = 0
    for _, m in ipairs(messages) do
      for _, p in ipairs(m.parts) do if p.type == "tool_result" then done = done + 1 end end
    end
    local k = done // 2 + 1
    if k <= N then
      return { text = "step " .. k, tool_calls = {
        { name = "append", id = "call_" .. k .. "a", args = { n = k .. "a" } },
        { name = "append", id = "call_" .. k .. "b", args = { n = k .. "b" } } } }
    end
    return "finished after " .. done .. " calls"
  end,
  tools = {
    lash.tool { name = "append", description = "Appends n to the log.",
      idempotent = os.getenv("NONIDEM") == nil,
      parameters = { type = "object", properties = { n = { type = "string" } }, required = { "n" } },
      handler = function(_, args)
        local dir = os.getenv("T")
        local e = assert(io.open(dir .. "/exec", "a")); e:write(args.n, "\n"); e:close()
        if args.n == os.getenv("HANG_AT") and not os.getenv("RESUMED") then
          local g = assert(io.open(dir .. "/hung", "w")); g:close()
          lash.sleep(120)
        end
        local f = assert(io.open(dir .. "/log", "a")); f:write(args.n, "\n"); f:close()
        return "appended " .. args.n
      end },
  },
}
LUA
export T

# kill_at CALL [ENV...]: start the agent, SIGKILL it while CALL hangs
kill_at() {
  rm -f "$T/hung" "$T/log" "$T/exec"
  env HANG_AT="$1" "${@:2}" "$LASH" run "$T/agent.lua" --trust go --json </dev/null > "$T/killed.out" 2>&1 & kp=$!
  PIDS+=($kp)
  if wait_for "$T/hung"; then
    kill -9 "$kp"; wait "$kp" 2>/dev/null
    return 0
  fi
  return 1
}

# -- a turn whose first call finished and whose second was cut short
if kill_at 3b; then
  ok "the run was SIGKILLed in the second call of turn 3"
  sid=$(latest)
  same "the ledger holds turn 3's first call finished and its second started" \
    "$(sql "select call_id, state from tool_calls where session_id = '$sid' and call_id like 'call_3%' order by call_id")" \
    "call_3a finished
call_3b started"
  out=$(RESUMED=1 "$LASH" run "$T/agent.lua" --trust --resume "$sid" --json </dev/null); rc=$?
  same "--resume finishes the run" "$rc" "0"
  contains "with the answer an uninterrupted run gives" "$out" "finished after 8 calls"
  same "the finished call was not run again (executions)" "$(lines "$T/exec")" "1a 1b 2a 2b 3a 3b 3b 4a 4b"
  same "every effect is there exactly once" "$(lines "$T/log")" "1a 1b 2a 2b 3a 3b 4a 4b"
  same "the finished call's recorded result answered the model" \
    "$("$LASH" sessions show "$sid" --json | py '[p["content"] for m in v["messages"] for p in m["parts"] if p["type"]=="tool_result" and p["id"]=="call_3a"][0]')" \
    "appended 3a"
  same "the transcript is an uninterrupted run's" \
    "$("$LASH" sessions show "$sid" --json | py '" ".join(m["role"][0] for m in v["messages"])')" "u a u a u a u a u a"
else
  not_ok "the tool never hung" "$(cat "$T/killed.out")"
fi

# -- the same with a tool marked idempotent = false: asked, not re-run
if kill_at 2b NONIDEM=1; then
  sid=$(latest)
  out=$(NONIDEM=1 RESUMED=1 "$LASH" run "$T/agent.lua" --trust --resume "$sid" --json </dev/null 2>"$T/err"); rc=$?
  same "--resume without a terminal or --yes stops for approval" "$(printf '%s\n' "$out" | exit_line | py 'v["kind"]')" "approval"
  contains "saying why" "$(cat "$T/err")" "started before lash stopped and never finished"
  contains "the approval request marks the call as cut short" "$out" '"interrupted":true'
  same "nothing ran again (executions)" "$(lines "$T/exec")" "1a 1b 2a 2b"
  out=$(NONIDEM=1 RESUMED=1 "$LASH" run "$T/agent.lua" --trust --resume "$sid" --yes --json </dev/null); rc=$?
  same "--resume --yes runs it again and finishes" "$rc" "0"
  same "the finished call of that turn still ran once" "$(lines "$T/exec")" "1a 1b 2a 2b 2b 3a 3b 4a 4b"
else
  not_ok "the non-idempotent tool never hung" "$(cat "$T/killed.out")"
fi

# -- bad input: --durable without saving
out=$("$LASH" run "$T/agent.lua" --trust --durable --no-save go --json </dev/null 2>&1); rc=$?
same "--durable --no-save is a usage error" "$rc" "2"
contains "naming the cause" "$out" "cannot be combined with --no-save"

# -- durable: the workspace moves with the conversation
probe=$(jail_probe)
if [ "$probe" != yes ]; then
  skip "" "no bubblewrap jail here: the durable workspace cases"
  done_testing
fi
mkdir -p "$T/sbx"; chmod 711 "$T"
export LASH_SANDBOX_ROOT=$T/sbx
# turn k appends k to f, makes dk (mode 0750) with a file, removes d(k-1),
# and chmods f; with HANG_AT=k in lash's environment the command of turn k
# hangs after its effects (the sandbox's $HANG: the command's text, which
# the transcript keeps and a resumed run runs again, is the same either way)
cat > "$T/jail.lua" <<'LUA'
local lash = require "lash"
local N = tonumber(os.getenv("STEPS") or "5")
return lash.agent {
  name = "jailed",
  model = function(messages)
    local done = 0
    for _, m in ipairs(messages) do
      for _, p in ipairs(m.parts) do if p.type == "tool_result" then done = done + 1 end end
    end
    local k = done + 1
    if k > N then return "finished after " .. done end
    local cmd = string.format("echo %d >> f; mkdir -m 750 d%d; echo x%d > d%d/g; rm -rf d%d; chmod %s f",
                              k, k, k, k, k - 1, k % 2 == 0 and "600" or "644")
    cmd = cmd .. string.format("; if [ \"$HANG\" = %d ]; then touch hung; sleep 120; fi", k)
    return { text = "step " .. k, tool_calls = { { name = "run_command", id = "call_" .. k, args = { command = cmd } } } }
  end,
  capabilities = { lash.sandbox_capability { sandbox_timeout = 300, default_command_timeout = 150,
                                             env = { HANG = os.getenv("HANG_AT") or "" } } },
}
LUA
# the state of a snapshot: every path, its mode and its bytes
state_of() {
  (cd "$T/sbx/snapshots/$1" && find . -mindepth 1 | sort | while read -r p; do
     if [ -f "$p" ]; then echo "$p $(stat -c %a "$p") $(tr '\n' , < "$p")"; else echo "$p $(stat -c %a "$p")"; fi
   done)
}
last_snap() { sql "select snapshot from workspaces where session_id = '$1' order by rowid desc limit 1"; }
# snapshots on disk that no session records (leaked), and recorded ones missing
on_disk() { ls -A "$T/sbx/snapshots" 2>/dev/null | sort; }
recorded() { sql "select distinct snapshot from workspaces" | sed '/^$/d' | sort; }
leaked() { comm -23 <(on_disk) <(recorded) | tr '\n' ' '; }
missing() { comm -13 <(on_disk) <(recorded) | tr '\n' ' '; }

out=$("$LASH" run "$T/jail.lua" --trust --durable go --json </dev/null 2>&1); rc=$?
same "an uninterrupted durable run succeeds" "$rc" "0"
ref=$(latest)
want=$(state_of "$(last_snap "$ref")")
contains "its last workspace holds every turn's effects" "$want" "./f 644 1,2,3,4,5,"
same "one snapshot for the start and one per call" "$(sql "select count(*) from workspaces where session_id = '$ref'")" "6"
same "and no sandbox is left" "$(ls "$T/sbx" | grep -c '^lb-')" "0"

HANG_AT=3 "$LASH" run "$T/jail.lua" --trust --durable go --json </dev/null > "$T/jail.out" 2>&1 & jp=$!; PIDS+=($jp)
for _ in $(seq 600); do ls "$T"/sbx/lb-*/workspace/hung >/dev/null 2>&1 && break; sleep 0.1; done
if ls "$T"/sbx/lb-*/workspace/hung >/dev/null 2>&1; then
  kill -9 "$jp"; wait "$jp" 2>/dev/null
  ok "a durable run was SIGKILLed mid-command in turn 3 (after the command's effects)"
  sid=$(latest)
  out=$("$LASH" run "$T/jail.lua" --trust --resume "$sid" --json </dev/null 2>&1); rc=$?
  same "--resume (durable, as the session was) finishes" "$rc" "0"
  contains "with the answer an uninterrupted run gives" "$out" "finished after 5"
  same "the workspace equals the uninterrupted run's (bytes, modes, files, directories)" \
    "$(state_of "$(last_snap "$sid")")" "$want"
  same "the killed run's sandbox was destroyed, and the resumed one's" "$(ls "$T/sbx" | grep -c '^lb-')" "0"

  # -- rewind to the end of turn 2 (message 5: its results), then go on
  same "sessions show numbers the messages" "$("$LASH" sessions show "$sid" --json | py 'len(v["messages"])')" "12"
  out=$("$LASH" sessions rewind "$sid" --to 5 --json); rc=$?
  same "sessions rewind --to 5 succeeds" "$rc" "0"
  same "the conversation ends at message 5" "$("$LASH" sessions show "$sid" --json | py 'len(v["messages"])')" "5"
  snap=$(last_snap "$sid")
  contains "and the session's workspace is turn 2's" "$(state_of "$snap")" "./f 600 1,2,"
  same "the snapshots of the turns rewound past are removed from disk" "$(leaked)" ""
  same "  and every snapshot still recorded is there" "$(missing)" ""
  lacks "without turn 3's directory" "$(state_of "$snap")" "d3"
  out=$("$LASH" run "$T/jail.lua" --trust --resume "$sid" "again" --json </dev/null 2>&1); rc=$?
  same "the rewound session continues" "$rc" "0"
  # a new prompt counts the results again: turns 3.. run from turn 2's files
  contains "from turn 2's files: turn 3 runs on them" "$(state_of "$(last_snap "$sid")")" "./f 644 1,2,3,"

  # -- fork at message 3 (turn 1's results): a new session, the old untouched
  before=$("$LASH" sessions show "$sid" --json | py 'len(v["messages"])')
  out=$("$LASH" sessions fork "$sid" --at 3 --json); rc=$?
  same "sessions fork --at 3 succeeds" "$rc" "0"
  fid=$(printf '%s' "$out" | py 'v["id"]')
  same "the fork holds messages 1..3" "$("$LASH" sessions show "$fid" --json | py 'len(v["messages"])')" "3"
  contains "and turn 1's workspace" "$(state_of "$(last_snap "$fid")")" "./f 644 1,"
  same "the original is untouched" "$("$LASH" sessions show "$sid" --json | py 'len(v["messages"])')" "$before"
  out=$("$LASH" sessions rewind "$sid" --to 99 --json 2>&1); rc=$?
  same "rewinding past the end is a usage error" "$rc" "2"
  contains "naming the range" "$out" "from 0 to $before"

  # -- removing sessions removes the snapshots only they record; a fork keeps shared ones
  fsnap=$(last_snap "$fid")
  "$LASH" sessions rm "$sid" >/dev/null 2>&1
  same "sessions rm: the removed session's snapshots are gone" "$(leaked)" ""
  [ -d "$T/sbx/snapshots/$fsnap" ] && ok "  the fork's workspace, taken by the removed session, is kept" \
    || not_ok "  the fork's workspace, taken by the removed session, is kept" "$fsnap is gone"
  "$LASH" sessions rm "$fid" "$ref" >/dev/null 2>&1
  same "  with every durable session removed, no snapshot is left" "$(on_disk | tr '\n' ' ')" ""
else
  not_ok "the sandbox command never hung" "$(cat "$T/jail.out")"
fi

# -- /rewind in lash chat: the conversation goes back, in memory and in the saved session
cat > "$T/chat.lua" <<'LUA'
local lash = require "lash"
return lash.agent { name = "echoer", model = function(messages)
  return "you said " .. messages[#messages].parts[1].text .. " (" .. #messages .. " messages)"
end }
LUA
out=$(printf 'one\ntwo\nthree\n/rewind\nfour\n/rewind 2\nfive\n/rewind 99\n' | "$LASH" chat "$T/chat.lua" 2>&1)
contains "chat /rewind: without N, back to before the last prompt" "$out" "rewound to message 4 (2 dropped)"
contains "  the next turn sees the rewound history" "$out" "you said four (5 messages)"
contains "  /rewind N keeps messages 1..N" "$out" "you said five (3 messages)"
contains "  an N out of range names the range" "$out" "a message number from 0 to 4"
cid=$(latest)
same "  the saved session is rewound too" \
  "$("$LASH" sessions show "$cid" --json | py '" ".join(p["text"] for m in v["messages"] for p in m["parts"])')" \
  "one you said one (1 messages) five you said five (3 messages)"
out=$(printf 'one\ntwo\n/rewind 1\nthree\n' | "$LASH" chat "$T/chat.lua" --no-save 2>&1)
contains "  unsaved, /rewind works in memory" "$out" "you said three (2 messages)"

# -- lash sandbox snapshot rm
sb=$("$LASH" sandbox create 2>/dev/null | tail -1)
s1=$("$LASH" sandbox snapshot "$sb" 2>/dev/null)
"$LASH" sandbox destroy "$sb" >/dev/null 2>&1
[ -d "$T/sbx/snapshots/$s1" ] && ok "sandbox snapshot: a snapshot outlives its sandbox" \
  || not_ok "sandbox snapshot: a snapshot outlives its sandbox" "no $s1"
out=$("$LASH" sandbox snapshot rm "$s1" 2>&1); rc=$?
same "sandbox snapshot rm removes it" "$rc:$(ls -A "$T/sbx/snapshots" | tr '\n' ' ')" "0:"
contains "  saying so" "$out" "removed $s1"
"$LASH" sandbox snapshot rm "$s1" >/dev/null 2>&1; rc=$?
same "  one already gone is fine (exit 0)" "$rc" "0"
out=$("$LASH" sandbox snapshot rm ../../etc 2>&1); rc=$?
same "  a malformed id is refused" "$rc" "1"
contains "  naming what an id is" "$out" "is not a local snapshot id"

done_testing
