--- `lash acp [SPEC]`: lash as an Agent Client Protocol agent on
-- stdin/stdout, for editors (Zed, codecompanion.nvim, avante.nvim, ...).
-- The engine is lash.acp.server; this module reads the command line and
-- the spec.
-- @module lash.commands.acp
local runtime = require "lash.runtime"

local M = {
  signals = true,      -- SIGINT/SIGTERM/SIGHUP: every session ends (turns cancelled, sandboxes destroyed)
  summary = "be an ACP agent for an editor (Zed, codecompanion.nvim, avante) on stdin/stdout",
  usage = [[usage: lash acp [SPEC] [options]

Speaks the Agent Client Protocol (ACP v1) on standard input and output, as
the agent an editor starts: each editor session is a conversation with the
agent in SPEC (a .lua, .yaml or .json spec, as for `lash run`), saved in
lash's sessions database under the session's id. Without SPEC the agent is
lash's default: the configured model (--model, $LASH_MODEL or the config
file) with the Sandbox capability. Logs go to standard error.

The model's commands and file edits run in lash's sandbox, one sandbox per
editor session, unless the spec uses EditorTools (or --editor-tools): then
its files are the editor's (fs/read_text_file, fs/write_text_file) and its
commands run in the editor's terminals (terminal/*).

options:
  --model M                 the model (overrides the spec's)
  --models M1,M2            more models the editor may switch to
  --mode ask|auto           ask before calls that may change something
                            (default), or run them freely
  --editor-tools            without SPEC: the editor's files and terminals
                            instead of lash's sandbox
  --backend B               the sandbox backend (local, modal)
  --trust                   load a Lua spec with the full standard library
  --no-save                 keep no sessions (session/load is then refused)
  --no-plan                 do not offer the update_plan tool
  --permission-timeout S    seconds a permission request waits for the
                            editor before the call is denied (default 300)
  --max-prompt-bytes N      the largest prompt taken (default 8 MiB)
  --context-window N        the model's context window in tokens: with it,
                            each model response reports the context used
                            (usage_update)

Zed (settings.json):
  "agent_servers": { "lash": { "command": "lash", "args": ["acp", "/path/spec.lua"] } }
More editors: docs/acp.md.]],
}

local OPTIONS = {
  ["--model"] = { "model", "value" }, ["--models"] = { "models", "list" }, ["--mode"] = { "mode", "value" },
  ["--editor-tools"] = { "editor_tools", "flag" }, ["--backend"] = { "backend", "value" },
  ["--trust"] = { "trust", "flag" }, ["--no-save"] = { "no_save", "flag" }, ["--no-plan"] = { "no_plan", "flag" },
  ["--permission-timeout"] = { "permission_timeout", "value" },
  ["--max-prompt-bytes"] = { "max_prompt_bytes", "count" },
  ["--context-window"] = { "context_window", "count" },
}

-- The agent: the spec's, or lash's default.
local function load_agent(o, cli)
  local config = require "lash.config"
  local _, cerr = config.get()
  if cerr then return nil, { kind = "spec", message = cerr } end
  local backend, from = config.backend(o.backend)
  local spec_path = o.positional[1]
  local agent, err
  if spec_path then
    if o.editor_tools then
      cli.usage_error("--editor-tools is for lash's default agent; a spec says EditorTools itself")
    end
    agent, err = require("lash.commands.run").load_spec(spec_path, { trust = o.trust,
                                                                     backend = from == "cli" and backend or nil })
    if agent and backend and from ~= "cli" then
      agent, err = require("lash.cli.agents").default_backend(agent, backend)
    end
    if not agent then return nil, { kind = "spec", message = "cannot load the spec: " .. tostring(err) } end
  else
    local lash_agent = require "lash.agent"
    local cap
    if o.editor_tools then
      cap = require("lash.acp.editor_tools").new {}
    else
      cap = require("lash.capabilities.sandbox").new { backend = backend }
    end
    agent = lash_agent.new { name = "lash", capabilities = { cap } }
  end
  local d = config.run_defaults(agent, o)
  if d.model then agent.model = d.model end
  if d.model_settings then
    local ms = {}
    for k, v in pairs(agent.model_settings or {}) do ms[k] = v end
    for k, v in pairs(d.model_settings) do ms[k] = v end
    agent.model_settings = ms
  end
  if agent.model == nil then
    return nil, { kind = "usage", exit_code = 2, message = "lash acp needs a model: give a spec that names one, "
      .. "--model, $LASH_MODEL, or model = \"...\" in the config file (lash config path)" }
  end
  return agent
end

function M.main(args, cli)
  local o = cli.parse_options(args, OPTIONS)
  if #o.positional > 1 then cli.usage_error("too many arguments: lash acp takes at most the spec") end
  if o.mode and o.mode ~= "ask" and o.mode ~= "auto" then
    cli.usage_error("--mode must be ask or auto, got '" .. o.mode .. "'")
  end
  local timeout
  if o.permission_timeout then
    timeout = tonumber(o.permission_timeout)
    if not timeout or timeout <= 0 then
      cli.usage_error("--permission-timeout needs seconds > 0, got '" .. o.permission_timeout .. "'")
    end
  end
  local models = {}
  for _, list in ipairs(o.models or {}) do
    for m in list:gmatch("[^,%s]+") do models[#models + 1] = m end
  end
  local agent, fail = load_agent(o, cli)
  if not agent then return fail end
  local store
  if not o.no_save and not (os.getenv("LASH_NO_SAVE") or ""):match("^[1ty]") then
    local ok, s = pcall(require("lash.sessions").open)
    if ok then store = s
    else
      runtime.log("warn", "lash acp: sessions are not saved: " .. tostring(type(s) == "table" and s.message or s))
    end
  end
  local server = require "lash.acp.server"
  local stdio = require "lash.mcp.stdio"
  local spec = o.positional[1]
  if spec and spec:sub(1, 1) ~= "/" then spec = (os.getenv("PWD") or ".") .. "/" .. spec end
  local ok, srv = pcall(server.new, stdio.stdio_self(server.CLIENT), {
    agent = agent, spec = spec, store = store, mode = o.mode, models = models,
    permission_timeout = timeout, max_prompt_bytes = o.max_prompt_bytes, plan = not o.no_plan,
    context_window = o.context_window,
  })
  if not ok then
    if store then store:close() end
    return cli.outcome(srv)
  end
  local ok2, err = pcall(function() runtime.spawn(function() srv:serve() end):join() end)
  if not ok2 then srv:close() end
  if store then store:close() end
  if not ok2 and not runtime.is_error(err, "cancelled") then return cli.outcome(err) end
  return 0
end

return M
