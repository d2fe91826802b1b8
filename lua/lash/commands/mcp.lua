--- `lash mcp ...`: talk to an MCP server from the shell (list its tools,
-- call one), and serve lash's sandbox to MCP hosts over stdio.
-- @module lash.commands.mcp
local runtime = require "lash.runtime"
local M = {
  signals = true,      -- SIGINT/SIGTERM/SIGHUP: serve ends its sessions (their sandboxes destroyed), exits 128+N
  summary = "list or call an MCP server's tools; serve the sandbox over MCP",
  usage = [==[usage: lash mcp <subcommand> ...

  tools [--json] URL | -- CMD [ARGS...]
                                        list the tools of a Streamable HTTP
                                        server at URL or a stdio server
  call  [--timeout S] [--json] URL | TOOL ['JSON'] -- CMD [ARGS...]
        (URL first: lash mcp call URL TOOL ['JSON'])
                                        call TOOL with the JSON arguments
                                        (an object; default {}) and print
                                        what a model would see (--json: the
                                        raw CallToolResult)
  login [--client-id ID [--client-secret S]] [--scope S] [--port P]
        [--no-browser] URL              authorize lash for an OAuth-protected
                                        server: opens the authorization URL
                                        ($BROWSER or xdg-open; it is printed
                                        too), waits for the redirect on
                                        127.0.0.1:P, keeps the tokens (0600)
                                        for later runs, which refresh them
  logout URL                            forget the server's tokens and client
  serve [--backend B] [--timeout S] [--workdir DIR] [--network off|on]
        [--rootfs DIR] [--image IMG] [--attach H --owner O [--holder H]]
        [--http PORT [--token T]]       speak MCP on stdin/stdout (or
                                        Streamable HTTP on 127.0.0.1:PORT,
                                        PORT 0: any free one), exposing
                                        a sandbox's run_command, read_file,
                                        write_file and list_directory

  tools/call options: --env K=V (repeatable, passed to a stdio server),
  --cwd DIR, --sandbox (run a stdio server inside a fresh local sandbox,
  destroyed after); for URLs --header 'Name: value' (repeatable) and
  --bearer-token T (or $LASH_MCP_TOKEN), else OAuth: tokens from `lash mcp
  login`, or the login flow itself when stderr is a terminal (--client-id,
  --client-secret, --scope as for login). A server that asks for input
  (elicitation) is answered on a terminal, field by field; --accept-defaults
  accepts with the schema's defaults; otherwise it is declined, saying so. Exit codes: 0 success; 1 the server failed or the tool
  returned an error (isError); 2 usage; 4 authorization needed or refused.

  serve: one sandbox per MCP session, created when the client initializes
  and destroyed when it disconnects (with --attach: the existing sandbox,
  never destroyed). Past its lifetime (--timeout, default 300 s) the next
  call runs in a fresh sandbox, its result starting with a note saying so. Hosts: `claude mcp add lash -- lash mcp serve`, or in
  Codex's config.toml: [mcp_servers.lash] command = "lash",
  args = ["mcp", "serve"].]==],
}

-- The kinds of the options below that cli.parse_options reads as K=V maps.
local MAPS = { env = { "env", "map", "=", "K=V" }, header = { "headers", "map", ":", "'Name: value'" } }

-- Parse by cli.parse_options: spec is name -> "value" | "flag" | "env" |
-- "header"; everything after "--" is the rest (a stdio server's command).
local function parse(cli, args, spec)
  local options = {}
  for name, kind in pairs(spec) do options["--" .. name] = MAPS[kind] or { name, kind } end
  local o = cli.parse_options(args, options, { rest = true })
  local pos, rest = o.positional, o.rest
  o.positional, o.rest = nil, nil
  o.env = o.env or {}
  return o, pos, rest
end

local function server_def(cli, o, rest, pos)
  if pos and pos[1] and pos[1]:match("^https?://") then
    if rest then cli.usage_error("give either a URL or a command after --, not both") end
    local url = table.remove(pos, 1)
    if o.sandbox then cli.usage_error("--sandbox applies to a stdio server (-- CMD ...), not a URL") end
    return { url = url, headers = o.headers, bearer_token = o["bearer-token"] or os.getenv("LASH_MCP_TOKEN"),
             name = url, timeout = o.timeout and tonumber(o.timeout) or nil,
             oauth = { client_id = o["client-id"], client_secret = o["client-secret"], scope = o.scope } }
  end
  if not rest or #rest == 0 then
    cli.usage_error("give the server's command after --, e.g. lash mcp tools -- npx -y @modelcontextprotocol/server-everything")
  end
  local args = table.move(rest, 2, #rest, 1, {})
  return { command = rest[1], args = args, env = o.env, cwd = o.cwd, name = rest[1],
           timeout = o.timeout and tonumber(o.timeout) or nil, sandbox = o.sandbox or nil }
end

-- The client, and for --sandbox the sandbox to destroy after it.
-- How a server's elicitation is answered from the CLI (lash.cli.elicit).
local function elicit_handler(o)
  local printer = require "lash.cli.printer"
  return require("lash.cli.elicit").handler {
    accept_defaults = o["accept-defaults"], tty = printer.is_tty(0) and printer.is_tty(2),
    read = function() return io.stdin:read("l") end,
    write = function(str) io.stderr:write(str) io.stderr:flush() end,
    warn = function(str) io.stderr:write(str) end,
  }
end

local function connect(def, o)
  local mcp = require "lash.mcp"
  local sb
  if def.sandbox then sb = runtime.sandbox.create {} end
  local okt, transport = pcall(mcp.transport, def, sb)
  if not okt then
    if sb then sb:close() end
    error(transport, 0)
  end
  local ok, c = pcall(mcp.connect_client, transport, { name = def.name, timeout = def.timeout,
                                                       on_elicit = o and elicit_handler(o) or nil })
  if not ok then
    pcall(transport.close, transport)
    if sb then sb:close() end
    error(c, 0)
  end
  if sb then
    local close = c.close
    c.close = function(self) close(self); sb:close() end
  end
  return c
end

local function fail(cli, what, e)
  cli.err("lash mcp ", what, ": ", tostring(type(e) == "table" and e.message or e), "\n")
  if type(e) == "table" and e.kind == "auth" then return cli.EXIT.auth end
  return 1
end

local CLIENT_OPTS = { json = "flag", env = "env", cwd = "value", timeout = "value", header = "header",
                      ["bearer-token"] = "value", sandbox = "flag", ["client-id"] = "value",
                      ["client-secret"] = "value", scope = "value", ["accept-defaults"] = "flag" }

local function oauth_for(cli, o, url)
  if not url or not url:match("^https?://") then cli.usage_error("give the server's URL, e.g. https://example.com/mcp") end
  if o["client-secret"] and not o["client-id"] then cli.usage_error("--client-secret needs --client-id") end
  local port = o.port and math.tointeger(tonumber(o.port))
  if o.port and (not port or port < 0 or port > 65535) then cli.usage_error("--port needs a port (0-65535)") end
  return require("lash.mcp.oauth").new {
    url = url, name = url, client_id = o["client-id"], client_secret = o["client-secret"], scope = o.scope,
    redirect_port = port, interactive = true, open_browser = not o["no-browser"] }
end

local function cmd_login(args, cli)
  local o, pos = parse(cli, args, { ["client-id"] = "value", ["client-secret"] = "value", scope = "value",
                                    port = "value", ["no-browser"] = "flag" })
  if #pos ~= 1 then cli.usage_error("give one URL: lash mcp login URL") end
  local auth = oauth_for(cli, o, pos[1])
  local ok, err = pcall(auth.login, auth)
  if not ok then return fail(cli, "login", err) end
  cli.err("lash mcp login: authorized for ", pos[1], auth.file and ("; the tokens are kept in " .. auth.file
    .. " (mode 0600)") or "", "\n")
  return 0
end

local function cmd_logout(args, cli)
  local o, pos = parse(cli, args, {})
  if #pos ~= 1 then cli.usage_error("give one URL: lash mcp logout URL") end
  local auth = oauth_for(cli, o, pos[1])
  local f = auth.file and io.open(auth.file)
  if f then f:close() end
  auth:forget()
  cli.err("lash mcp logout: ", f and "forgot the tokens of " or "no tokens kept for ", pos[1], "\n")
  return 0
end

local function cmd_tools(args, cli)
  local o, pos, rest = parse(cli, args, CLIENT_OPTS)
  local def = server_def(cli, o, rest, pos)
  if #pos > 0 then cli.usage_error("unexpected argument '" .. pos[1] .. "' (the server's command goes after --)") end
  local json = require "lash.json"
  local ok, c = pcall(connect, def, o)
  if not ok then return fail(cli, "tools", c) end
  local ok2, tools = pcall(c.list_tools, c)
  c:close()
  if not ok2 then return fail(cli, "tools", tools) end
  if o.json then
    for _, t in ipairs(tools) do cli.out(json.encode_canonical(t), "\n") end
    return 0
  end
  for _, t in ipairs(tools) do
    local desc = tostring(t.description or t.title or ""):gsub("%s+", " ")
    cli.out(t.name, desc ~= "" and ("  " .. desc) or "", "\n")
  end
  return 0
end

local function cmd_call(args, cli)
  local o, pos, rest = parse(cli, args, CLIENT_OPTS)
  local def = server_def(cli, o, rest, pos)
  local name, raw = pos[1], pos[2]
  if not name then cli.usage_error("missing the tool's name") end
  if #pos > 2 then cli.usage_error("too many arguments: quote the JSON arguments") end
  if o.timeout and not (tonumber(o.timeout) and tonumber(o.timeout) > 0) then
    cli.usage_error("--timeout needs a positive number of seconds, got '" .. o.timeout .. "'")
  end
  local json = require "lash.json"
  local targs = {}
  if raw then
    local v, err = json.try_decode(raw)
    if type(v) ~= "table" or json.is_array(v) or v[1] ~= nil then
      cli.usage_error("the arguments must be a JSON object, e.g. '{\"message\": \"hi\"}'"
        .. (err and (": " .. err) or ""))
    end
    targs = v
  end
  local mcp = require "lash.mcp"
  local ok, c = pcall(connect, def, o)
  if not ok then return fail(cli, "call", c) end
  local ok2, res = pcall(c.call_tool, c, name, targs, { timeout = o.timeout and tonumber(o.timeout) or nil })
  c:close()
  if not ok2 then return fail(cli, "call", res) end
  if o.json then
    cli.out(json.encode_canonical(res), "\n")
  else
    local text = mcp.result_text(res)
    cli.out(text, text:sub(-1) == "\n" and "" or "\n")
  end
  return res.isError == true and 1 or 0
end

local function cmd_serve(args, cli)
  local o, pos = parse(cli, args, { backend = "value", timeout = "value", workdir = "value", network = "value",
                                    rootfs = "value", image = "value", attach = "value", owner = "value",
                                    holder = "value", env = "env", http = "value", token = "value" })
  if #pos > 0 then cli.usage_error("unexpected argument '" .. pos[1] .. "'") end
  local opts = {}
  if o.backend then opts.backend = o.backend end
  if o.timeout then
    opts.sandbox_timeout = tonumber(o.timeout)
    if not opts.sandbox_timeout then cli.usage_error("--timeout needs seconds, got '" .. o.timeout .. "'") end
  end
  if o.workdir then opts.workdir = o.workdir end
  if o.network then opts.network = o.network end
  if o.rootfs then opts.rootfs = o.rootfs end
  if o.image then opts.image = o.image end
  if next(o.env) then opts.env = o.env end
  if o.owner and not o.attach then cli.usage_error("--owner only applies together with --attach") end
  if o.attach then
    if not o.owner then cli.usage_error("--attach needs --owner (the owner the sandbox was created with)") end
    opts.attach_to, opts.owner = o.attach, o.owner
  end
  if o.http then
    local port = math.tointeger(tonumber(o.http))
    if not port or port < 0 or port > 65535 then cli.usage_error("--http needs a port (0-65535), got '" .. o.http .. "'") end
    local hs = require "lash.mcp.http_server"
    local ok, srv = pcall(hs.new, { port = port, token = o.token or os.getenv("LASH_MCP_TOKEN"), capability = opts })
    if not ok then return fail(cli, "serve", srv) end
    cli.err("lash mcp serve: listening on http://127.0.0.1:", tostring(srv:port()), "/mcp\n")
    io.stderr:flush()
    local ok2, err = pcall(function() runtime.spawn(function() srv:serve() end):join() end)
    if not ok2 then return fail(cli, "serve", err) end
    return 0
  end
  if o.token then cli.usage_error("--token only applies together with --http") end
  local server = require "lash.mcp.server"
  local stdio = require "lash.mcp.stdio"
  local ok, s = pcall(server.session, stdio.stdio_self(), { capability = opts })
  if not ok then return fail(cli, "serve", s) end
  if o.holder then s.ctx.run.holder = o.holder end
  local ok2, err = pcall(function() runtime.spawn(function() s:serve() end):join() end)
  if not ok2 then return fail(cli, "serve", err) end
  return 0
end

function M.main(args, cli)
  local sub = args[1]
  local rest = table.move(args, 2, #args, 1, {})
  if sub == "tools" then return cmd_tools(rest, cli) end
  if sub == "call" then return cmd_call(rest, cli) end
  if sub == "serve" then return cmd_serve(rest, cli) end
  if sub == "login" then return cmd_login(rest, cli) end
  if sub == "logout" then return cmd_logout(rest, cli) end
  if sub == nil then cli.usage_error("missing the subcommand (tools, call, login, logout or serve)") end
  cli.usage_error("unknown subcommand '" .. sub .. "' (tools, call, login, logout or serve)")
end

return M
