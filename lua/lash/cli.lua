--- The `lash` command line. `lash <command> [args]` dispatches to
-- `lash.commands.<command>`, a module returning `{ summary = "...",
-- usage = "...", main = function(args, cli) -> exit code | outcome }` where
-- args are the words after the command and cli is this module (for
-- cli.out/cli.err/cli.EXIT).
--
-- Every command shares one exit-code table (`cli.EXIT`, printed by
-- `lash --help`), so a pipeline can tell what went wrong from the code
-- alone. A command returns a number, or an outcome `{kind=, message=, ...}`;
-- errors it raises become outcomes too (`cli.outcome`), and one function,
-- `cli.exit_code`, maps either's kind to its code. A command with `json_final = true` (`lash run`)
-- prints one final JSON line for every outcome when given `--json`; one
-- with `json_errors = true` prints a JSON line for a failure under `--json`.
-- A command with `signals = true` runs with SIGINT, SIGTERM, SIGHUP, SIGQUIT
-- and SIGPIPE (stdout's reader went away; quietly) read
-- on the loop (the host's `trap`): the first cancels everything and cleans
-- up within the shutdown bound, a second exits at once; the exit code is
-- then 128 + the signal's number.
-- @module lash.cli
local runtime = require "lash.runtime"

local cli = {}

local COMMANDS = { "acp", "chat", "config", "eval", "mcp", "models", "run", "sandbox", "sessions" }

--- The exit codes, one table for every command. New outcomes get a row
-- here (and in `EXIT_ROWS`), never a private number in a command.
cli.EXIT = {
  ok = 0,
  error = 1,        -- anything not below: a tool that raised, a bug
  sandbox = 1,      -- a recoverable sandbox error: missing file, too large
  usage = 2,        -- bad command line
  unavailable = 3,  -- the sandbox is gone, expired, or no isolation exists
  auth = 4,         -- credentials refused (model provider or sandbox backend)
  refused = 5,      -- attach refused: no or wrong owner, held by another holder
  spec = 6,         -- the spec does not load or is invalid (config, template, missing key)
  provider = 7,     -- the model provider failed (after retries), or the model misbehaved
  limit = 8,        -- a limit was reached (max_steps, tokens, tool calls, retries)
  approval = 9,     -- stopped: tool calls need approval (--yes allows them)
  guardrail = 10,   -- a guardrail's tripwire, or a hook, stopped the run
  timed_out = 124,  -- sandbox exec: the command hit its deadline
  exec_failed = 125, -- sandbox exec: the command could not be started
  cancelled = 1,    -- cancelled with no signal behind it (with signal N: 128 + N)
  -- cancelled by a signal: 128 + its number (129 SIGHUP, 130 SIGINT, 131 SIGQUIT, 141 SIGPIPE, 143 SIGTERM)
}

-- The table as `lash --help` and docs/cli.md show it.
local EXIT_ROWS = {
  { "0", "success" },
  { "1", "failure not listed here (a tool raised; a sandbox error such as a missing file)" },
  { "2", "usage: bad command line" },
  { "3", "sandbox unavailable: gone, expired, or no isolation here" },
  { "4", "credentials refused (model provider or sandbox backend)" },
  { "5", "attach refused: no or wrong owner, held by another holder" },
  { "6", "spec error: the spec does not load or is invalid (includes a missing API key)" },
  { "7", "provider error: the model API failed after retries, or the model misbehaved" },
  { "8", "a limit was reached (max_steps, tokens, tool calls, a tool's retries, an untrusted spec's run-time budget)" },
  { "9", "stopped for approval (run with --yes to allow)" },
  { "10", "a guardrail's tripwire or a lifecycle hook stopped the run" },
  { "124", "sandbox exec: the command timed out" },
  { "125", "sandbox exec: the command could not be started" },
  { "128+N", "cancelled by signal N: 129 SIGHUP, 130 SIGINT, 131 SIGQUIT, 141 SIGPIPE, 143 SIGTERM" },
  { "other", "sandbox exec: the command's own exit code" },
}

-- Error kinds (err.kind) that are not themselves rows of cli.EXIT, to the
-- row they belong to. Read only through cli.exit_code.
local KIND = {
  config = "spec", template = "spec", arg = "spec",
  model = "provider", stream = "provider",
  connect = "provider", timeout = "provider", tls = "provider", http = "provider", status = "provider",
  retries = "limit", output = "limit", budget = "limit",
  hook = "guardrail",
}

--- The one place a kind becomes an exit code. `kind` is an outcome's kind
-- (a row of cli.EXIT) or an error's `err.kind`; anything unknown is the
-- "error" row (1). `signal` ("SIGINT", ...): a cancellation it caused is
-- 128 + its number.
-- @treturn integer the exit code
-- @treturn string the row of cli.EXIT it maps to
local SIGNO = { SIGHUP = 1, SIGINT = 2, SIGQUIT = 3, SIGPIPE = 13, SIGTERM = 15 }

function cli.exit_code(kind, signal)
  local row = KIND[kind] or kind
  if type(row) ~= "string" or cli.EXIT[row] == nil then row = "error" end
  -- a cancellation by signal N is its own row: 128 + N
  if row == "cancelled" and SIGNO[signal] then return 128 + SIGNO[signal], row end
  return cli.EXIT[row], row
end

--- The default shutdown bound, seconds (`--shutdown-timeout`, `LASH_SHUTDOWN_TIMEOUT`).
cli.SHUTDOWN_TIMEOUT = require("lash.defaults").cli.shutdown_timeout

-- What a command prints carries text from outside (file names, tags, tool
-- names and results, a provider's error body, a session's messages): on a
-- terminal it goes through the printer's one sanitizer, so none of it can
-- drive the terminal; piped, it passes as it came.
local function shown(fd, ...)
  local s = select("#", ...) == 1 and tostring((...)) or table.concat({ ... })
  return require("lash.cli.printer").shown(s, fd)
end

--- Write to standard output (made safe when it is a terminal).
function cli.out(...)
  io.stdout:write(shown(1, ...))
end

--- Write lash's own terminal control to standard output as it is: the run
-- printer's colours and spinner (it sanitizes what it shows from outside).
function cli.out_raw(...)
  io.stdout:write(...)
end

--- Write to standard error (made safe when it is a terminal).
function cli.err(...)
  io.stderr:write(shown(2, ...))
end

--- Write lash's own terminal control to standard error as it is (a
-- progress line's redraw).
function cli.err_raw(...)
  io.stderr:write(...)
end

--- Parse a command's arguments by a table of its options: each
-- `["--name"] = { field, kind }` with kind "flag" (true), "value" (the next
-- argument, or `--name=value`), "list" (repeatable values), "count" (a
-- positive integer) or "map" (repeatable `K<sep>V` pairs into a table:
-- `{ field, "map", sep, form }`, sep "=" or ":" (spaces after a ":" are
-- dropped), form the shape a usage error shows, e.g. "K=V"). Anything
-- else starting with `--` is a usage error. `--` ends the options; what
-- follows is positional, or with `how.rest` the list `o.rest` (`how.rest =
-- "refuse"`: a `--` is a usage error). Returns the options with
-- `positional`.
-- @tparam table args
-- @tparam table options
-- @tparam[opt] table how `rest` = true | "refuse"
-- @treturn table
function cli.parse_options(args, options, how)
  how = how or {}
  local o = { positional = {} }
  local i = 1
  while i <= #args do
    local a, inline = args[i], nil
    local name, v = a:match("^(%-%-[%w%-]+)=(.*)$")
    if name then a, inline = name, v end
    local opt = options[a]
    if a == "--" then
      if how.rest == "refuse" then cli.usage_error("unexpected '--'") end
      local rest = how.rest and {} or o.positional
      for j = i + 1, #args do rest[#rest + 1] = args[j] end
      if how.rest then o.rest = rest end
      break
    elseif opt then
      local field, kind = opt[1], opt[2]
      if kind == "flag" then
        if inline then cli.usage_error("option " .. a .. " takes no value") end
        o[field] = true
      else
        local val = inline
        if val == nil then
          i = i + 1
          val = args[i]
          if val == nil then cli.usage_error("option " .. a .. " needs a value") end
        end
        if kind == "count" then
          local n = math.tointeger(tonumber(val))
          if not n or n < 1 then cli.usage_error(a .. " needs a positive integer, got '" .. val .. "'") end
          val = n
        end
        if kind == "list" then
          o[field] = o[field] or {}
          o[field][#o[field] + 1] = val
        elseif kind == "map" then
          local sep = opt[3]
          local k, mv = val:match("^([^" .. sep .. "]+)" .. sep .. (sep == ":" and "%s*" or "") .. "(.*)$")
          if not k then cli.usage_error(a .. " needs " .. opt[4] .. ", got '" .. val .. "'") end
          o[field] = o[field] or {}
          o[field][k] = mv
        else
          o[field] = val
        end
      end
    elseif a:sub(1, 2) == "--" then
      cli.usage_error("unknown option '" .. a .. "'")
    else
      o.positional[#o.positional + 1] = a
    end
    i = i + 1
  end
  return o
end

--- Raise a usage error: printed as one line and a pointer to the help, exit code 2.
function cli.usage_error(msg)
  error(setmetatable({ cli_usage = true, kind = "usage", message = msg }, {
    __tostring = function(e) return e.message end,
  }), 0)
end

--- The outcome for an error: `{kind=, exit_code=, message=, error=}`.
-- @param e an error object (`kind`, `message`), a usage error or a string
function cli.outcome(e)
  if type(e) == "table" and e.cli_usage then
    return { kind = "usage", exit_code = cli.EXIT.usage, message = e.message }
  end
  local code, kind = cli.exit_code(type(e) == "table" and e.kind or "error")
  local msg = type(e) == "table" and e.message or tostring(e)
  return { kind = kind, exit_code = code, message = tostring(msg), error = e }
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

--- The exit-code table as text (for `--help` of every command).
function cli.exit_codes_text()
  local lines = { "exit codes:" }
  for _, r in ipairs(EXIT_ROWS) do
    lines[#lines + 1] = string.format("  %-6s %s", r[1], r[2])
  end
  return table.concat(lines, "\n")
end

local function help()
  local lines = {
    "lash " .. runtime.version .. ": an embeddable, Lua-scriptable agent harness",
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
  lines[#lines + 1] = "  --shutdown-timeout S  after a signal (INT, TERM, HUP, QUIT, PIPE), how long cleanup may take"
  lines[#lines + 1] = "                     (default 10); also LASH_SHUTDOWN_TIMEOUT. A second"
  lines[#lines + 1] = "                     signal exits at once."
  lines[#lines + 1] = ""
  lines[#lines + 1] = cli.exit_codes_text()
  lines[#lines + 1] = ""
  return table.concat(lines, "\n")
end

local function bound_of(s, what)
  local n = tonumber(s)
  if not n or n <= 0 or n > 86400 or n ~= n then
    return nil, what .. " must be a number of seconds above 0 (at most 86400), got '" .. tostring(s) .. "'"
  end
  return n
end

-- Take --shutdown-timeout S / --shutdown-timeout=S out of args (not after
-- "--", which belongs to a command); returns the bound or nil, message.
local function shutdown_bound(args)
  local bound, err = cli.SHUTDOWN_TIMEOUT, nil
  local env = os.getenv("LASH_SHUTDOWN_TIMEOUT")
  if env and env ~= "" then bound, err = bound_of(env, "LASH_SHUTDOWN_TIMEOUT") end
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then break end
    local v = a:match("^%-%-shutdown%-timeout=(.*)$")
    if a == "--shutdown-timeout" then
      v = args[i + 1]
      if v == nil then return nil, "--shutdown-timeout needs a number of seconds" end
      table.remove(args, i)
    end
    if v then
      table.remove(args, i)
      bound, err = bound_of(v, "--shutdown-timeout")
    else
      i = i + 1
    end
  end
  return bound, err
end

local function wants_json(args)
  for _, a in ipairs(args) do
    if a == "--" then return false end
    if a == "--json" then return true end
  end
  return false
end

local function json_line(o)
  local line = { type = "exit", kind = o.kind, exit_code = o.exit_code }
  for _, k in ipairs { "message", "signal", "stop_reason", "error_kind", "limit", "session" } do
    if o[k] ~= nil then line[k] = o[k] end
  end
  local json = require "lash.json"
  local ok, s = pcall(json.encode_canonical, line)
  if not ok then s = json.encode_canonical { type = "exit", kind = o.kind, exit_code = o.exit_code } end
  return s
end

-- Print a failure's message on stderr (once), as `lash <cmd>: message`.
local function report(name, cmd, o)
  if o.printed or o.exit_code == 0 then return end
  if o.kind == "usage" then
    cli.err("lash ", name, ": ", o.message, "\n", "see 'lash ", name, " --help'\n")
    return
  end
  local msg = tostring(o.message)
  if o.kind == "error" and msg:find("not enough memory", 1, true) then
    local _, limit = runtime.sys.memory()
    if limit then
      msg = string.format("the memory budget of %d bytes was exceeded (--memory-limit or "
        .. "LASH_MEMORY_LIMIT); raise it or make the work use less\n%s", limit, msg)
    end
  end
  cli.err("lash ", name, ": ", msg, "\n")
end

--- Run the CLI with the process arguments; returns the exit code.
-- @tparam table argv arg-style table (argv[0] the program)
-- @tparam[opt] table host what the program hosting the CLI offers:
--   `trap(seconds)` (watch SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE on the loop, with that
--   shutdown bound) and `signal()` (the first signal caught: number, name)
function cli.main(argv, host)
  cli.host = host   -- for commands that need the program (chat: host.term)
  local args = {}
  for i = 1, #argv do
    args[i] = argv[i]
  end
  local first = args[1]
  if first == nil or first == "--help" or first == "-h" or first == "help" then
    if first == nil then
      cli.err("lash: missing the command\nsee 'lash --help'\n")
      return cli.EXIT.usage
    end
    cli.out(help(), "\n")
    return 0
  end
  if first == "--version" or first == "-v" then
    cli.out("lash ", runtime.version, "\n")
    return 0
  end
  local cmd = load_command(first)
  if not cmd then
    cli.err("lash: unknown command '", first, "'\nsee 'lash --help'\n")
    return cli.EXIT.usage
  end
  table.remove(args, 1)
  -- --help anywhere before `--` (lash mcp serve --help, lash sandbox create
  -- --help) is the command's help
  local asks_help = false
  for _, a in ipairs(args) do
    if a == "--" then break end
    if a == "--help" or a == "-h" then asks_help = true break end
  end
  if asks_help then
    cli.out(cmd.usage or cmd.summary or "", "\n\n", cli.exit_codes_text(), "\n")
    return 0
  end
  local json = wants_json(args) and (cmd.json_final or cmd.json_errors)
  local o
  local bound, berr = shutdown_bound(args)
  if not bound then
    o = cli.outcome({ cli_usage = true, message = berr })
  else
    if cmd.signals and host and host.trap then
      local ok, terr = host.trap(bound)
      if not ok then cli.err("lash: warning: ", tostring(terr), "; signals end lash at once\n") end
    end
    local ok, res = xpcall(cmd.main, function(e)
      if type(e) == "table" then return e end
      return debug.traceback(e, 2)
    end, args, cli)
    if not ok then
      o = cli.outcome(res)
    elseif type(res) == "table" then
      -- a returned outcome's kind maps exactly as a raised error's does
      o = res
      local code, row = cli.exit_code(o.kind or "ok", o.signal)
      if o.kind and row ~= o.kind and o.error_kind == nil then o.error_kind = o.kind end
      o.kind, o.exit_code = row, code
    else
      o = { kind = (res or 0) == 0 and "ok" or "exit", exit_code = res or 0, printed = true }
    end
  end
  local signo, signame
  if host and host.signal then signo, signame = host.signal() end
  if signo then
    -- asked to stop: that is the outcome, whatever the work got to (a
    -- failure other than the cancellation itself is still said)
    if o.exit_code ~= 0 and o.kind ~= "cancelled" then report(first, cmd, o) end
    o = { kind = "cancelled", signal = signame, exit_code = 128 + signo, message = "stopped by " .. signame,
          session = o.session,
          -- the reader of stdout went away (| head): not worth a word
          printed = signame == "SIGPIPE" or nil }
  end
  report(first, cmd, o)
  if json and (cmd.json_final or o.exit_code ~= 0) then
    cli.out(json_line(o), "\n")
  end
  return o.exit_code
end

return cli
