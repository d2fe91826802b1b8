--- `lash chat SPEC [options]`: an interactive session with an agent spec.
--
-- Each line the user enters is one turn: a run of the agent on that
-- prompt with the conversation so far as its history, printed the way
-- `lash run` prints (lash.cli.printer: text as it streams, each tool call and
-- its result, a usage line). Lines starting with `/` are the session's
-- commands (`/help`).
--
-- Input comes from the program's terminal (`host.term`, src/8-cli/term.c):
-- on a terminal, lines are edited with libedit and kept in a history file
-- under $XDG_STATE_HOME/lash/; otherwise standard input is read line by
-- line, so a session can be scripted. Lines are read on lash's loop, and a
-- turn runs as a task on it: Ctrl-C (SIGINT, which the terminal takes
-- while the session is open) cancels the turn, whose sandbox commands are
-- killed, and the conversation goes back to what it was before the turn.
-- At the prompt, Ctrl-C clears the line; a second Ctrl-C on an empty line,
-- or Ctrl-D, ends the session.
-- @module lash.commands.chat
local runtime = require "lash.runtime"
-- a model's, tool's or server's words on the chat's terminal (the printer's
-- one sanitizer; chat always runs on one)
local function shown(s) return require("lash.cli.printer").visible(s) end
local M = {
  signals = true,      -- SIGTERM/SIGHUP stop lash as for `lash run`; SIGINT is the session's
  summary = "talk with an agent spec in an interactive session",
  usage = [[usage: lash chat [SPEC] [options]

An interactive session with the agent in SPEC (a .lua, .yaml or .json
spec, as for `lash run`), or without SPEC with the built-in agent (a
coder in a sandbox, with the configured model). Each line is a turn of one conversation: the
model's text streams as it arrives, tool calls show as `lash run` shows
them, and a tool call that needs approval is asked about inline
(y: allow, n: deny, e: edit its arguments as JSON, then allow).

commands (at the prompt):
  /help            these commands
  /reset           forget the conversation (start a new one)
  /model [M]       show the model, or use M from the next turn on
                   (a continued session keeps the one it last used;
                   /model default goes back to the spec's)
  /tools           list the tools the agent offers
  /save [TITLE]    say which saved session holds the conversation (every
                   turn is recorded in the sessions database); TITLE names
                   it in `lash sessions list`
  /export FILE     write the conversation to FILE (JSON)
  /rewind [N]      go back to message N (as `lash sessions show` numbers
                   them; without N, to before your last prompt): the later
                   messages are dropped, from the saved session too
  /exit            end the session (also Ctrl-D)

keys: line editing and history (up/down arrows) from libedit (emacs
bindings; ~/.editrc with `lash:` lines changes them). Ctrl-C cancels the
running turn: its sandbox commands are killed, and the turn stays in the
conversation as the model left it (what it streamed so far is its answer,
its unfinished tool calls are answered as interrupted), so the next prompt
never follows an unanswered one; `lash run --continue` keeps a cut-short
run the same way. At the prompt Ctrl-C clears the line, and a second
Ctrl-C on an empty line ends the session (exit 130).

options:
  --model M        use model M instead of the spec's
  --yes            approve every tool call that needs approval
  --max-steps N    stop a turn after N model requests (default 50)
  --deps JSON      pass deps to every turn (a JSON object)
  --no-stream      do not stream the model's answers
  --trust          load a Lua spec with the full standard library
  --backend B      the sandbox backend (local, modal) instead of the spec's
  --no-history     do not read or write the input history file
  --continue, -c   continue the most recent saved session of this spec
                   (of the built-in agent: in this directory)
  --resume ID      continue saved session ID (or a unique prefix of it)
  --no-save        do not record this session (also LASH_NO_SAVE=1)

Every turn is recorded as it happens (spec, model, messages, usage,
outcome) in the sessions database, as `lash run` records its runs; see
`lash sessions`; a cancelled turn is recorded as cancelled.

The input history is $XDG_STATE_HOME/lash/chat_history (default
~/.local/state/lash/chat_history), mode 0600. When standard input is not a
terminal, lines are read as they arrive and nothing is edited or kept; a
turn that fails then ends the session with its exit code. On a terminal a
failed turn is reported and the session goes on. Ctrl-D (or the end of
the input, or /exit) exits 0; a second Ctrl-C exits 130 (SIGINT).]],
}

local HELP = [[
/help            these commands
/reset           forget the conversation
/model [M]       show the model, or switch to M for the next turns
                 (/model default: back to the spec's or the configured one)
/tools           list the agent's tools
/save [TITLE]    say which saved session this is (every turn is recorded); TITLE names it
/export FILE     write the conversation to FILE (JSON)
/rewind [N]      back to message N (without N: to before your last prompt)
/exit            end the session (or Ctrl-D)
Ctrl-C cancels a running turn; twice at an empty prompt it ends the session.]]

local OPTIONS = {
  ["--model"] = { "model", "value" }, ["--yes"] = { "yes", "flag" }, ["--max-steps"] = { "max_steps", "count" },
  ["--deps"] = { "deps", "value" }, ["--no-stream"] = { "no_stream", "flag" }, ["--trust"] = { "trust", "flag" },
  ["--backend"] = { "backend", "value" }, ["--no-history"] = { "no_history", "flag" },
  ["--continue"] = { "continue", "flag" }, ["-c"] = { "continue", "flag" }, ["--resume"] = { "resume", "value" },
  ["--no-save"] = { "no_save", "flag" },
}

local function parse_args(args, cli)
  return cli.parse_options(args, OPTIONS)
end

--- Where the input history lives: chat_history in lash's state directory
-- ($XDG_STATE_HOME/lash, else ~/.local/state/lash); nil without one.
function M.history_path(getenv)
  local dir = require("lash.paths").user_dir("state", getenv)
  return dir and dir .. "/chat_history"
end

local Session = {}
Session.__index = Session

function Session:say(style, s)
  self.out(self.painter(style, shown(s)) .. "\n")
end

-- The model the next turn uses, as shown to the user.
function Session:model_label()
  return require("lash.agent").model_label(self.model or self.agent.model)
end

-- Ctrl-C at a question: the turn ends here, as cancelled. Raised (the run
-- unwinds at once, cleaning up) rather than a task cancel, which would
-- only land at the run's next wait and could hit its cleanup instead.
function Session:cancelled_here()
  error(runtime.error("cancelled", "the turn was cancelled at an approval question"), 0)
end

-- Ask about a tool call that needs approval: y, n or e (edit the
-- arguments as JSON). Ctrl-C here cancels the turn.
function Session:ask(call)
  local json = require "lash.json"
  if call.kind == "elicitation" then return self:ask_elicitation(call) end
  while true do
    local args = require("lash.cli.printer").one_line(json.try_encode_canonical(call.args or {}) or "", 100)
    local line, why = self.term.read(string.format("Allow %s %s? [y/n/e] ", shown(call.name), args))
    -- piped answers are not echoed by a terminal: show them in the transcript
    if line and not self.interactive then self.out(line .. "\n") end
    if not line then
      if why == "interrupt" then return self:cancelled_here() end
      return "The user denied this tool call (no answer)."
    end
    local a = line:lower():match("^%s*(%a*)")
    if a == "y" or a == "yes" then return true end
    if a == "n" or a == "no" then return "The user denied this tool call." end
    if a == "e" or a == "edit" then
      local text = json.try_encode_canonical(call.args or {}) or "{}"
      local edited, ewhy = self.term.read("args> ", text)
      if not edited then
        if ewhy == "interrupt" then return self:cancelled_here() end
        return "The user denied this tool call (no answer)."
      end
      local v, derr = json.try_decode(edited)
      if type(v) == "table" then return { allow = true, args = v } end
      self:say("yellow", "not a JSON object (" .. tostring(derr or edited) .. "); answer again")
    else
      self:say("dim", "answer y (allow), n (deny) or e (edit the arguments)")
    end
  end
end

-- An MCP server asks the user: answer each field (empty keeps the default).
function Session:ask_elicitation(call)
  self.out(shown(string.format("%s asks: %s\n", tostring(call.server), tostring(call.message))))
  local line = self.term.read("Answer? [y/n] ")
  if not line or not line:lower():match("^%s*y") then return false end
  local props = type(call.schema) == "table" and type(call.schema.properties) == "table"
    and call.schema.properties or {}
  local names, args = {}, {}
  for k in pairs(props) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local p, d = props[k], call.args and call.args[k]
    local v = self.term.read(shown(string.format("  %s%s: ", type(p.title) == "string" and p.title or k,
                                                 d ~= nil and (" [" .. tostring(d) .. "]") or "")))
    if v == nil then return false end
    if v ~= "" then
      if p.type == "number" or p.type == "integer" then args[k] = tonumber(v) or v
      elseif p.type == "boolean" then args[k] = v:lower():match("^[yt1]") ~= nil
      else args[k] = v end
    end
  end
  return { allow = true, args = args }
end

-- Saving stops for this session (said once); the chat goes on.
function Session:save_failed(err)
  self:say("yellow", "warning: this session is no longer saved: "
    .. tostring(type(err) == "table" and err.message or err))
  self.saving = false
end

-- The saved session this turn is recorded in (started with the first
-- turn: a chat without turns leaves no session), its run begun; or nil.
function Session:recording(prompt, label)
  if not self.saving then return nil end
  local ok, err = pcall(function()
    if not self.session then
      self.session = self.store:start { kind = "chat", spec = self.spec_abs, agent = self.agent.name, model = label }
    end
    self.session:begin { prompt = prompt, model = label }
  end)
  if not ok then
    self:save_failed(err)
    return nil
  end
  local rec = self.session
  if self.unsaved_closing then
    rec:record(self.unsaved_closing)
    self.unsaved_closing = nil
  end
  return rec
end

-- Record one message; a failure is said once per turn (record keeps it
-- and writes it before the next one).
function Session:record(rec, msg)
  local ok, err = rec:record(msg)
  if not ok and not self.record_warned then
    self.record_warned = true
    self:say("yellow", "warning: cannot save to the session: "
      .. tostring(type(err) == "table" and err.message or err) .. " (kept and retried)")
  end
end

function Session:close_run(rec, outcome)
  local ok, err = rec:close_run(outcome)
  if not ok then
    self:say("yellow", "warning: the session " .. tostring(rec.id) .. " could not be finished: "
      .. tostring(type(err) == "table" and err.message or err))
  end
  if rec.forked_from and not self.fork_said then
    self.fork_said = true
    self:say("dim", "note: session " .. rec.forked_from .. " was continued elsewhere at the same time; "
      .. "this chat goes on as session " .. rec.id)
  end
end

function Session:cancel_turn()
  if self.turn_task then
    self.cancelled = true
    self.turn_task:cancel()
  end
end

-- One turn: a run on `prompt` with the conversation as history. Returns
-- nil, or an outcome when the session must end.
function Session:turn(prompt)
  local render = require "lash.cli.printer"
  local label = self:model_label()
  local rec = self:recording(prompt, label)
  self.record_warned = false
  local printer = render.new { write = self.out, tty = self.tty_out }
  local handle = printer:handler()
  local opts = {
    history = self.history, model = self.model, model_settings = self.model_settings,
    limits = self.limits, deps = self.deps, stream = self.stream, toolsets = self.toolsets,
    on_event = function(ev)
      -- the session's header said who and what; each turn's own start is quiet
      if ev.type == "run_start" then printer.started = runtime.now() return end
      -- what the model streams, kept for a turn cut short (Ctrl-C)
      if ev.type == "text_delta" then self.streamed[#self.streamed + 1] = ev.text
      elseif ev.type == "model_request" or ev.type == "usage" then self.streamed = {} end
      handle(ev)
    end,
  }
  if rec then opts.on_message = function(msg) self:record(rec, msg) end end
  if self.exporter then
    local rt = self.exporter:run_tracer { agent = self.agent.name, model = label,
                                          conversation = rec and rec.id, spec = self.spec_path }
    local print_event, save_message = opts.on_event, opts.on_message
    opts.on_event = function(ev) print_event(ev); rt.on_event(ev) end
    opts.on_message = function(msg, i) if save_message then save_message(msg, i) end rt.on_message(msg) end
  end
  if self.yes then
    opts.approve = function() return true end
  else
    opts.approve = function(_, call) return self:ask(call) end
  end
  self.cancelled = false
  self.streamed = {}
  self.term.forget_interrupts()
  -- the conversation's sandbox: the same one every turn (a fresh one if it
  -- ended while the user was away)
  local agent, renewed = self.conversation:agent()
  if not agent then
    printer:close()
    if rec then self:close_run(rec, { status = "error", error_kind = "sandbox", error_message = tostring(renewed) }) end
    self:say("red", "✗ " .. tostring(renewed))
    return nil
  end
  if renewed > 0 then
    self:say("yellow", "the conversation's sandbox had ended (its sandbox_timeout passed); this turn starts in a fresh one")
  end
  local ok, task = pcall(agent.start, agent, prompt, opts)
  if not ok then
    printer:close()
    if rec then self:close_run(rec, { status = "error", error_kind = "usage", error_message = tostring(task) }) end
    self:say("red", "✗ " .. tostring(type(task) == "table" and task.message or task))
    return nil
  end
  self.turn_task = task
  local term = self.term
  local watcher = runtime.spawn(function()
    term.wait_interrupt()
    self:cancel_turn()
  end)
  local jok, res = pcall(task.join, task)
  self.turn_task = nil
  watcher:cancel()
  pcall(watcher.wait, watcher)
  printer:close()
  if jok then
    self.history = res.messages
    self.turns = self.turns + 1
    if rec then self:close_run(rec, { status = res.stop_reason, stop_reason = res.stop_reason, usage = res.usage }) end
    if res.stop_reason == "approval_required" then
      self:say("yellow", "the turn stopped with tool calls waiting for approval")
    end
    return nil
  end
  local e = res
  local cancelled = runtime.is_error(e, "cancelled")
  -- what the turn got to stays in the conversation (as it is saved), its
  -- unfinished tool calls answered as interrupted
  local got = type(e) == "table" and rawget(e, "messages")
  if type(got) == "table" then
    self.history = got
    local sessions = require "lash.sessions"
    local dangling = sessions.dangling_calls(got)
    if #dangling > 0 then
      local closing = sessions.interrupted_results(dangling)
      got[#got + 1] = closing
      if rec then self:record(rec, closing) end
    end
    -- what it streamed stays as its (interrupted) answer, as lash run
    -- --continue keeps it; the next prompt never follows a user message
    local said = sessions.close_unanswered(got, table.concat(self.streamed))
    if said then
      got[#got + 1] = said
      if rec then self:record(rec, said) end
    end
  end
  if rec then
    self:close_run(rec, { status = cancelled and "cancelled" or "error",
                          error_kind = type(e) == "table" and tostring(e.kind) or "error",
                          error_message = type(e) == "table" and tostring(e.message) or tostring(e),
                          usage = type(e) == "table" and rawget(e, "usage") or nil })
  end
  local host = self.cli.host
  if host and host.signal and host.signal() then
    return { kind = "cancelled", exit_code = 1, message = "stopped" }
  end
  if cancelled then
    self:say("yellow", "turn cancelled (it stays in the conversation: what the model said so far, its unfinished "
      .. "tool calls answered as interrupted)")
    return nil
  end
  local o = self.cli.outcome(e)
  self:say("red", "✗ " .. tostring(type(e) == "table" and e.kind or "error") .. ": "
    .. tostring(type(e) == "table" and e.message or e))
  if not self.interactive then
    o.printed = true
    return o
  end
  return nil
end

-- The last turns of a continued conversation, as the session showed them:
-- the prompts, the model's text, its tool calls (results left out).
function Session:replay(turns)
  local one_line = require("lash.cli.printer").one_line
  local json = require "lash.json"
  local h = self.history
  local from = 1
  local seen = 0
  for i = #h, 1, -1 do
    local m = h[i]
    if m.role == "user" then
      for _, p in ipairs(m.parts or {}) do
        if p.type == "text" then seen = seen + 1 break end
      end
      if seen == turns then from = i break end
    end
  end
  if from > 1 then self:say("dim", "(" .. (from - 1) .. " earlier messages not shown)") end
  for i = from, #h do
    local m = h[i]
    for _, p in ipairs(m.parts or {}) do
      if m.role == "user" and p.type == "text" then
        self:say("dim", "> " .. one_line(p.text, 96))
      elseif m.role == "assistant" and p.type == "text" and p.text:match("%S") then
        self.out(p.text:gsub("%s+$", "") .. "\n")
      elseif p.type == "tool_call" then
        self:say("cyan", "▸ " .. p.name .. " " .. one_line(json.try_encode(p.args) or "", 80))
      end
    end
  end
end

-- The tools the agent offers, without starting a run: its toolsets and
-- capabilities listed for a context like a run's. A toolset that can only
-- list its tools once open (an MCP server) says so.
function Session:tools()
  local ctx = { deps = self.deps or self.agent.deps, run = { agent = self.agent.name }, values = self.agent.values or {},
                messages = self.history, usage = {}, agent = self.agent }
  return require("lash.cli.describe").tools_text(self.agent, { ctx = ctx })
end

-- /save [TITLE]: say which saved session holds the chat (every turn is
-- already recorded), naming it TITLE when given.
function Session:save_session(title)
  if not self.saving then
    self:say("red", "this session is not recorded (--no-save or LASH_NO_SAVE): /export FILE writes the "
      .. "conversation to FILE as JSON")
    return
  end
  if not self.session and title == "" then
    self:say("red", "nothing to save yet: the session is recorded from its first turn (/save TITLE names it now)")
    return
  end
  local ok, err = pcall(function()
    if not self.session then
      self.session = self.store:start { kind = "chat", spec = self.spec_abs, agent = self.agent.name,
                                        model = self:model_label() }
    end
    if title ~= "" then self.session:set_title(title) end
  end)
  if not ok then
    self:say("red", "cannot save the session: " .. tostring(type(err) == "table" and err.message or err))
    return
  end
  local pending = self.session.pending and #self.session.pending or 0
  self.out("saved as session " .. self.session.id .. (title ~= "" and (" \"" .. title .. "\"") or "")
    .. ": `lash chat " .. self.spec_path .. " --resume " .. self.session.id .. "` continues it"
    .. (pending > 0 and (" (" .. pending .. " message(s) not written yet, retried with the next)") or "") .. "\n")
end

-- /export FILE: the conversation as JSON.
function Session:export(path)
  if not path or path == "" then
    return nil, "give a file name: /export FILE (the conversation is written there as JSON)"
  end
  local json = require "lash.json"
  local doc = { agent = self.agent.name, model = self:model_label(), messages = self.history,
                saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ") }
  local ok, text = pcall(json.encode_canonical, doc)
  if not ok then return nil, "cannot encode the conversation: " .. tostring(text) end
  local f, err = io.open(path, "wb")
  if not f then return nil, "cannot write " .. tostring(err) end
  local wok, werr = f:write(text, "\n")
  f:close()
  if not wok then return nil, "cannot write " .. path .. ": " .. tostring(werr) end
  return true
end

-- The message before the last prompt the user typed (0: none).
local function before_last_prompt(history)
  for i = #history, 1, -1 do
    local m = history[i]
    if m.role == "user" then
      for _, p in ipairs(m.parts or {}) do
        if p.type == "text" then return i - 1 end
      end
    end
  end
  return 0
end

-- /rewind [N]: keep messages 1..N, in memory and in the saved session
-- (lash.durable.rewind: its ledger and, for a session run --durable, its
-- workspace go back with it).
function Session:rewind(arg)
  local n = arg == "" and before_last_prompt(self.history) or math.tointeger(tonumber(arg))
  if not n or n < 0 or n > #self.history then
    self:say("red", string.format("/rewind N: N is a message number from 0 to %d (or none: before your last "
      .. "prompt), got %s", #self.history, arg))
    return
  end
  local dropped = #self.history - n
  local note = ""
  if self.session then
    local durable = require "lash.durable"
    local res, err = durable.rewind(self.store, self.session.id, n)
    if not res then self:say("red", "cannot rewind: " .. tostring(err)); return end
    local again, rerr = self.store:resume(self.session.id)
    if not again then self:say("red", "cannot reload the session: " .. tostring(rerr)); return end
    self.session = again
    self.history = require("lash.json").copy(again.history)
    if res.snapshot then
      note = "; `lash run --resume " .. self.session.id .. "` starts from that message's workspace"
    elseif self.agent.capabilities and #self.agent.capabilities > 0 then
      note = "; files the commands changed stay as they are (the session was not run --durable)"
    end
  else
    for i = #self.history, n + 1, -1 do self.history[i] = nil end
  end
  self.unsaved_closing = nil
  self:say("dim", string.format("rewound to message %d (%d dropped)%s", n, dropped, note))
end

-- A `/command`: returns "exit" to end the session.
function Session:command(line)
  local name, rest = line:match("^/(%S*)%s*(.-)%s*$")
  if name == "help" or name == "?" then
    self.out(HELP .. "\n")
  elseif name == "reset" then
    self.history = {}
    self.unsaved_closing = nil
    local was = self.session and self.session.id
    self.session = nil
    self:say("dim", "conversation cleared: the next line starts a new one"
      .. (was and (" (the last one is saved as session " .. was .. ")") or ""))
  elseif name == "model" then
    if rest == "" then
      self.out("model: " .. shown(self:model_label()) .. "\n")
    elseif rest == "default" then
      self.model = self.default_model
      self.out("model: " .. shown(self:model_label()) .. " (from the next turn)\n")
    else
      local ok, err = pcall(require("lash.models").resolve, rest)
      if not ok then
        self:say("red", "cannot use model " .. rest .. ": " .. tostring(type(err) == "table" and err.message or err))
      else
        self.model = rest
        self.out("model: " .. shown(self:model_label()) .. " (from the next turn)\n")
      end
    end
  elseif name == "tools" then
    self.out(shown(self:tools()) .. "\n")
  elseif name == "save" then
    self:save_session(rest)
  elseif name == "export" then
    local ok, err = self:export(rest)
    if ok then
      self.out(string.format("wrote %d message%s to %s\n", #self.history, #self.history == 1 and "" or "s", rest))
    else
      self:say("red", err)
    end
  elseif name == "rewind" then
    self:rewind(rest)
  elseif name == "exit" or name == "quit" then
    return "exit"
  else
    self:say("red", "unknown command /" .. name .. ": type /help for the commands")
  end
  return nil
end

function Session:loop()
  local armed = false   -- Ctrl-C once on an empty line: a second one ends the session
  while true do
    local line, why, had_text = self.term.read(self.interactive and "> " or nil)
    if line == nil then
      if why == "eof" then
        if self.interactive then self.out("\n") end
        return { kind = "ok", exit_code = 0 }
      elseif why == "interrupt" then
        if armed and not had_text then
          return { kind = "cancelled", signal = "SIGINT", exit_code = 128 + 2, printed = true,
                   message = "ended by Ctrl-C" }
        end
        armed = not had_text
        if armed then self:say("dim", "(Ctrl-C again or Ctrl-D to exit)") end
      elseif why == "signal" then
        return { kind = "cancelled", exit_code = 1, message = "stopped" }
      else
        return { kind = "error", message = "cannot read the input: " .. tostring(why) }
      end
    else
      armed = false
      if self.interactive and line:match("%S") then
        local ok, err = self.term.add_history(line)
        if not ok and not self.history_warned then
          self.history_warned = true
          self:say("yellow", "warning: " .. tostring(err))
        end
      end
      if line:match("^%s*/") and not line:match("^%s*//") then
        if self:command(line:match("^%s*(.*)$")) == "exit" then return { kind = "ok", exit_code = 0 } end
      elseif line:match("%S") then
        -- "//..." sends a prompt that starts with "/"
        local prompt = line:match("^%s*//") and line:gsub("/", "", 1) or line
        local o = self:turn(prompt)
        if o then return o end
      end
    end
  end
end

--- Open the sessions database for `s` (unless --no-save or LASH_NO_SAVE),
-- and with --continue/--resume load the session to go on with. Returns
-- nil, or an outcome when the chat cannot start.
function M.open_sessions(s, o)
  local sessions = require "lash.sessions"
  local no_save = o.no_save or (os.getenv("LASH_NO_SAVE") or ""):match("^[1ty]")
  if no_save and (o.continue or o.resume) then
    return { kind = "usage", exit_code = 2, message = "--no-save cannot be combined with --continue or --resume" }
  end
  if no_save then return nil end
  local ok, store = pcall(sessions.open)
  if not ok then
    local code = type(store) == "table" and store.code
    if (code == "cantopen" or code == "perm" or code == "readonly") and not (o.continue or o.resume) then
      -- a place lash may not write is no reason to refuse the chat
      s:say("yellow", "warning: this session is not saved: " .. tostring(store.message))
      return nil
    end
    return s.cli.outcome(store)
  end
  s.store, s.saving = store, true
  if not (o.continue or o.resume) then return nil end
  -- --continue: the latest session of this spec (of the built-in agent: in this directory)
  local ref = o.resume or store:latest(s.spec_abs)
  if not ref then
    return { kind = "usage", exit_code = 2, message = "no saved session of " .. (s.spec_path or "the built-in agent in "
      .. "this directory") .. " to continue (lash sessions list shows every session; --resume ID continues any)" }
  end
  local session, err = store:resume(ref)
  if not session then return { kind = "usage", exit_code = 2, message = err } end
  s.session = session
  s.history = require("lash.json").copy(session.history)
  -- the model the conversation last used (a /model switch), unless the
  -- command line names one; a Lua function model has no name to restore
  local last = session.meta and session.meta.model
  if not o.model and type(last) == "string" and last ~= s:model_label()
      and (last:match("^[%w_%-]+:.") or last == "test") and not last:match("^function:") then
    s.model = last
  end
  local dangling = sessions.dangling_calls(s.history)
  if #dangling > 0 then
    -- the calls that never returned are answered before the next prompt
    s.unsaved_closing = sessions.interrupted_results(dangling)
    s.history[#s.history + 1] = s.unsaved_closing
  end
  return nil
end

function M.main(args, cli)
  local o = parse_args(args, cli)
  local builtin = require "lash.cli.default_agent"
  local spec_path, rest, aerr = builtin.split(o.positional, "chat")
  if aerr then cli.usage_error(aerr) end
  if #rest > 0 or (not spec_path and #o.positional > 0) then
    cli.usage_error("too many arguments: lash chat takes a spec or nothing (the built-in agent); type the "
      .. "prompts in the session")
  end
  local host = cli.host
  local term = host and host.term
  if not term then
    return { kind = "error", message = "lash chat needs the lash program's terminal (run it as `lash chat`)" }
  end
  local json = require "lash.json"
  local render = require "lash.cli.printer"
  local config = require "lash.config"
  local _, cerr = config.get()
  if cerr then return { kind = "spec", message = cerr } end
  local backend, from = config.backend(o.backend)
  local agent, err
  if spec_path then
    agent, err = require("lash.spec").load(spec_path, { trust = o.trust, backend = from == "cli" and backend or nil })
  else
    agent = builtin.agent()
    if from == "cli" then agent, err = require("lash.cli.agents").with_backend(agent, backend) end
  end
  if agent and backend and from ~= "cli" then agent, err = require("lash.cli.agents").default_backend(agent, backend) end
  if not agent then
    return { kind = "spec",
             message = (spec_path and "cannot load the spec: " or "the built-in agent: ") .. tostring(err) }
  end
  local deps
  if o.deps then
    local d, derr = json.try_decode(o.deps)
    if type(d) ~= "table" then cli.usage_error("--deps must be a JSON object: " .. tostring(derr or o.deps)) end
    deps = d
  end
  local defaults = config.run_defaults(agent, o)
  if defaults.model == nil and agent.model == nil then
    return { kind = "spec", message = builtin.no_model(spec_path) }
  end
  local tty_out = render.is_tty(1)
  local color = render.use_color(tty_out)
  local s = setmetatable({
    cli = cli, term = term, agent = agent, history = {}, turns = 0,
    model = defaults.model, model_settings = defaults.model_settings,
    limits = o.max_steps and { max_steps = o.max_steps } or nil, deps = deps,
    stream = not o.no_stream, yes = o.yes, tty_out = tty_out,
    out = function(str) io.stdout:write(str) io.stdout:flush() end,
    painter = function(style, str)
      if not color then return str end
      local codes = { dim = "2", red = "31", yellow = "33", cyan = "36" }
      return "\27[" .. codes[style] .. "m" .. str .. "\27[0m"
    end,
  }, Session)
  s.default_model = s.model
  -- the config's MCP servers join every turn (after the spec's own toolsets)
  s.toolsets = require("lash.cli.config_servers").toolsets()
  s.conversation = require("lash.cli.agents").conversation(agent)
  s.spec_path = spec_path
  s.spec_abs = not spec_path and builtin.session_spec()
    or spec_path:sub(1, 1) == "/" and spec_path or ((os.getenv("PWD") or ".") .. "/" .. spec_path)
  local serr = M.open_sessions(s, o)
  if serr then return serr end
  s.exporter = require("lash.commands.run").trace_exporter(config, cli)
  local edit, herr = term.open { history = (not o.no_history) and M.history_path() or nil }
  local tty_in = term.isatty()
  -- a terminal without libedit still gets prompts (plain lines, no history)
  s.interactive = edit or (tty_in and tty_out)
  if herr then s:say("yellow", "warning: " .. herr .. "; the input history is not kept") end
  if s.interactive then
    s:say("dim", "● " .. tostring(agent.name) .. " · " .. s:model_label()
      .. (s.session and (" · session " .. s.session.id .. " (" .. #s.history .. " messages)") or "")
      .. " · /help for commands, Ctrl-D to exit")
    if s.session and #s.history > 0 then s:replay(3) end
  end
  local ok, res = pcall(s.loop, s)
  s.conversation:close()
  term.close()
  if s.exporter then s.exporter:shutdown() end
  if s.store then
    if s.session and s.interactive and ok then
      s:say("dim", "saved as session " .. s.session.id .. " (lash chat " .. (spec_path and (spec_path .. " ") or "")
        .. "--resume " .. s.session.id .. " continues it)")
    end
    s.store:close()
  end
  if not ok then error(res, 0) end
  return res
end

return M
