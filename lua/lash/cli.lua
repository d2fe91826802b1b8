--- The `lash` command line. `lash <command> [args]` dispatches to
-- `lash.commands.<command>`, a module returning `{ summary = "...",
-- usage = "...", main = function(args, cli) -> exit code }` where args are
-- the words after the command and cli is this module (for cli.out/cli.err).
-- Exit codes: 0 success, 1 failure, 2 usage error.
-- @module lash.cli

local cli = {}

local COMMANDS = { "config", "eval", "models", "run", "sandbox" }

--- Write to standard output.
function cli.out(...)
  io.stdout:write(...)
end

--- Write to standard error.
function cli.err(...)
  io.stderr:write(...)
end

--- Raise a usage error: printed without a traceback, exit code 2.
function cli.usage_error(msg)
  error(setmetatable({ usage = true, message = msg }, {
    __tostring = function(e) return e.message end,
  }), 0)
end

local function load_command(name)
  local ok, mod = pcall(require, "lash.commands." .. name)
  if ok then
    return mod
  end
  if tostring(mod):find("module 'lash.commands." .. name .. "' not found", 1, true) then
    return nil
  end
  error(mod, 0)
end

local function help()
  local lash = require "lash"
  local lines = {
    "lash " .. lash.version .. ": an embeddable, Lua-scriptable agent harness",
    "",
    "usage: lash <command> [options]",
    "",
    "commands:",
  }
  for _, name in ipairs(COMMANDS) do
    local mod = load_command(name)
    if mod then
      lines[#lines + 1] = string.format("  %-10s %s", name, mod.summary or "")
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "global options:"
  lines[#lines + 1] = "  --help             show this help (or `lash <command> --help`)"
  lines[#lines + 1] = "  --version          print the version"
  lines[#lines + 1] = "  --memory-limit N   cap the Lua heap (e.g. 512M); also LASH_MEMORY_LIMIT"
  lines[#lines + 1] = ""
  return table.concat(lines, "\n")
end

--- Run the CLI with the process arguments; returns the exit code.
-- @tparam table argv arg-style table (argv[0] the program)
function cli.main(argv)
  local args = {}
  for i = 1, #argv do
    args[i] = argv[i]
  end
  local first = args[1]
  if first == nil or first == "--help" or first == "-h" or first == "help" then
    cli.out(help(), "\n")
    return first == nil and 2 or 0
  end
  if first == "--version" or first == "-v" then
    cli.out("lash ", require("lash").version, "\n")
    return 0
  end
  local cmd = load_command(first)
  if not cmd then
    cli.err("lash: unknown command '", first, "'. Run `lash --help` for the list.\n")
    return 2
  end
  table.remove(args, 1)
  if args[1] == "--help" or args[1] == "-h" then
    cli.out(cmd.usage or cmd.summary or "", "\n")
    return 0
  end
  local ok, res = xpcall(cmd.main, function(e)
    if type(e) == "table" and e.usage then
      return e
    end
    return debug.traceback(e, 2)
  end, args, cli)
  if not ok then
    if type(res) == "table" and res.usage then
      cli.err("lash ", first, ": ", res.message, "\n")
      if cmd.usage then
        cli.err(cmd.usage, "\n")
      end
      return 2
    end
    local msg = tostring(res)
    if msg:find("not enough memory", 1, true) then
      local _, limit = require("lash").sys.memory()
      if limit then
        msg = string.format("the memory budget of %d bytes was exceeded (--memory-limit or "
          .. "LASH_MEMORY_LIMIT); raise it or make the work use less\n%s", limit, msg)
      end
    end
    cli.err("lash ", first, ": ", msg, "\n")
    return 1
  end
  return res or 0
end

return cli
