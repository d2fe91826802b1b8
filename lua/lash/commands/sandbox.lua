--- `lash sandbox ...`: sandboxes from the shell, for orchestrators (Airflow,
-- cron, CI) that split work into steps: create one and stage input, let
-- agent runs work in it, read the result out, destroy it.
-- @module lash.commands.sandbox
local runtime = require "lash.runtime"

local M = {
  summary = "create, use, inspect and destroy sandboxes",
  signals = true,      -- SIGINT/SIGTERM/SIGHUP: exec kills its command, lash exits 128+N
  json_errors = true,  -- under --json a failure is one {"type":"exit",...} line on stdout
}

-- The CLI's one exit-code table (lash.cli.EXIT): ok, sandbox (1), usage,
-- unavailable, auth, refused, timed_out (124), exec_failed (125), ...
-- set by M.main from the cli it is handed (lash.cli requires this module,
-- so requiring lash.cli back would be a cycle)
local EXIT

M.usage = [[
usage: lash sandbox <subcommand> [options]

  create [--owner O] [--timeout S] [--network off|on] [--tag k=v]...
         [--env K=V]... [--workdir DIR] [--from-snapshot S]
         local: [--rootfs DIR] [--isolation bwrap|none] [--limit name=N]...
         modal: [--image TAG] [--app NAME] [--cpu N] [--memory MIB]
                [--gpu TYPE|TYPE:N] [--idle-timeout S] [--publish PORT]...
                                      create a sandbox, print its id (modal:
                                      --publish tunnels PORT to the internet
                                      over TLS, its URL printed on stderr)
  snapshot ID                         snapshot its files, print the snapshot id
                                      (create --from-snapshot starts from it)
  snapshot rm SNAP...                 remove snapshots (one already gone is
                                      fine; modal keeps its images)
  exec ID [--timeout S] [--max-output-bytes N] [--cwd DIR] [--env K=V]...
          [--stdin] [--json] -- CMD [ARGS...]
                                      run a command; its stdout and stderr are
                                      printed (tails kept) and its exit code
                                      becomes lash's; with --json one result
                                      object instead, and lash's own status
  read ID PATH [--max-bytes N]        print a file
  write ID PATH < DATA                write a file from standard input
  ls ID [PATH]                        list a directory (directories end in /)
  stat ID PATH                        kind, size, mode and mtime of a path
  cp SRC DST                          copy a file or a directory in or out: one
                                      side is ID:PATH, the other a host path
                                      (any size, streamed; progress on a tty)
  port ID PORT [--host-port N] [--bind ADDR]
                                      relay a host port (printed; any free one
                                      unless --host-port) to PORT inside the
                                      sandbox until interrupted (local); modal:
                                      print the tunnel URL of a port the
                                      sandbox was created with (--publish)
  tags ID [--json]                    print the tags (k=v lines, sorted)
  attach ID --owner O [--holder H]    claim the sandbox (holder defaults to O)
  release ID --holder H               clear holder's claim
  destroy ID                          destroy it (a sandbox already gone is fine)
  list [--json]                       local: the sandboxes under the state root;
                                      modal: the running sandboxes lash made
  gc                                  remove expired sandboxes, print their ids

common options: --backend local|modal (default local), --state-root DIR
(local; default $LASH_SANDBOX_ROOT, /var/lib/lash/sandboxes as root, else
$XDG_STATE_HOME/lash/sandboxes)

`lash sandbox SUBCOMMAND --help` prints this text. exec exits with the
command's own code (124 when it timed out, 125 when it could not start); an
interrupted exec (SIGINT, SIGTERM, SIGHUP) kills its command and exits
128 + the signal's number. The command's codes can collide with lash's own
(a command's exit 3 reads as "sandbox unavailable"): `exec --json` keeps
them apart. It prints one line {"type":"result","exit_code":N,
"timed_out":B,"stdout":...,"stderr":...,"stdout_truncated":B,
"stderr_truncated":B} and exits 0 whenever the command ran, whatever its
code; when lash could not run it, the line is {"type":"exit","kind":...,
"exit_code":...,"message":...} and lash exits with that code (3, 4, 5,
125, 128+N). `list --json` prints an array, `[]` when empty.
Local sandboxes that expired over a minute ago are also reclaimed by any
lash process opening the state root (a few per open, never one held or
running a command; LASH_SANDBOX_RECLAIM=off turns it off); gc removes
every expired one.]]

local function usage(cli, msg)
  cli.usage_error(msg)
end

--- Parse args by cli.parse_options: flags listed in spec (name ->
-- "value" | "list" | "flag"), positional words, and everything after "--"
-- (when allowed).
local function parse(cli, args, spec, allow_rest)
  local options = {}
  for name, kind in pairs(spec) do options["--" .. name] = { name, kind } end
  local o = cli.parse_options(args, options, { rest = allow_rest and true or "refuse" })
  local pos, rest = o.positional, o.rest
  o.positional, o.rest = nil, nil
  return o, pos, rest
end

local COMMON = { backend = "value", ["state-root"] = "value" }

local function with_common(spec)
  for k, v in pairs(COMMON) do spec[k] = v end
  return spec
end

local function backend_opts(opts)
  local t = { backend = opts.backend }
  if opts["state-root"] then t.state_root = opts["state-root"] end
  return t
end

local function pairs_list(cli, list, what)
  local t = {}
  for _, kv in ipairs(list or {}) do
    local k, v = kv:match("^([^=]+)=(.*)$")
    if not k then usage(cli, what .. " must look like key=value, got '" .. kv .. "'") end
    t[k] = v
  end
  return t
end

local function number(cli, s, what)
  local n = tonumber(s)
  if not n then usage(cli, what .. " must be a number, got '" .. tostring(s) .. "'") end
  return n
end

local function integer(cli, s, what)
  local n = math.tointeger(tonumber(s))
  if not n or n < 0 then usage(cli, what .. " must be a non-negative integer, got '" .. tostring(s) .. "'") end
  return n
end

local function need_id(cli, pos, sub)
  if not pos[1] then usage(cli, sub .. " needs a sandbox id") end
  return pos[1]
end

local function open(pos, opts, cli, sub)
  return runtime.sandbox.open(need_id(cli, pos, sub), backend_opts(opts))
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function iso(t)
  return t and os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) or "-"
end

local sub = {}

function sub.create(args, cli)
  local opts, pos = parse(cli, args, with_common {
    owner = "value", timeout = "value", network = "value", tag = "list",
    env = "list", workdir = "value", rootfs = "value", isolation = "value",
    limit = "list", ["from-snapshot"] = "value",
    image = "value", app = "value", cpu = "value", memory = "value", gpu = "value",
    ["idle-timeout"] = "value", publish = "list",
  })
  if #pos > 0 then usage(cli, "create takes no positional arguments") end
  local spec = backend_opts(opts)
  spec.owner = opts.owner
  spec.timeout = opts.timeout and number(cli, opts.timeout, "--timeout")
  if opts.network and opts.network ~= "off" and opts.network ~= "on" then
    usage(cli, "--network must be off or on")
  end
  spec.network = opts.network
  spec.tags = opts.tag and pairs_list(cli, opts.tag, "--tag")
  spec.env = opts.env and pairs_list(cli, opts.env, "--env")
  spec.workdir = opts.workdir
  spec.rootfs = opts.rootfs
  spec.isolation = opts.isolation
  spec.from_snapshot = opts["from-snapshot"]
  -- Modal's create options (the backend refuses them elsewhere, naming them)
  spec.image = opts.image
  spec.app_name = opts.app
  spec.cpu = opts.cpu and number(cli, opts.cpu, "--cpu")
  spec.memory = opts.memory and integer(cli, opts.memory, "--memory")
  spec.gpu = opts.gpu
  spec.idle_timeout = opts["idle-timeout"] and integer(cli, opts["idle-timeout"], "--idle-timeout")
  if opts.limit then
    spec.limits = {}
    for k, v in pairs(pairs_list(cli, opts.limit, "--limit")) do
      -- "none" or "off": lash's own limit (false; for disk: no quota), not a number
      if v == "none" or v == "off" then spec.limits[k] = false else spec.limits[k] = integer(cli, v, "--limit " .. k) end
    end
  end
  if opts.publish then
    if (opts.backend or "local") ~= "modal" then
      usage(cli, "--publish is Modal's (a tunnel made with the sandbox); a local sandbox's port is "
        .. "published by a lash that keeps running: lash sandbox port ID PORT")
    end
    spec.publish = {}
    for _, p in ipairs(opts.publish) do
      local n = math.tointeger(tonumber(p))
      if not n or n < 1 or n > 65535 then usage(cli, "--publish takes a TCP port (1-65535), got '" .. p .. "'") end
      spec.publish[#spec.publish + 1] = n
    end
  end
  -- the sandbox outlives this process: its lifetime (--timeout) ends it
  local sb = runtime.sandbox.create(spec)
  if spec.publish then
    -- where each port is reachable: on stderr, so stdout stays the id alone
    local ok, tunnels = pcall(sb.tunnels, sb)
    if not ok then
      sb:destroy()
      error(tunnels, 0)
    end
    for _, t in ipairs(tunnels) do cli.err("port ", t.port, ": ", t.url, "\n") end
  end
  cli.out(sb:detach(), "\n")
  return EXIT.ok
end

function sub.snapshot(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  if pos[1] == "rm" then
    if #pos < 2 then usage(cli, "snapshot rm takes the snapshot ids to remove") end
    for i = 2, #pos do
      runtime.sandbox.drop_snapshot(pos[i], backend_opts(opts))
      cli.out("removed ", pos[i], "\n")
    end
    return EXIT.ok
  end
  if #pos > 1 then usage(cli, "snapshot takes one sandbox id") end
  cli.out(open(pos, opts, cli, "snapshot"):snapshot(), "\n")
  return EXIT.ok
end

-- `exec --json`: the command's outcome as one line, lash's status (0: it
-- ran) apart from the command's code. Output that is not UTF-8 is kept
-- byte for byte as \u00XX escapes of each byte (a Latin-1 reading), said
-- by "stdout_encoding": "latin1".
local function exec_json(r, cli)
  local json = require "lash.json"
  local out = { type = "result", exit_code = r.exit_code, timed_out = r.timed_out == true,
                stdout_truncated = r.stdout_truncated == true, stderr_truncated = r.stderr_truncated == true }
  for _, k in ipairs { "stdout", "stderr" } do
    local text = r[k] or ""
    if utf8.len(text) then
      out[k] = text
    else
      out[k] = text:gsub("[\128-\255]", function(c) return utf8.char(c:byte()) end)
      out[k .. "_encoding"] = "latin1"
    end
  end
  cli.out(json.encode_canonical(out), "\n")
  return EXIT.ok
end

function sub.exec(args, cli)
  local opts, pos, rest = parse(cli, args, with_common {
    timeout = "value", ["max-output-bytes"] = "value", cwd = "value",
    env = "list", stdin = "flag", json = "flag",
  }, true)
  if not rest or #rest == 0 then usage(cli, "exec needs a command after --") end
  local s = open(pos, opts, cli, "exec")
  local eopts = {
    timeout = opts.timeout and number(cli, opts.timeout, "--timeout"),
    max_output_bytes = opts["max-output-bytes"]
      and integer(cli, opts["max-output-bytes"], "--max-output-bytes"),
    cwd = opts.cwd,
    env = opts.env and pairs_list(cli, opts.env, "--env"),
    stdin = opts.stdin and io.stdin:read("a") or nil,
  }
  local ok, r = pcall(s.exec, s, rest, eopts)
  if not ok and not (type(r) == "table" and r.kind == "cancelled") then
    -- a program the jail cannot see because it masks where it lives: say so
    local note = require("lash.sandbox_masked").note(rest[1])
    if note then
      local msg = (type(r) == "table" and tostring(r.message) or tostring(r)) .. ". " .. note
      if type(r) == "table" then r.message = msg else r = msg end
    end
  end
  if not ok then
    local kind = type(r) == "table" and r.kind
    -- a sandbox that is gone, refused credentials, a signal: the table's
    -- own rows; anything else kept the command from starting
    if kind == "unavailable" or kind == "auth" or kind == "refused" or kind == "cancelled" then
      error(r, 0)
    end
    if opts.json then
      return { kind = "exec_failed", message = "exec: " .. tostring(type(r) == "table" and r.message or r) }
    end
    cli.err("lash sandbox exec: ", tostring(r), "\n")
    return EXIT.exec_failed
  end
  if opts.json then return exec_json(r, cli) end
  io.stdout:write(r.stdout)
  io.stderr:write(r.stderr)
  if r.stdout_truncated then
    cli.err("lash: stdout truncated, the last ", #r.stdout, " bytes kept\n")
  end
  if r.stderr_truncated then
    cli.err("lash: stderr truncated, the last ", #r.stderr, " bytes kept\n")
  end
  if r.timed_out then
    cli.err("lash: timed out after ", r.applied_timeout, "s\n")
    return EXIT.timed_out
  end
  return r.exit_code
end

function sub.read(args, cli)
  local opts, pos = parse(cli, args, with_common { ["max-bytes"] = "value" })
  if not pos[2] then usage(cli, "read needs a sandbox id and a path") end
  local s = open(pos, opts, cli, "read")
  local data = s:read_file(pos[2], opts["max-bytes"]
    and { max_bytes = integer(cli, opts["max-bytes"], "--max-bytes") } or nil)
  io.stdout:write(data)
  return EXIT.ok
end

function sub.write(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  if not pos[2] then usage(cli, "write needs a sandbox id and a path") end
  local s = open(pos, opts, cli, "write")
  s:write_file(pos[2], io.stdin:read("a"))
  return EXIT.ok
end

function sub.ls(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  local s = open(pos, opts, cli, "ls")
  for _, e in ipairs(s:list_dir(pos[2] or ".")) do
    cli.out(e.name, e.kind == "dir" and "/" or "", "\n")
  end
  return EXIT.ok
end

function sub.stat(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  if not pos[2] then usage(cli, "stat needs a sandbox id and a path") end
  local st = open(pos, opts, cli, "stat"):stat(pos[2])
  cli.out(string.format("kind=%s size=%d mode=%04o mtime=%s\n", st.kind,
    st.size, st.mode, iso(st.mtime)))
  return EXIT.ok
end

function sub.tags(args, cli)
  local opts, pos = parse(cli, args, with_common { json = "flag" })
  local tags = open(pos, opts, cli, "tags"):read_tags()
  if opts.json then
    cli.out(require("lash.json").encode_canonical(tags), "\n")
  else
    for _, k in ipairs(sorted_keys(tags)) do cli.out(k, "=", tags[k], "\n") end
  end
  return EXIT.ok
end

function sub.attach(args, cli)
  local opts, pos = parse(cli, args, with_common { owner = "value", holder = "value" })
  if not opts.owner then usage(cli, "attach needs --owner") end
  local info = open(pos, opts, cli, "attach"):attach(opts.owner, opts.holder or opts.owner)
  cli.out("held by ", info.holder, info.atomic and " (atomic claim)" or "", "\n")
  return EXIT.ok
end

function sub.release(args, cli)
  local opts, pos = parse(cli, args, with_common { holder = "value" })
  if not opts.holder then usage(cli, "release needs --holder") end
  local cleared = open(pos, opts, cli, "release"):release(opts.holder)
  cli.out(cleared and "released\n" or ("not held by " .. opts.holder .. "\n"))
  return EXIT.ok
end

function sub.cp(args, cli)
  return require("lash.cli.sandbox_cp").run(args, cli,
    { parse = parse, with_common = with_common, open = open, usage = usage })
end

function sub.port(args, cli)
  return require("lash.cli.sandbox_port").run(args, cli,
    { parse = parse, with_common = with_common, open = open, usage = usage })
end

function sub.destroy(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  open(pos, opts, cli, "destroy"):destroy()
  return EXIT.ok
end

function sub.list(args, cli)
  local opts, pos = parse(cli, args, with_common { json = "flag" })
  if #pos > 0 then usage(cli, "list takes no positional arguments") end
  local list = runtime.sandbox.list(backend_opts(opts))
  table.sort(list, function(a, b) return a.id < b.id end)
  if opts.json then
    local json = require "lash.json"
    cli.out(json.encode_canonical(json.array(list)), "\n")
    return EXIT.ok
  end
  for _, e in ipairs(list) do
    local tags = e.tags or {}
    cli.out(string.format("%s\t%s\texpires %s\towner=%s\tholder=%s\n", e.id,
      e.status, iso(e.expires_at), tags.lash_owner or "-", tags.lash_holder or "-"))
  end
  return EXIT.ok
end

function sub.gc(args, cli)
  local opts, pos = parse(cli, args, with_common {})
  if #pos > 0 then usage(cli, "gc takes no positional arguments") end
  for _, id in ipairs(runtime.sandbox.gc(backend_opts(opts))) do cli.out(id, "\n") end
  return EXIT.ok
end

--- Entry point: `lash sandbox <subcommand> ...`; returns the exit code.
-- The subcommand runs as a task, so a signal cancels what it waits on (the
-- command of exec is killed).
function M.main(args, cli)
  EXIT = cli.EXIT
  local name = args[1]
  if not name then usage(cli, "missing subcommand") end
  local fn = sub[name]
  if not fn then usage(cli, "unknown subcommand '" .. name .. "'") end
  local rest = table.move(args, 2, #args, 1, {})
  for _, a in ipairs(rest) do
    if a == "--" then break end
    if a == "--help" or a == "-h" then
      cli.out(M.usage, "\n\n", cli.exit_codes_text(), "\n")
      return EXIT.ok
    end
  end
  local ok, res = runtime.spawn(function() return pcall(fn, rest, cli) end):join()
  if ok then return res end
  if type(res) == "table" and res.cli_usage then error(res, 0) end
  local kind = type(res) == "table" and res.kind
  -- a plain string is the binding refusing a bad value: bad input
  if not kind and type(res) == "string" then
    return { kind = "usage", message = name .. ": " .. res }
  end
  local o = cli.outcome(res)
  cli.err("lash sandbox ", name, ": ", tostring(res), "\n")
  o.printed = true
  if kind and not ({ unavailable = 1, auth = 1, refused = 1, cancelled = 1 })[kind] then
    -- any other sandbox failure (missing file, too large, io) is the
    -- "sandbox" row (exit 1); the CLI maps the kind to its code
    o.error_kind, o.kind, o.exit_code = kind, "sandbox", nil
  end
  return o
end


return M
