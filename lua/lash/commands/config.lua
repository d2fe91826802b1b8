--- `lash config show|path|check`: the effective settings and where each
-- comes from (command line, environment, config file, default). API keys
-- are never printed, only whether one is set and from where.
-- @module lash.commands.config
local M = {
  summary = "show the effective settings and where each comes from",
  usage = [[usage: lash config [show] [--model M] [--backend B] [--json]
       lash config path
       lash config check [FILE]

show    (the default) every setting with its value and source: cli, env VAR, config,
        default. --model/--backend show what `lash run` would use with
        them. API keys show as "set (N characters, not shown)".
path    print the config file's path ($LASH_CONFIG, else
        $XDG_CONFIG_HOME/lash/config.lua, else ~/.config/lash/config.lua).
check   parse FILE (default: the config file) and report errors.

The config file is Lua data (see docs/cli.md, "Daily use").]],
}

local function show(args, cli)
  local o = {}
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--json" then o.json = true
    elseif a == "--model" or a == "--backend" then
      i = i + 1
      if args[i] == nil then cli.usage_error("option " .. a .. " needs a value") end
      o[a:sub(3)] = args[i]
    else cli.usage_error("unknown argument '" .. a .. "'") end
    i = i + 1
  end
  local config = require "lash.config"
  local c, err = config.get()
  if not c then
    cli.err("lash config: ", err, "\n")
    return 1
  end
  local path = config.path()
  local f = io.open(path, "rb")
  local found = f ~= nil
  if f then f:close() end
  local rows = config.effective(o, { openai = require("lash.models.openai").DEFAULT_BASE_URL,
                                     anthropic = require("lash.models.anthropic").DEFAULT_BASE_URL })
  if o.json then
    local json = require "lash.json"
    local settings = {}
    for _, r in ipairs(rows) do settings[r.key] = { value = r.value, source = r.source } end
    cli.out(json.encode_canonical { file = path, found = found, settings = settings }, "\n")
    return 0
  end
  cli.out("config file: ", path, found and "" or " (not found: using defaults)", "\n")
  local w = 0
  for _, r in ipairs(rows) do w = math.max(w, #r.key) end
  for _, r in ipairs(rows) do
    cli.out(string.format("%-" .. w .. "s  %s  (%s)\n", r.key, r.value, r.source))
  end
  return 0
end

function M.main(args, cli)
  local sub = table.remove(args, 1)
  local config = require "lash.config"
  -- `lash config` alone (or with show's options) shows the settings
  if sub == nil or sub:sub(1, 2) == "--" then
    if sub then table.insert(args, 1, sub) end
    sub = "show"
  end
  if sub == "show" then return show(args, cli) end
  if sub == "path" then
    if #args > 0 then cli.usage_error("path takes no arguments") end
    cli.out((config.path()), "\n")
    return 0
  end
  if sub == "check" then
    if #args > 1 then cli.usage_error("check takes at most one file") end
    local c, where, found = config.load(args[1])
    if not c then
      cli.err("lash config: ", where, "\n")
      return 1
    end
    cli.out(where, found == false and ": not found (the defaults apply)\n" or ": ok\n")
    return 0
  end
  cli.usage_error("unknown subcommand '" .. sub .. "' (known: show, path, check)")
end

return M
