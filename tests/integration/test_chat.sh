#!/usr/bin/env bash
# `lash chat` through a real terminal: tests/integration/chat_pty.py drives
# it on a pty (the kernel's line discipline, libedit's editing), with stdin
# piped, and under tmux, against a scripted offline model (a Lua spec whose
# model streams text, calls tools, waits on a gate file, fails on demand)
# and the fake OpenAI server (a real Chat Completions stream after
# `/model openai:...`). Covers streaming, tool calls, approvals (y, n,
# edit), Ctrl-C cancelling a turn mid-tool (its sandbox command killed),
# /reset /model /tools /help /save, unknown commands, history recall and
# persistence, NO_COLOR, the exit codes. TAP output.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
[ -n "$PY" ] || skip_all "needs python3 (its pty module drives the terminal)"
"$PY" -c 'import os; os.openpty()' 2>/dev/null || skip_all "no pseudo-terminals here (/dev/ptmx)"
T=$(mktemp -d /tmp/lash-chat.XXXXXX); chmod 711 "$T"
SERVER=
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$T"; }
at_exit cleanup
unset LASH_CONFIG LASH_MODEL LASH_SANDBOX_BACKEND ANTHROPIC_API_KEY ANTHROPIC_BASE_URL NO_COLOR
export LASH_SANDBOX_ROOT=$T/sandboxes XDG_CONFIG_HOME=$T/cfg
mkdir -p "$T/home"
sandbox=0
probe=$(jail_probe)
[ "$probe" = yes ] && sandbox=1
export CHAT_MARK="sleep 7$$.5"  # not a pattern other tests look for (sleep 9x)

"$PY" tests/servers/fake_openai.py --fixture text_stream --lifetime 600 >"$T/openai.port" 2>"$T/openai.err" &
SERVER=$!
for _ in $(seq 200); do [ -s "$T/openai.port" ] && break; sleep 0.05; done
port=$(cat "$T/openai.port")

cat >"$T/spec.lua" <<'LUA'
-- The scripted model: the last user line picks what it does.
local lash = require "lash"
local DIR = os.getenv("CHAT_T")
local function exists(p) local f = io.open(p) if f then f:close() return true end return false end
local function last_user(messages)
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" then
      for _, p in ipairs(m.parts) do
        if p.type == "text" then return p.text end
        if p.type == "tool_result" then return nil, p end
      end
    end
  end
end
local scripted = require("lash.models.func").new(function(messages)
  local text, result = last_user(messages)
  if result then return "after " .. result.name .. ": " .. result.status .. " " .. result.content end
  if text == "tool" then return { tool_calls = { { name = "echo_tool", args = { word = "ping" } } } } end
  if text == "approve" then return { tool_calls = { { name = "danger", args = { target = "disk" } } } } end
  if text == "sleep" then
    return { tool_calls = { { name = "run_command", args = { command = os.getenv("CHAT_MARK"), timeout_seconds = 300 } } } }
  end
  if text == "fail" then error(lash.error("provider", "scripted failure"), 0) end
  if text == "keep" then
    return { tool_calls = { { name = "write_file", args = { path = "kept.txt", content = "from turn one" } } } }
  end
  if text == "roles" then
    -- what the conversation reads like to the model: each message's role,
    -- and the last answer's text
    local roles, said = {}, ""
    for i, m in ipairs(messages) do
      roles[i] = m.role
      if m.role == "assistant" then
        for _, p in ipairs(m.parts) do if p.type == "text" then said = p.text end end
      end
    end
    return "roles: " .. table.concat(roles, ",") .. "; last said: " .. said
  end
  if text == "recall" then return { tool_calls = { { name = "read_file", args = { path = "kept.txt" } } } } end
  return "you said: " .. tostring(text) .. " (history " .. #messages .. ")"
end, { name = "scripted" })
-- "hello" streams in two pieces with a gate between them
local model = { name = "function:scripted" }
function model:request(req)
  if last_user(req.messages) == "hang" and req.on_text then
    -- streams a little, then waits for a file nobody makes: only a cancel ends it
    req.on_text("Thinking")
    while not exists(DIR .. "/never") do lash.sleep(0.05) end
  end
  if last_user(req.messages) == "hello" and req.on_text then
    req.on_text("Hello ")
    local f = io.open(DIR .. "/at_gate", "w") f:close()
    while not exists(DIR .. "/gate") do lash.sleep(0.05) end
    req.on_text("world")
    return { parts = { { type = "text", text = "Hello world" } }, finish = "stop", provider_finish = "stop",
             model = self.name, usage = { input_tokens = 3, output_tokens = 2, cache_read_tokens = 0,
                                          cache_write_tokens = 0 } }
  end
  return scripted:request(req)
end
local caps = {}
if os.getenv("CHAT_SANDBOX") == "1" then caps[1] = lash.sandbox_capability { sandbox_timeout = 600 } end
return lash.agent {
  name = "chatty",
  model = model,
  tools = {
    lash.tool { name = "echo_tool", description = "echo a word back",
                parameters = { type = "object", properties = { word = { type = "string" } }, required = { "word" } },
                handler = function(_, args) return "echo " .. args.word end },
    lash.tool { name = "danger", description = "needs approval", requires_approval = true,
                parameters = { type = "object", properties = { target = { type = "string" } }, required = { "target" } },
                handler = function(_, args) return "danger ran on " .. args.target end },
  },
  capabilities = caps,
}
LUA
[ $sandbox = 1 ] || echo "# no bubblewrap jail here: the Ctrl-C-mid-tool checks skip"
"$PY" tests/integration/chat_pty.py "$LASH" "$T" "$sandbox" "$port"
