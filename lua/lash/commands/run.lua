--- `lash run SPEC.lua [PROMPT] [options]`: load an agent spec, run it and
-- stream its events to the terminal (or as JSON lines with --json).
-- Exit codes: 0 the run answered, 1 it failed or stopped for approval or a
-- limit, 2 usage errors.
-- @module lash.commands.run
local M = {
  summary = "run an agent spec and stream what it does",
  usage = [[usage: lash run SPEC [PROMPT] [options]

Loads SPEC (a .lua file returning lash.agent{...} or a table in the same
shape, or a .yaml/.yml/.json agent spec), runs it on PROMPT (or on standard
input when PROMPT is absent and stdin is not a terminal), and prints the
model's text as it arrives, each tool call with a short result, and a usage
line.

options:
  --model M        use model M instead of the spec's (e.g. test,
                   anthropic:claude-sonnet-4-6, openai:gpt-4.1)
  --json           print every event as one JSON line
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

environment: LASH_MODEL (default --model), LASH_SANDBOX_BACKEND (default
--backend), LASH_CONFIG (the config file; see `lash config show`),
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL,
NO_COLOR, LASH_SANDBOX_ROOT (local sandboxes), LASH_LOG=info
(sandbox attach/release notes on stderr), AIRFLOW_CTX_* (owner and holder
under Airflow).]],
}

local function parse_args(args, cli)
  local o = { positional = {} }
  local i = 1
  local function value(name)
    i = i + 1
    local v = args[i]
    if v == nil then cli.usage_error("option " .. name .. " needs a value") end
    return v
  end
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w%-]+)=(.*)$")
    if name then
      a = name
      table.insert(args, i + 1, inline)
    end
    if a == "--model" then o.model = value(a)
    elseif a == "--json" then o.json = true
    elseif a == "--max-steps" then
      local v = value(a)
      o.max_steps = tonumber(v)
      if not o.max_steps or o.max_steps < 1 or o.max_steps ~= math.floor(o.max_steps) then
        cli.usage_error("--max-steps needs a positive integer, got '" .. v .. "'")
      end
      o.max_steps = math.tointeger(o.max_steps)
    elseif a == "--deps" then o.deps = value(a)
    elseif a == "--yes" then o.yes = true
    elseif a == "--no-stream" then o.no_stream = true
    elseif a == "--trust" then o.trust = true
    elseif a == "--attach" then o.attach = value(a)
    elseif a == "--owner" then o.owner = value(a)
    elseif a == "--holder" then o.holder = value(a)
    elseif a == "--backend" then o.backend = value(a)
    elseif a == "--" then
      for j = i + 1, #args do o.positional[#o.positional + 1] = args[j] end
      break
    elseif a:sub(1, 2) == "--" then
      cli.usage_error("unknown option '" .. a .. "'")
    else
      o.positional[#o.positional + 1] = a
    end
    i = i + 1
  end
  return o
end

--- Load an agent spec file (Lua, YAML or JSON; see lash.spec). Returns
-- the agent, or nil, message.
function M.load_spec(path, opts)
  return require("lash.spec").load(path, opts)
end

local function read_prompt(o, render)
  local prompt = o.positional[2]
  if prompt then return prompt end
  if render.is_tty(0) then return nil end
  local data = io.read("a")
  if data and data:match("%S") then return (data:gsub("%s+$", "")) end
  return nil
end

-- Ask on the terminal; without one (or with --yes) the answer is fixed.
local function approver(o, render)
  if o.yes then return function() return true end end
  if not render.is_tty(0) then return nil end
  return function(_, call)
    local json = require "lash.json"
    io.stdout:write(string.format("\nAllow %s %s? [y/N] ", call.name, json.try_encode(call.args) or ""))
    io.stdout:flush()
    local answer = io.read("l") or ""
    if answer:lower():match("^y") then return true end
    return "The user denied this tool call."
  end
end

function M.main(args, cli)
  local o = parse_args(args, cli)
  local spec_path = o.positional[1]
  if not spec_path then cli.usage_error("missing the agent spec (a .lua, .yaml or .json file)") end
  if o.owner and not o.attach then cli.usage_error("--owner only applies together with --attach") end
  if #o.positional > 2 then
    cli.usage_error("too many arguments: quote the prompt (got " .. #o.positional - 1 .. " words after the spec)")
  end
  local render = require "lash.render"
  local json = require "lash.json"
  local config = require "lash.config"
  local _, cerr = config.get()
  if cerr then cli.err("lash run: ", cerr, "\n") return 1 end
  local backend, from_cli = config.backend(o.backend)
  local agent, err = M.load_spec(spec_path, { trust = o.trust, attach = o.attach, owner = o.owner,
                                                backend = (from_cli == "cli" or o.attach) and backend or nil })
  if agent and backend and from_cli ~= "cli" and not o.attach then agent, err = config.default_backend(agent, backend) end
  if not agent then
    cli.err("lash run: cannot load the spec: ", tostring(err), "\n")
    return 1
  end
  local prompt = read_prompt(o, render)
  if not prompt then cli.usage_error("missing the prompt (give it after the spec, or on standard input)") end
  local opts = {}
  local defaults = config.run_defaults(agent, o)
  opts.model, opts.model_settings = defaults.model, defaults.model_settings
  if o.max_steps then opts.limits = { max_steps = o.max_steps } end
  if o.deps then
    local deps, derr = json.try_decode(o.deps)
    if type(deps) ~= "table" then cli.usage_error("--deps must be a JSON object: " .. tostring(derr or o.deps)) end
    opts.deps = deps
  end
  if o.no_stream then opts.stream = false end
  if o.holder then opts.holder = o.holder end
  opts.approve = approver(o, render)
  local printer = render.new { json = o.json, write = function(s) cli.out(s) io.stdout:flush() end,
                               tty = (not o.json) and render.is_tty(1) }
  opts.on_event = printer:handler()
  local lash = require "lash"
  local ok, res = pcall(function() return agent:start(prompt, opts):join() end)
  printer:close()
  if not ok then
    local e = res
    if type(e) == "table" and e.kind then
      local msg = "lash run: " .. tostring(e.kind) .. ": " .. tostring(e.message) .. "\n"
      if e.traceback and e.kind == "tool" then msg = msg .. tostring(e.traceback) .. "\n" end
      cli.err(msg)
    else
      cli.err("lash run: ", tostring(e), "\n")
    end
    return 1
  end
  lash.run()
  if res.stop_reason == "approval_required" then
    cli.err("lash run: stopped: ", tostring(#res.pending), " tool call(s) need approval (run with --yes to allow them)\n")
    return 1
  end
  return 0
end

return M
