#!/usr/bin/env bash
# Saved conversations through the real CLI: every `lash run` recorded in
# SQLite; --continue / --resume carry the history on; a run killed with
# SIGKILL while its tool sleeps (a Lua tool, a sandbox command) or while the
# model streams keeps everything already said and can be continued; runs
# writing at once (new sessions, and two continuing the same one) all land,
# none interleaved; an approval stop resumed with --yes; the file locked
# mid-run; a damaged, newer-schema or locked database refused with the cause
# and left as it was; `lash sessions list|show|rm` (and --json). TAP output.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3 (its sqlite3 module holds a lock)"
T=$(mktemp -d)
PIDS=()
# a run killed with SIGKILL leaves its sandbox (and its disk quota's mounts)
# to gc: destroy them so rm can remove the tree
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for b in "$T"/sbx/lb-*; do
    [ -d "$b" ] && LASH_SANDBOX_ROOT=$T/sbx "$LASH" sandbox destroy "${b##*/}" >/dev/null 2>&1
  done
  rm -rf "$T"
}
at_exit cleanup
unset LASH_CONFIG LASH_MODEL LASH_NO_SAVE LASH_SESSIONS_BUSY_TIMEOUT
export HOME=$T/home XDG_STATE_HOME=$T/state XDG_CONFIG_HOME=$T/cfg
unset LASH_SESSIONS_DB
mkdir -p "$HOME"
DB=$XDG_STATE_HOME/lash/sessions.db

# jq-less JSON reading: py 'expr over v' < json
py() { "$PY" -c "import json,sys; v=json.load(sys.stdin); print($1)"; }
exit_line() { grep '"type":"exit"' | tail -1; }
# wait_for FILE: bounded wait (a hang guard, not a timing assertion)
wait_for() { for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }

# A spec whose scripted model starts a long tool on "start", waits at a
# rendezvous on "meet N", and otherwise answers with a digest of the whole
# history it was sent (so a continued run shows what it remembered).
cat > "$T/agent.lua" <<'LUA'
local lash = require "lash"
local function digest(messages)
  local d = {}
  for _, m in ipairs(messages) do
    for _, p in ipairs(m.parts) do
      d[#d + 1] = m.role .. ":" .. p.type .. ":" .. (p.text or ((p.name or "") .. "/" .. (p.status or "")))
    end
  end
  return "saw " .. table.concat(d, " | ")
end
local function last_text(messages)
  local last = messages[#messages]
  local p = last.parts[#last.parts]
  return last.role == "user" and p.type == "text" and p.text or nil
end
return lash.agent {
  name = "keeper",
  model = function(messages, info)
    local t = last_text(messages)
    if t == "start" then
      return { text = "Starting the long job.", tool_calls = { { name = "long_job", args = {}, id = "call_long" } } }
    elseif t and t:match("^meet %d+$") then
      return { text = "Meeting.", tool_calls = { { name = "meet", args = { n = tonumber(t:match("%d+")) }, id = "call_meet" } } }
    elseif t == "approve" then
      return { text = "Asking first.", tool_calls = { { name = "guarded", args = {}, id = "call_guarded" } } }
    end
    return digest(messages)
  end,
  tools = {
    lash.tool { name = "long_job", description = "Sleeps a long time.",
      parameters = { type = "object", properties = {} },
      handler = function()
        local f = assert(io.open(os.getenv("MARK") .. "/started", "w")); f:close()
        lash.sleep(120)
        return "done"
      end },
    lash.tool { name = "meet", description = "Waits until n runs have arrived.",
      parameters = { type = "object", properties = { n = { type = "integer" } }, required = { "n" } },
      handler = function(_, args)
        local dir = os.getenv("MARK")
        local f = assert(io.open(dir .. "/arrived." .. lash.sys.getpid(), "w")); f:close()
        for _ = 1, 1200 do
          local c = 0
          for i in io.popen("ls " .. dir):lines() do if i:match("^arrived%.") then c = c + 1 end end
          if c >= args.n then return "met " .. c end
          lash.sleep(0.05)
        end
        return "gave up"
      end },
    lash.tool { name = "guarded", description = "Needs approval.", requires_approval = true,
      parameters = { type = "object", properties = {} },
      handler = function() return "guarded ran" end },
  },
}
LUA

# -- every run is recorded; --continue carries the history
out=$("$LASH" run "$T/agent.lua" --trust "hello" --json </dev/null); rc=$?
same "a run succeeds" "$rc" "0"
sid=$(printf '%s\n' "$out" | exit_line | py 'v["session"]')
same "the exit line names the saved session" "${#sid}" "12"
[ -f "$DB" ] && ok "the database is under XDG_STATE_HOME/lash" || not_ok "the database is under XDG_STATE_HOME/lash" "$(ls -R "$T/state")"
same "the directory is private (0700)" "$(stat -c %a "$XDG_STATE_HOME/lash")" "700"
same "the database is in WAL mode" "$("$PY" -c "import sqlite3;print(sqlite3.connect('$DB').execute('pragma journal_mode').fetchone()[0])")" "wal"
show=$("$LASH" sessions show "$sid" --json)
same "the session holds the prompt and the answer" "$(printf '%s' "$show" | py 'len(v["messages"])')" "2"
same "with the spec, agent and model" "$(printf '%s' "$show" | py 'v["session"]["spec"]+" "+v["session"]["agent"]+" "+v["session"]["model"]')" "$T/agent.lua keeper function"
same "and the run's outcome and usage" "$(printf '%s' "$show" | py 'v["runs"][0]["status"]+" "+str(v["runs"][0]["usage"]["requests"])')" "complete 1"
out=$("$LASH" run "$T/agent.lua" --trust --continue "and now?" --json </dev/null); rc=$?
same "--continue succeeds" "$rc" "0"
contains "the model was sent the earlier conversation" "$out" "saw user:text:hello | assistant:text:saw user:text:hello | user:text:and now?"
same "it continued the same session" "$(printf '%s\n' "$out" | exit_line | py 'v["session"]')" "$sid"
same "which now has two runs and four messages" "$("$LASH" sessions show "${sid:0:6}" --json | py 'str(len(v["runs"]))+" "+str(len(v["messages"]))')" "2 4"
out=$("$LASH" run "$T/agent.lua" --trust "not saved" --no-save --json </dev/null)
lacks "--no-save: no session in the exit line" "$out" '"session"'
same "--no-save: nothing new recorded" "$("$LASH" sessions list --json | py 'len(v)')" "1"
LASH_NO_SAVE=1 "$LASH" run "$T/agent.lua" --trust "not saved" >/dev/null </dev/null
same "LASH_NO_SAVE=1 does the same" "$("$LASH" sessions list --json | py 'len(v)')" "1"

# -- SIGKILL mid-run (the tool is sleeping): what was said survives
mkdir -p "$T/kill"
MARK=$T/kill "$LASH" run "$T/agent.lua" --trust start --json </dev/null > "$T/kill.out" 2>&1 & kpid=$!; PIDS+=($kpid)
if wait_for "$T/kill/started"; then
  kill -9 "$kpid"; wait "$kpid" 2>/dev/null
  ok "the run was killed with SIGKILL while its tool slept"
else
  not_ok "the tool never started" "$(cat "$T/kill.out")"
fi
latest=$("$LASH" sessions list --json | py 'v[0]["id"]')
killed=$("$LASH" sessions show "$latest" --json)
same "the prompt and the model's tool-calling turn were kept" \
  "$(printf '%s' "$killed" | py '" ".join(m["role"] for m in v["messages"])')" "user assistant"
same "with the model's words" "$(printf '%s' "$killed" | py 'v["messages"][1]["parts"][0]["text"]')" "Starting the long job."
same "the killed run shows as interrupted" "$("$LASH" sessions list --json | py 'v[0]["status"]')" "interrupted"
out=$("$LASH" run "$T/agent.lua" --trust --continue "what happened?" --json </dev/null); rc=$?
same "--continue after SIGKILL succeeds" "$rc" "0"
contains "the continued run saw everything said before the kill" "$out" \
  "saw user:text:start | assistant:text:Starting the long job. | assistant:tool_call:long_job/ | user:tool_result:long_job/retry | user:text:what happened?"
same "the unfinished call was answered as interrupted, and saved" \
  "$("$LASH" sessions show "$latest" --json | py '[p["content"][:24] for m in v["messages"] for p in m["parts"] if p["type"]=="tool_result"][0]')" \
  "This call did not finish"
same "the session now ends complete" "$("$LASH" sessions show "$latest" --json | py 'v["runs"][-1]["status"]')" "complete"

# -- the same with a real sandbox: SIGKILL while the jail's command sleeps
probe=$(jail_probe)
if [ "$probe" = yes ]; then
  mark="sleep 4242$$"
  cat > "$T/jail.lua" <<LUA
local lash = require "lash"
return lash.agent {
  name = "jailed",
  model = function(messages)
    local last = messages[#messages]
    local p = last.parts[#last.parts]
    if last.role == "user" and p.type == "text" and p.text == "sleep" then
      return { text = "Running the long command.", tool_calls = { { name = "run_command", id = "call_sleep",
               args = { command = "echo begun > /tmp/x; $mark" } } } }
    end
    local seen = {}
    for _, m in ipairs(messages) do seen[#seen + 1] = m.role .. ":" .. m.parts[1].type end
    return "saw " .. table.concat(seen, " ")
  end,
  capabilities = { lash.sandbox_capability { sandbox_timeout = 300, default_command_timeout = 120 } },
}
LUA
  mkdir -p "$T/sbx"; chmod 711 "$T"
  LASH_SANDBOX_ROOT=$T/sbx "$LASH" run "$T/jail.lua" sleep --json </dev/null > "$T/jail.out" 2>&1 & jpid=$!; PIDS+=($jpid)
  for _ in $(seq 600); do pgrep -f "$mark" >/dev/null && break; sleep 0.1; done
  if pgrep -f "$mark" >/dev/null; then
    kill -9 "$jpid"; wait "$jpid" 2>/dev/null
    ok "a run was SIGKILLed while its sandbox command slept"
    for _ in $(seq 100); do pgrep -f "$mark" >/dev/null || break; sleep 0.1; done
    same "the jail died with lash (nothing left running)" "$(pgrep -f "$mark" | wc -l)" "0"
    js=$("$LASH" sessions list --json | py 'v[0]["id"]')
    same "the prompt and the model's turn with the sandbox call were kept" \
      "$("$LASH" sessions show "$js" --json | py '" ".join(m["role"] for m in v["messages"]) + " " + v["messages"][1]["parts"][1]["name"]')" \
      "user assistant run_command"
    out=$(LASH_SANDBOX_ROOT=$T/sbx "$LASH" run "$T/jail.lua" --continue "go on" --json </dev/null 2>&1); rc=$?
    same "--continue in a new sandbox succeeds" "$rc" "0"
    contains "and the model was sent everything said before the kill" "$out" \
      "saw user:text assistant:text user:tool_result user:text"
  else
    not_ok "the sandbox command never started" "$(cat "$T/jail.out")"
  fi
else
  skip "" "no bubblewrap jail here: the sandboxed SIGKILL case"
fi

# -- SIGKILL while the model is still streaming its answer (an OpenAI-style
# stream that sends two chunks and then stalls): what it showed is kept
mkdir -p "$T/stream"
"$PY" - "$T/stream" > "$T/stream/port" <<'PY' & PIDS+=($!)
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
d = sys.argv[1]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for text in ("The answer ", "begins like this"):
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]}
            self.wfile.write(("data: " + json.dumps(chunk) + "\n\n").encode())
            self.wfile.flush()
        open(os.path.join(d, "stalled"), "w").close()
        time.sleep(300)
s = HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
strpid=$!
for _ in $(seq 200); do [ -s "$T/stream/port" ] && break; sleep 0.05; done
cat > "$T/plain.lua" <<'LUA'
local lash = require "lash"
return lash.agent { name = "plain", instructions = "Answer." }
LUA
OPENAI_BASE_URL=http://127.0.0.1:$(cat "$T/stream/port")/v1 OPENAI_API_KEY=sk-test \
  "$LASH" run "$T/plain.lua" "tell me" --model openai:gpt-4.1 --json </dev/null > "$T/stream/out" 2>&1 & spid=$!; PIDS+=($spid)
partial=
if wait_for "$T/stream/stalled"; then
  for _ in $(seq 300); do
    partial=$("$PY" -c "import sqlite3;r=sqlite3.connect('$DB').execute('select partial from runs where partial is not null').fetchall();print(r[0][0] if r else '')")
    [ "$partial" = "The answer begins like this" ] && break; sleep 0.1
  done
fi
same "the streamed text is saved as it arrives" "$partial" "The answer begins like this"
kill -9 "$spid"; wait "$spid" 2>/dev/null
kill "$strpid" 2>/dev/null; wait "$strpid" 2>/dev/null
ssid=$("$LASH" sessions list --json | py 'v[0]["id"]')
contains "sessions show says what the cut turn streamed" "$("$LASH" sessions show "$ssid")" "streamed before it stopped: The answer begins like this"
"$LASH" run "$T/plain.lua" --continue "go on" --model test --json </dev/null >/dev/null 2>&1
same "--continue puts the streamed text in the history, marked interrupted" \
  "$("$LASH" sessions show "$ssid" --json | py '[(m["role"], m.get("finish"), m["parts"][0].get("text")) for m in v["messages"]][:3]')" \
  "[('user', None, 'tell me'), ('assistant', 'interrupted', 'The answer begins like this'), ('user', None, 'go on')]"

# -- SIGTERM mid-run: lash cancels, and the session says so
mkdir -p "$T/term"
MARK=$T/term "$LASH" run "$T/agent.lua" --trust start --json </dev/null > "$T/term.out" 2>&1 & tpid=$!; PIDS+=($tpid)
wait_for "$T/term/started" && kill -TERM "$tpid"
wait "$tpid"; rc=$?
same "SIGTERM mid-run exits 143" "$rc" "143"
tsid=$(exit_line < "$T/term.out" | py 'v["session"]')
same "the exit line still names the session" "${#tsid}" "12"
same "the run is saved as cancelled, with what was said" \
  "$("$LASH" sessions show "$tsid" --json | py 'v["runs"][-1]["status"] + " " + " ".join(m["role"] for m in v["messages"])')" \
  "cancelled user assistant"

# -- an approval stop, resumed without a prompt by --resume ID --yes
out=$("$LASH" run "$T/agent.lua" --trust approve --json </dev/null 2>/dev/null); rc=$?
same "a call needing approval stops the run (exit 9)" "$rc" "9"
asid=$(printf '%s\n' "$out" | exit_line | py 'v["session"]')
contains "the message says how to resume it" "$(printf '%s\n' "$out" | exit_line)" "--resume $asid --yes"
out=$("$LASH" run "$T/agent.lua" --trust --resume "$asid" --yes --json </dev/null); rc=$?
same "--resume ID --yes runs the pending call" "$rc" "0"
contains "the guarded tool ran and the model saw its result" "$out" "user:tool_result:guarded/ok"

# -- runs writing at once: four new sessions meet mid-run
before=$("$LASH" sessions list --json | py 'len(v)')
mkdir -p "$T/meet"
cpids=()
for i in 1 2 3 4; do
  MARK=$T/meet "$LASH" run "$T/agent.lua" --trust "meet 4" --json </dev/null > "$T/meet.$i.out" 2>&1 & cpids+=($!); PIDS+=($!)
done
allok=0
for p in "${cpids[@]}"; do wait "$p" || allok=1; done
same "four concurrent runs all succeed" "$allok" "0"
grep -h '"type":"exit"' "$T"/meet.*.out | py 'v' >/dev/null 2>&1
same "four more sessions" "$("$LASH" sessions list --json | py 'len(v)')" "$((before + 4))"
sids=$(grep -h '"type":"exit"' "$T"/meet.*.out | while read -r l; do printf '%s' "$l" | py 'v["session"]'; done | sort -u | wc -l)
same "each its own" "$sids" "4"
good=0
for f in "$T"/meet.*.out; do
  s=$(exit_line < "$f" | py 'v["session"]')
  c=$("$LASH" sessions show "$s" --json | py '" ".join(m["role"] for m in v["messages"])')
  [ "$c" = "user assistant user assistant" ] && good=$((good + 1))
done
same "every one holds its whole conversation" "$good" "4"
contains "every run met the others mid-run (they overlapped)" "$(cat "$T"/meet.*.out)" "met 4"

# -- two runs continuing the same session at once: one forks
rm -f "$T"/meet/arrived.*
for i in 1 2; do
  MARK=$T/meet "$LASH" run "$T/agent.lua" --trust --resume "$sid" "meet 2" --json </dev/null > "$T/fork.$i.out" 2>"$T/fork.$i.err" & cpids[$i]=$!; PIDS+=($!)
done
wait "${cpids[1]}"; r1=$?; wait "${cpids[2]}"; r2=$?
same "both succeed" "$r1 $r2" "0 0"
s1=$(exit_line < "$T/fork.1.out" | py 'v["session"]'); s2=$(exit_line < "$T/fork.2.out" | py 'v["session"]')
if [ "$s1" != "$s2" ] && { [ "$s1" = "$sid" ] || [ "$s2" = "$sid" ]; }; then ok "one stayed in the session, the other moved to a new one"
else not_ok "one stayed in the session, the other moved to a new one" "$s1 $s2 (was $sid)"; fi
contains "the one that moved says so" "$(cat "$T"/fork.*.err)" "was continued by another run at the same time"
other=$s1; [ "$s1" = "$sid" ] && other=$s2
same "the fork's parent is the session" "$("$LASH" sessions show "$other" --json | py 'v["session"]["parent"]')" "$sid"
for s in "$sid" "$other"; do
  same "session $s: the old history then its own run, not interleaved" \
    "$("$LASH" sessions show "$s" --json | py '" ".join(m["role"][0] for m in v["messages"])')" "u a u a u a u a"
done
same "the database passes SQLite's integrity check" \
  "$("$PY" -c "import sqlite3;print(sqlite3.connect('$DB').execute('pragma integrity_check').fetchone()[0])")" "ok"

# -- sessions list / show / rm
list=$("$LASH" sessions list)
contains "list shows a header" "$list" "ID            UPDATED"
contains "list shows the first prompt as the title" "$list" "hello"
show=$("$LASH" sessions show "$sid")
contains "show prints the runs" "$show" "run 1: complete"
contains "show prints the messages" "$show" "[3] user"
out=$("$LASH" sessions show ffffffffffff 2>&1); rc=$?
same "show of an unknown id fails (exit 1)" "$rc" "1"
contains "naming it" "$out" "no session ffffffffffff"
out=$("$LASH" sessions rm "$other" --json); rc=$?
same "rm succeeds" "$rc" "0"
same "rm --json lists what went" "$(printf '%s' "$out" | py 'v["removed"][0]')" "$other"
same "the removed session is gone" "$("$LASH" sessions show "$other" >/dev/null 2>&1; echo $?)" "1"
same "its messages went with it" \
  "$("$PY" -c "import sqlite3;print(sqlite3.connect('$DB').execute('select count(*) from messages where session_id=?',('$other',)).fetchone()[0])")" "0"
all_before=$("$LASH" sessions list --json --limit 1000 | py 'len(v)')
"$PY" -c "import sqlite3;c=sqlite3.connect('$DB');c.execute('update sessions set updated_at = updated_at - 40*86400000 where id = ?', ('$sid',));c.commit()"
out=$("$LASH" sessions rm --older-than 30d --json); rc=$?
same "rm --older-than 30d removes just the session untouched for 40 days" "$rc $(printf '%s' "$out" | py 'v["removed"]')" "0 ['$sid']"
same "and leaves the rest" "$("$LASH" sessions list --json --limit 1000 | py 'len(v)')" "$((all_before - 1))"
out=$("$LASH" sessions rm --older-than soon 2>&1); rc=$?
same "a bad age is a usage error (exit 2)" "$rc" "2"
same "sessions path says where" "$("$LASH" sessions path)" "$DB  (XDG_STATE_HOME)"
same "LASH_SESSIONS_DB overrides it" "$(LASH_SESSIONS_DB=/x/s.db "$LASH" sessions path)" "/x/s.db  (LASH_SESSIONS_DB)"

# -- a database lash cannot use is refused with the cause, and not changed
bad=$T/bad.db
head -c 4096 /dev/urandom > "$bad"; sum=$(md5sum < "$bad")
out=$(LASH_SESSIONS_DB=$bad "$LASH" run "$T/agent.lua" --trust "hi" 2>&1); rc=$?
same "a damaged database: the run is refused (exit 1)" "$rc" "1"
contains "saying what is wrong and what to do" "$out" "is damaged or not a SQLite database"
contains "with a way out" "$out" "--no-save"
same "the damaged file is untouched" "$(md5sum < "$bad")" "$sum"
out=$(LASH_SESSIONS_DB=$bad "$LASH" run "$T/agent.lua" --trust "hi" --no-save 2>&1); rc=$?
same "--no-save still runs" "$rc" "0"
newer=$T/newer.db
cp "$DB" "$newer"
"$PY" -c "import sqlite3;c=sqlite3.connect('$newer');c.execute('pragma user_version=99');c.commit()"
sum=$(md5sum < "$newer")
out=$(LASH_SESSIONS_DB=$newer "$LASH" sessions list 2>&1); rc=$?
same "a newer schema: refused (exit 1)" "$rc" "1"
contains "saying so" "$out" "has schema version 99, newer than this lash"
same "the newer database is untouched" "$(md5sum < "$newer")" "$sum"
# another process holds the write lock until told to let go
"$PY" -c "
import sqlite3, os, time
c = sqlite3.connect('$DB', isolation_level=None)
c.execute('begin immediate')
open('$T/locked', 'w').close()
for _ in range(1200):
    if os.path.exists('$T/release'): break
    time.sleep(0.05)
c.execute('rollback')
" & lpid=$!; PIDS+=($lpid)
wait_for "$T/locked"
out=$(LASH_SESSIONS_BUSY_TIMEOUT=100 "$LASH" run "$T/agent.lua" --trust "hi" 2>&1); rc=$?
same "a database locked past the busy timeout: the run is refused (exit 1)" "$rc" "1"
contains "saying it is locked" "$out" "stayed locked by another process"
touch "$T/release"; wait "$lpid"
out=$("$LASH" run "$T/agent.lua" --trust "after the lock" --json </dev/null); rc=$?
same "once released, runs save again" "$rc" "0"

# -- the file locked mid-run (past the busy timeout): the messages wait in
# memory and are written once the lock goes; nothing is lost
mkdir -p "$T/midlock"
ML=$T/midlock
cat > "$T/midlock.lua" <<LUA
local lash = require "lash"
local function wait_file(p)
  for _ = 1, 1200 do
    local f = io.open(p)
    if f then f:close() return true end
    lash.sleep(0.05)
  end
end
return lash.agent {
  name = "midlock",
  model = function(messages, info)
    if info.step == 1 then return { text = "Pausing.", tool_calls = { { name = "pause", args = {}, id = "c1" } } } end
    wait_file("$ML/released")
    return "done after the lock"
  end,
  tools = { lash.tool { name = "pause", description = "Waits for the lock.", parameters = { type = "object", properties = {} },
    handler = function()
      io.open("$ML/in_tool", "w"):close()
      wait_file("$ML/locked")
      return "paused"
    end } },
}
LUA
LASH_SESSIONS_BUSY_TIMEOUT=100 "$LASH" run "$T/midlock.lua" --trust go --json </dev/null > "$ML/out" 2>"$ML/err" & mpid=$!; PIDS+=($mpid)
wait_for "$ML/in_tool"
"$PY" -c "
import sqlite3, os, time
c = sqlite3.connect('$DB', isolation_level=None)
c.execute('begin immediate')
open('$ML/locked', 'w').close()
for _ in range(1200):
    if os.path.exists('$ML/release'): break
    time.sleep(0.05)
c.execute('rollback')
c.close()
open('$ML/released', 'w').close()
" & lpid=$!; PIDS+=($lpid)
for _ in $(seq 600); do grep -q "cannot save to the session" "$ML/err" 2>/dev/null && break; sleep 0.1; done
contains "a write that met the lock warns and keeps the message" "$(cat "$ML/err")" "cannot save to the session"
contains "naming the lock" "$(cat "$ML/err")" "stayed locked by another process"
touch "$ML/release"; wait "$lpid"
wait "$mpid"; rc=$?
same "the run still succeeds" "$rc" "0"
msid=$(exit_line < "$ML/out" | py 'v["session"]')
same "once the lock went, every message was written, in order" \
  "$("$LASH" sessions show "$msid" --json | py '" ".join(m["role"] + ":" + m["parts"][0]["type"] for m in v["messages"]) + " " + v["runs"][0]["status"]')" \
  "user:text assistant:text user:tool_result assistant:text complete"

# -- a place lash may not write: the run goes on, unsaved, and says so
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  mkdir -p "$T/ro"; chmod 555 "$T/ro"; chmod 755 "$T"
  out=$(setpriv --reuid 61234 --regid 61234 --clear-groups env -i PATH="$PATH" HOME=/nonexistent \
    LASH_SESSIONS_DB="$T/ro/sub/sessions.db" "$LASH" run examples/test_model.lua hi 2>&1 </dev/null); rc=$?
  same "an unwritable state directory: the run still succeeds" "$rc" "0"
  contains "warning that it is not saved, and why" "$out" "warning: this run is not saved: cannot write the sessions database $T/ro/sub/sessions.db"
else
  skip "" "the unwritable-directory check needs root and setpriv"
fi

done_testing
