--- `lash run SPEC.lua [PROMPT] [options]`: load an agent spec, run it and
-- stream its events to the terminal (or as JSON lines with --json).
-- Exit codes: the CLI's table (lash.cli.EXIT): 0 the run answered, else
-- the kind of failure; with --json the last line says it as JSON.
-- @module lash.commands.run
local runtime = require "lash.runtime"
local M = {
  signals = true,      -- SIGINT/SIGTERM/SIGHUP cancel the run and clean up
  json_final = true,   -- --json ends with one {"type":"exit",...} line
  summary = "run an agent spec and stream what it does",
  usage = [[usage: lash run [SPEC] [PROMPT] [options]

Loads SPEC (a .lua file returning lash.agent{...} or a table in the same
shape, or a .yaml/.yml/.json agent spec), runs it on PROMPT (or on standard
input when PROMPT is absent and stdin is not a terminal), and prints the
model's text as it arrives, each tool call with a short result, and a usage
line. Without SPEC, the built-in agent runs: a coder in a sandbox, with the
configured model (--model, LASH_MODEL or the config file's). The first
argument is SPEC when it ends in .lua, .yaml, .yml or .json; otherwise it is
the prompt: lash run "what is 2+2" --model test.

options:
  --model M        use model M instead of the spec's (e.g. test,
                   anthropic:claude-sonnet-4-6, openai:gpt-4.1)
  --json           print every event as one JSON line, then a last line
                   {"type":"exit","kind":...,"exit_code":...} for every
                   outcome (load and usage errors included)
  --max-steps N    stop after N model requests (default 50)
  --deps JSON      pass deps to the run (a JSON object)
  --yes            approve every tool call that needs approval
  --no-stream      do not stream the model's answer
  --trust          load a Lua spec with the full standard library and no
                   instruction or memory budget
  --attach H       run in the existing sandbox H (the spec's sandbox
                   capability attaches to it instead of creating one)
  --owner O        the owner the sandbox was created with (lash sandbox
                   create --owner O); under Airflow, the DAG run by default
  --holder H       this run's identity while it holds the sandbox (default:
                   the Airflow task instance, else the owner)
  --backend B      the sandbox backend (local, modal) instead of the spec's
  --file PATH      attach a file to the prompt (PNG, JPEG, GIF, WebP image,
                   PDF or UTF-8 text document); repeatable
  --output-schema FILE
                   the answer must be JSON matching the JSON Schema in FILE
                   (validated, retried on mismatch; printed as JSON)
  --continue, -c   continue the most recent saved session of this spec
                   (of the built-in agent: in this directory); its
                   messages are the history of this run, which is added
                   to it, and the header names it
  --resume ID      continue saved session ID (or a unique prefix of it);
                   without a PROMPT, a session whose last turn's tool calls
                   never finished (killed, or stopped for approval) runs
                   them now (with --yes for those needing approval);
                   calls the session's ledger saw finish are never run
                   again (their recorded results answer the model)
  --durable        record the sandbox's workspace with each finished tool
                   call, so --resume after a crash (kill -9 included)
                   continues in a sandbox holding exactly the last committed
                   state, and `lash sessions rewind|fork` move files with
                   the conversation (see docs/durable.md); a session run
                   durable stays durable when resumed
  --no-save        do not record this run (LASH_NO_SAVE=1 does the same)
  --describe       print what the loaded agent runs with (model,
                   instructions, tools, capabilities and their settings,
                   limits) and exit without running it: a summary on a
                   terminal, JSON with --json or in a pipe (with every
                   default lash applies); tools that conflict exit 6

Every run is saved (spec, model, each message as it enters the history,
usage, outcome) in $LASH_SESSIONS_DB, else $XDG_STATE_HOME/lash/sessions.db
(~/.local/state/lash/sessions.db); see `lash sessions`.

environment: LASH_MODEL (default --model), LASH_SANDBOX_BACKEND (default
--backend), LASH_CONFIG (the config file; see `lash config show`),
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL,
OTEL_EXPORTER_OTLP_ENDPOINT (export traces; see docs/cli.md, "traces"),
NO_COLOR, LASH_SANDBOX_ROOT (local sandboxes), LASH_LOG=info
(sandbox attach/release notes on stderr), AIRFLOW_CTX_* (owner and holder
under Airflow), LASH_SHUTDOWN_TIMEOUT.

SIGINT, SIGTERM and SIGHUP cancel the run: its sandbox commands are killed,
an owned sandbox is destroyed, a holder mark released, within the shutdown
bound (--shutdown-timeout, default 10 s); lash then exits 130, 143 or 129.
A second signal skips what is left of the cleanup and exits at once.]],
}

local OPTIONS = {
  ["--model"] = { "model", "value" }, ["--json"] = { "json", "flag" }, ["--max-steps"] = { "max_steps", "count" },
  ["--deps"] = { "deps", "value" }, ["--yes"] = { "yes", "flag" }, ["--no-stream"] = { "no_stream", "flag" },
  ["--trust"] = { "trust", "flag" }, ["--attach"] = { "attach", "value" }, ["--owner"] = { "owner", "value" },
  ["--holder"] = { "holder", "value" }, ["--backend"] = { "backend", "value" }, ["--file"] = { "files", "list" },
  ["--output-schema"] = { "output_schema", "value" }, ["--continue"] = { "continue", "flag" },
  ["-c"] = { "continue", "flag" }, ["--resume"] = { "resume", "value" }, ["--no-save"] = { "no_save", "flag" },
  ["--describe"] = { "describe", "flag" }, ["--durable"] = { "durable", "flag" },
}

local function parse_args(args, cli)
  return cli.parse_options(args, OPTIONS)
end

--- Load an agent spec file (Lua, YAML or JSON; see lash.spec). Returns
-- the agent, or nil, message.
function M.load_spec(path, opts)
  return require("lash.spec").load(path, opts)
end

local function read_prompt(o, render)
  local prompt = o.prompt_arg
  if prompt then return prompt end
  if render.is_tty(0) then return nil end
  local data = io.read("a")
  if data and data:match("%S") then return (data:gsub("%s+$", "")) end
  return nil
end

-- Ask on the terminal; without one (or with --yes) the answer is fixed.
-- the questions show a tool's or server's words: safe on the terminal
local function shown(s) return require("lash.cli.printer").shown(s, 1) end

local function approver(o, render)
  if o.yes then return function() return true end end
  if not render.is_tty(0) then return nil end
  return function(_, call)
    local json = require "lash.json"
    if call.kind == "elicitation" then return M.ask_elicitation(call) end
    if call.interrupted then
      io.stdout:write(shown(string.format("\n%s %s started before lash stopped and never finished: it may already have "
        .. "had its effects. Run it again? [y/N] ", call.name, json.try_encode(call.args) or "")))
      io.stdout:flush()
      if (io.read("l") or ""):lower():match("^y") then return true end
      return "The user chose not to run this call again: it was cut short by a crash and may already have had "
        .. "its effects; check before relying on them."
    end
    io.stdout:write(shown(string.format("\nAllow %s %s? [y/N] ", call.name, json.try_encode(call.args) or "")))
    io.stdout:flush()
    local answer = io.read("l") or ""
    if answer:lower():match("^y") then return true end
    return "The user denied this tool call."
  end
end

--- The prompt with the --file parts, and the --output-schema schema.
-- Returns prompt, schema|nil, or nil, nil, message.
function M.prompt_and_output(prompt, o)
  local schema
  if o.output_schema then
    local f, ferr = io.open(o.output_schema, "rb")
    if not f then return nil, nil, "--output-schema: cannot read " .. tostring(ferr) end
    local text = f:read("a")
    f:close()
    local json = require "lash.json"
    local v, derr = json.try_decode(text or "")
    if type(v) ~= "table" then
      return nil, nil, "--output-schema: " .. o.output_schema .. " is not a JSON Schema object: " .. tostring(derr)
    end
    local ok, serr = require("lash.schema").check(v, o.output_schema)
    if not ok then return nil, nil, "--output-schema: " .. serr end
    schema = v
  end
  if not o.files then return prompt, schema end
  local mparts = require "lash.models.parts"
  local parts = { prompt }
  for _, path in ipairs(o.files) do
    local part, err = mparts.from_file(path)
    if not part then return nil, nil, "--file: " .. err end
    parts[#parts + 1] = part
  end
  return parts, schema
end

--- An MCP server asks the user for input: ask for each field on the
-- terminal (empty keeps the default), or decline.
function M.ask_elicitation(call)
  io.stdout:write(shown(string.format("\n%s asks: %s\nAnswer? [y/N] ", tostring(call.server),
                                      tostring(call.message))))
  io.stdout:flush()
  if not (io.read("l") or ""):lower():match("^y") then return false end
  local props = type(call.schema) == "table" and type(call.schema.properties) == "table" and call.schema.properties or {}
  local names, args = {}, {}
  for k in pairs(props) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local p, d = props[k], call.args and call.args[k]
    io.stdout:write(shown(string.format("  %s%s: ", type(p.title) == "string" and p.title or k,
                                        d ~= nil and (" [" .. tostring(d) .. "]") or "")))
    io.stdout:flush()
    local line = io.read("l") or ""
    if line ~= "" then
      if p.type == "number" or p.type == "integer" then args[k] = tonumber(line) or line
      elseif p.type == "boolean" then args[k] = line:lower():match("^[yt1]") ~= nil
      else args[k] = line end
    end
  end
  return { allow = true, args = args }
end

-- The saved session this run continues (--continue/--resume), or nil.
-- --continue goes on with the latest session of this spec (of the
-- built-in agent: in this directory), never another spec's.
local function continued(o, sessions, scope, spec_path)
  if not (o.continue or o.resume) then return nil end
  local store = sessions.open()
  local ref = o.resume
  if not ref then
    ref = store:latest(scope)
    if not ref then
      store:close()
      return nil, "no saved session of " .. (spec_path or "the built-in agent in this directory")
        .. " to continue (lash sessions list shows every session; --resume ID continues any of them)"
    end
  end
  local session, err = store:resume(ref)
  if not session then
    store:close()
    return nil, err
  end
  return session
end

local function abspath(p)
  if p:sub(1, 1) == "/" then return p end
  local cwd = os.getenv("PWD")
  return cwd and (cwd .. "/" .. p) or p
end

-- Record the run in `session` (nil: not saved): the history it starts
-- from, an on_message that commits each message, and finish(outcome).
local function recorder(session, cli)
  if not session then return function() end, function() end, function() end end
  local warned = false
  local function warn(err)
    if warned then return end
    warned = true
    cli.err("lash run: warning: cannot save to the session: ",
            tostring(type(err) == "table" and err.message or err), " (kept in memory and retried)\n")
  end
  local on_message = function(msg)
    local ok, err = session:record(msg)
    if not ok then warn(err) end
  end
  -- what a turn streams is kept as it arrives, so a kill mid-stream loses
  -- none of what was shown; it becomes part of the message when the turn ends
  local streamed = {}
  local on_event = function(ev)
    local ty = ev.type
    if ty == "text_delta" then
      streamed[#streamed + 1] = ev.text
      local ok, err = pcall(session.set_partial, session, table.concat(streamed))
      if not ok then warn(err) end
    elseif ty == "model_request" or (ty == "retry" and ev.kind == "model") then
      if #streamed > 0 then
        streamed = {}
        pcall(session.set_partial, session, nil)
      end
    end
  end
  local finish = function(outcome)
    local ok, err = session:close_run(outcome)
    if not ok then
      cli.err("lash run: warning: the session ", tostring(session.id), " could not be finished: ",
              tostring(type(err) == "table" and err.message or err),
              session.pending and #session.pending > 0
                and (" (" .. #session.pending .. " message(s) not saved)") or "", "\n")
    end
    if session.forked_from then
      cli.err("lash run: note: session ", session.forked_from, " was continued by another run at the same time; ",
              "this run is saved as session ", session.id, "\n")
    end
    session.store:close()
  end
  return on_message, finish, on_event
end

--- The trace exporter the environment and config ask for, or nil (none
-- asked; bad settings are a warning, never a failed run).
function M.trace_exporter(config, cli)
  local traces = (config.get() or {}).traces
  -- without an endpoint there are no traces: the tracing modules stay
  -- unloaded (a cold start pays for every module it loads)
  if traces == nil and (os.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "") == ""
      and (os.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") or "") == "" then
    return nil
  end
  return require("lash.trace").from_config(traces, function(msg) cli.err(msg, "\n") end)
end

--- The frames of a tool's traceback that are the user's code: the message
-- (said already) and lash's own frames (its Lua files, C, tail calls) are
-- left out, so a failing handler shows where it failed and nothing else.
-- LASH_LOG=debug keeps the whole traceback.
-- @treturn string lines, each ending in a newline (maybe none)
function M.user_frames(traceback)
  traceback = tostring(traceback)
  if os.getenv("LASH_LOG") == "debug" then return traceback .. "\n" end
  local out = {}
  for line in traceback:gmatch("[^\n]+") do
    local frame = line:match("^%s+(.*)$")
    -- lash's modules: lua/lash/... in a checkout, lash/... when built in
    local lash_own = frame and (frame:find("/lua/lash/", 1, true) or frame:match("^lash/"))
    if frame and not lash_own and not frame:match("^%[C%]")
        and not frame:match("^%(%.%.%.tail calls%.%.%.%)") and not frame:find("^%[string \"lash") then
      out[#out + 1] = line .. "\n"
    end
  end
  if #out == 0 then return "" end
  return "stack traceback (your code):\n" .. table.concat(out)
end

--- --describe: what the agent runs with, as text on a terminal and JSON
-- otherwise (or with --json); tools that conflict fail it (exit 6).
function M.describe(agent, spec_path, o, config, cli, render)
  local describe = require "lash.cli.describe"
  local ext = spec_path:match("%.(%w+)$")
  ext = ext and ext:lower()
  local d = describe.summary(agent, { model = config.run_defaults(agent, o).model,
                                      labels = agent.capability_labels,
                                      format = (ext == "yml" or ext == "yaml") and "yaml" or ext })
  if not o.json and render.is_tty(1) then
    cli.out(describe.text(d), "\n")
  else
    cli.out(require("lash.json").encode_canonical(d), "\n")
  end
  if #d.conflicts > 0 then return { kind = "spec", message = "cannot run the spec: " .. d.conflicts[1] } end
  return { kind = "ok" }
end

function M.main(args, cli)
  -- what start-up allocates (lash's modules, the spec, the tools) stays
  -- alive: the collector would only walk it. It resumes as the run starts.
  collectgarbage("stop")
  local o = parse_args(args, cli)
  local builtin = require "lash.cli.default_agent"
  local spec_path, rest, aerr = builtin.split(o.positional, "run")
  if aerr then cli.usage_error(aerr) end
  o.prompt_arg = rest[1]
  if o.owner and not o.attach then cli.usage_error("--owner only applies together with --attach") end
  if #rest > 1 and not o.describe then
    cli.usage_error("too many arguments: quote the prompt (got " .. #rest .. " words after the spec)")
  end
  local render = require "lash.cli.printer"
  local json = require "lash.json"
  local config = require "lash.config"
  local _, cerr = config.get()
  if cerr then return { kind = "spec", message = cerr } end
  local backend, from_cli = config.backend(o.backend)
  local agent, err
  if spec_path then
    agent, err = M.load_spec(spec_path, { trust = o.trust, attach = o.attach, owner = o.owner,
                                          backend = (from_cli == "cli" or o.attach) and backend or nil,
                                          -- --describe reports conflicts itself
                                          check_tools = not o.describe })
  else
    agent = builtin.agent()
    if o.attach then
      agent, err = require("lash.cli.agents").attach_agent(agent, o.attach, o.owner, backend)
    elseif from_cli == "cli" then
      agent, err = require("lash.cli.agents").with_backend(agent, backend)
    end
  end
  if agent and backend and from_cli ~= "cli" and not o.attach then agent, err = require("lash.cli.agents").default_backend(agent, backend) end
  if not agent then
    return { kind = "spec", message = (spec_path and "cannot load the spec: " or "the built-in agent: ")
      .. tostring(err) }
  end
  if o.describe then return M.describe(agent, spec_path or "built-in.lua", o, config, cli, render) end
  local scope = spec_path and abspath(spec_path) or builtin.session_spec()
  local save = not o.no_save and not (os.getenv("LASH_NO_SAVE") or ""):match("^[1ty]")
  -- the store is loaded only when a run saves or continues (a cold start
  -- pays for every module it loads)
  local sessions = (save or o.continue or o.resume) and require "lash.sessions" or nil
  local session, serr = continued(o, sessions, scope, spec_path)
  if serr then return { kind = "usage", message = serr } end
  local durable_run
  if o.durable or session then
    local derr
    agent, durable_run, derr = require("lash.durable").for_run(agent, session, { durable = o.durable, save = save,
                                                                                attach = o.attach })
    if derr then
      if session then session.store:close() end
      return { kind = "usage", message = derr }
    end
  end
  local history = session and json.copy(session.history) or nil
  local partial = session and session.partial
  local dangling = history and sessions.dangling_calls(history) or {}
  local prompt = read_prompt(o, render)
  if not prompt and #dangling == 0 then
    cli.usage_error(spec_path and "missing the prompt (give it after the spec, or on standard input)"
      or "missing the prompt: lash run \"PROMPT\" asks the built-in agent, lash run SPEC \"PROMPT\" runs a spec "
         .. "(the prompt may also come on standard input)")
  end
  local opts = {}
  local perr
  local fresh_session = false
  if prompt then
    prompt, opts.output, perr = M.prompt_and_output(prompt, o)
    if perr then cli.usage_error(perr) end
  end
  local defaults = config.run_defaults(agent, o)
  opts.model, opts.model_settings = defaults.model, defaults.model_settings
  -- the config's MCP servers join the run (after the spec's own toolsets)
  opts.toolsets = require("lash.cli.config_servers").toolsets()
  if opts.model == nil and agent.model == nil then
    return { kind = "spec", message = builtin.no_model(spec_path) }
  end
  if not save and session then
    session.store:close()
    session = nil
  elseif save then
    local label = require("lash.agent").model_label(opts.model or agent.model)
    local fresh = not session
    fresh_session = fresh
    local ok, e = pcall(function()
      if fresh then
        session = sessions.open():start { kind = "run", spec = scope, agent = agent.name, model = label }
      end
      session:begin { prompt = type(prompt) == "string" and prompt or o.prompt_arg, model = label }
    end)
    if not ok then
      -- a place lash may not write (a read-only home) is no reason to refuse
      -- the work: say so and run unsaved; a damaged, newer or locked file is
      -- refused, so nothing is written past what lash cannot read back
      local code = type(e) == "table" and e.code
      if not (fresh and (code == "cantopen" or code == "perm" or code == "readonly")) then error(e, 0) end
      cli.err("lash run: warning: this run is not saved: ", tostring(e.message), "\n")
      if session then session.store:close() end
      session = nil
    end
  end
  local on_message, finish, record_event = recorder(session, cli)
  if session then
    opts.ledger = require("lash.durable").ledger(session, { workspace = durable_run, on_warning = function(e)
      cli.err("lash run: warning: cannot record tool calls in the session's ledger: ",
              tostring(type(e) == "table" and e.message or e), " (a resumed run may run them again)\n")
    end })
  end
  -- the last turn was cut short: what it streamed is its answer (or a note
  -- that it said nothing), as lash chat keeps a cancelled turn
  local said = partial and sessions.partial_message(partial)
    or (history and #dangling == 0 and sessions.close_unanswered(history)) or nil
  if said then
    history[#history + 1] = said
    on_message(said)
  end
  if prompt and #dangling > 0 then
    -- moving on with a new prompt: the calls that never returned are answered first
    local closing = sessions.interrupted_results(dangling)
    history[#history + 1] = closing
    on_message(closing)
  end
  opts.history = history
  opts.on_message = on_message
  if o.max_steps then opts.limits = { max_steps = o.max_steps } end
  if o.deps then
    local deps, derr = json.try_decode(o.deps)
    if type(deps) ~= "table" then cli.usage_error("--deps must be a JSON object: " .. tostring(derr or o.deps)) end
    opts.deps = deps
  end
  if o.no_stream then opts.stream = false end
  if o.holder then opts.holder = o.holder end
  opts.approve = approver(o, render)
  local printer = render.new { json = o.json, write = function(s) cli.out_raw(s) io.stdout:flush() end,
                               tty = (not o.json) and render.is_tty(1),
                               -- the header says which session goes on
                               header_note = session and not fresh_session and ("continuing session " .. session.id
                                 .. " (" .. #history .. " messages)") or nil }
  do
    local print_event = printer:handler()
    opts.on_event = function(ev) print_event(ev); record_event(ev) end
  end
  local exporter = M.trace_exporter(config, cli)
  if exporter then
    local rt = exporter:run_tracer { agent = agent.name, model = require("lash.agent").model_label(opts.model or agent.model),
                                     conversation = session and session.id, spec = spec_path or scope }
    local print_event, save_message = opts.on_event, opts.on_message
    opts.on_event = function(ev) print_event(ev); rt.on_event(ev) end
    opts.on_message = function(msg, i) save_message(msg, i); rt.on_message(msg) end
  end
  collectgarbage("restart")
  -- a cycle when the heap has grown by half, not doubled: a run's peak
  -- memory is mostly what the collector has not reached yet (K=200 with
  -- the sandbox capability: 15.2-15.4 -> 14.5-15.0 MiB for 3.6% more
  -- instructions, bench/bench_steps.sh)
  collectgarbage("incremental", 150)
  local ok, res = pcall(function() return agent:start(prompt, opts):join() end)
  -- the spinner line goes whatever happened (a signal included)
  printer:close()
  local sid = session and session.id
  if ok then
    finish { status = res.stop_reason, stop_reason = res.stop_reason, usage = res.usage }
  else
    local e = res
    finish { status = (type(e) == "table" and e.kind == "cancelled") and "cancelled" or "error",
             error_kind = type(e) == "table" and tostring(e.kind) or "error",
             error_message = type(e) == "table" and tostring(e.message) or tostring(e),
             usage = type(e) == "table" and rawget(e, "usage") or nil }
  end
  sid = session and session.id or sid
  -- what is still queued goes now (bounded by the export timeout)
  if exporter then exporter:shutdown() end
  if not ok then
    local e = res
    local out = cli.outcome(e)
    if type(e) == "table" and e.kind then
      local msg = "lash run: " .. tostring(e.kind) .. ": " .. tostring(e.message) .. "\n"
      if e.traceback and e.kind == "tool" then msg = msg .. M.user_frames(e.traceback) end
      out.error_kind = tostring(e.kind)
      out.limit = type(e.limit) == "string" and e.limit or nil
      out.message = tostring(e.message)
      -- a cancellation is said once, by the CLI, with the signal behind it
      if e.kind ~= "cancelled" then cli.err(msg) end
    else
      cli.err("lash run: ", tostring(e), "\n")
    end
    out.printed = not (type(e) == "table" and e.kind == "cancelled")
    out.session = sid
    return out
  end
  runtime.run()
  if res.stop_reason == "approval_required" then
    local cut = 0
    for _, p in ipairs(res.pending or {}) do if p.interrupted then cut = cut + 1 end end
    if cut > 0 then
      cli.err("lash run: ", cut, " tool call(s) started before lash stopped and never finished; their tools are ",
              "marked idempotent = false, so they are not run again unasked (they may already have had their ",
              "effects)\n")
    end
    return { kind = "approval", stop_reason = res.stop_reason, session = sid,
             message = "stopped: " .. tostring(#res.pending)
               .. " tool call(s) need approval (run with --yes to allow them"
               .. (sid and ("; lash run " .. (spec_path and (spec_path .. " ") or "") .. "--resume " .. sid
                            .. " --yes runs them") or "") .. ")" }
  end
  return { kind = "ok", stop_reason = res.stop_reason, session = sid }
end

return M
