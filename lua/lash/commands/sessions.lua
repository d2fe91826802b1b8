--- `lash sessions list|show|rm|rewind|fork|path`: the saved conversations (see
-- lash.sessions): what ran, with which spec and model, what was said, what
-- it cost and how it ended.
-- @module lash.commands.sessions
local M = {
  json_errors = true,  -- under --json a failure is one {"type":"exit",...} line on stdout
  summary = "list, show and remove saved conversations",
  usage = [[usage: lash sessions list [--json] [--limit N]
       lash sessions show ID [--json]
       lash sessions rm ID... [--json]
       lash sessions rm --older-than AGE [--json]   (AGE: 30d, 12h, 90m)
       lash sessions rewind ID --to N [--json]
       lash sessions fork ID --at N [--json]
       lash sessions path

Every `lash run` is saved (unless --no-save or LASH_NO_SAVE=1): its spec,
model, each message as it entered the history, token usage and outcome.
`lash run SPEC --continue PROMPT` continues the latest session and
`--resume ID` a given one. ID may be a unique prefix (4 characters or
more) of a session's id.

  list   the sessions, most recently updated first: id, when, status of
         the last run (complete, error, cancelled, approval_required,
         running, or interrupted when its process died mid-run), runs,
         messages, tokens in/out, model, first prompt
  show   one session: its runs and its messages (--json: all of it, the
         messages exactly as stored)
  rm     delete sessions with their runs and messages (and the workspace
         snapshots of a --durable session that no fork shares); --older-than
         AGE deletes every session not updated for AGE (not one still running)
  rewind keep messages 1..N (as show numbers them) and drop the rest, with
         the tool calls the ledger recorded after them; a session run
         --durable also goes back to message N's workspace: the next run
         continuing it starts its sandbox from those files; the snapshots
         of the later turns are removed (unless a fork shares them)
  fork   a new session holding messages 1..N of ID (and, if durable, that
         workspace); ID is untouched
  path   print where the database is

The database is $LASH_SESSIONS_DB, else $XDG_STATE_HOME/lash/sessions.db,
else ~/.local/state/lash/sessions.db (SQLite, WAL mode).]],
}

local function parse(args, cli)
  local o = { words = {} }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--json" then o.json = true
    elseif a == "--limit" then
      i = i + 1
      o.limit = math.tointeger(tonumber(args[i] or ""))
      if not o.limit or o.limit < 1 then cli.usage_error("--limit needs a positive integer") end
    elseif a == "--older-than" then
      i = i + 1
      local v = args[i] or ""
      local num, unit = v:match("^(%d+%.?%d*)([dhm]?)$")
      if not num then cli.usage_error("--older-than needs an age such as 30d, 12h or 90m, got '" .. v .. "'") end
      o.older_ms = math.floor(tonumber(num) * (({ d = 86400, h = 3600, m = 60 })[unit] or 86400) * 1000)
    elseif a == "--to" or a == "--at" then
      i = i + 1
      o.n = math.tointeger(tonumber(args[i] or ""))
      if not o.n or o.n < 0 then cli.usage_error(a .. " needs a message number (0 or more)") end
      o.n_flag = a
    elseif a:sub(1, 2) == "--" then cli.usage_error("unknown option '" .. a .. "'")
    else o.words[#o.words + 1] = a end
    i = i + 1
  end
  return o
end

local function when(ms)
  if not ms then return "-" end
  return os.date("%Y-%m-%d %H:%M:%S", ms // 1000)
end

local function one_line(s, max)
  s = tostring(s or ""):gsub("%s+", " ")
  if #s > max then s = s:sub(1, max - 3):gsub("[\128-\191]*$", ""):gsub("[\192-\255]$", "") .. "..." end
  return s
end

local function list(store, o, cli)
  local json = require "lash.json"
  local rows = store:list { limit = o.limit }
  if o.json then
    for _, r in ipairs(rows) do r.title = r.title or json.null; r.parent = r.parent or json.null end
    cli.out(json.encode_canonical(json.array(rows)), "\n")
    return 0
  end
  if #rows == 0 then
    cli.out("no saved sessions (", store.path, ")\n")
    return 0
  end
  cli.out(string.format("%-12s  %-19s  %-17s  %4s  %4s  %13s  %-22s  %s\n", "ID", "UPDATED", "STATUS",
                        "RUNS", "MSGS", "TOKENS IN/OUT", "MODEL", "TITLE"))
  for _, r in ipairs(rows) do
    cli.out(string.format("%-12s  %-19s  %-17s  %4d  %4d  %13s  %-22s  %s\n", r.id, when(r.updated_at),
                          r.status, r.runs, r.messages, r.input_tokens .. "/" .. r.output_tokens,
                          one_line(r.model or "-", 22), one_line(r.title or "", 60)))
  end
  return 0
end

-- A message as a few lines for a person.
local function render_message(m, json)
  local out = {}
  for _, p in ipairs(m.parts or {}) do
    if p.type == "text" then out[#out + 1] = p.text
    elseif p.type == "tool_call" then
      out[#out + 1] = string.format("-> %s(%s) [%s]", tostring(p.name),
                                    one_line(p.args_json or json.try_encode_canonical(p.args) or "", 200), tostring(p.id))
    elseif p.type == "tool_result" then
      out[#out + 1] = string.format("<- %s %s [%s]: %s", tostring(p.name), tostring(p.status), tostring(p.id),
                                    one_line(p.content, 200))
    elseif p.type == "thinking" or p.type == "reasoning" then
      out[#out + 1] = "(thinking) " .. one_line(p.text or "", 200)
    else
      out[#out + 1] = "(" .. tostring(p.type) .. (p.name and (" " .. p.name) or "") .. ")"
    end
  end
  return table.concat(out, "\n")
end

local function show(store, o, cli)
  local json = require "lash.json"
  local ref = o.words[2]
  if not ref or o.words[3] then cli.usage_error("show takes one session id") end
  local s, err = store:load(ref)
  if not s then return { kind = "error", message = err } end
  if o.json then
    s.runs = json.array(s.runs)
    s.messages = json.array(s.messages)
    cli.out(json.encode_canonical(s), "\n")
    return 0
  end
  local h = s.session
  cli.out(string.format("session %s (%s)%s\n", h.id, h.kind, h.parent and (" forked from " .. h.parent) or ""))
  cli.out(string.format("  spec: %s\n  agent: %s\n  model: %s\n  created: %s\n  updated: %s\n  status: %s\n",
                        tostring(h.spec or "-"), tostring(h.agent or "-"), tostring(h.model or "-"),
                        when(h.created_at), when(h.updated_at), tostring(h.status)))
  for _, r in ipairs(s.runs) do
    local u = r.usage or {}
    cli.out(string.format("  run %d: %s, %s%s, tokens %d in / %d out, %s\n", r.n, tostring(r.status),
      when(r.started_at), r.ended_at and string.format(" (%.1f s)", (r.ended_at - r.started_at) / 1000) or "",
      tonumber(u.input_tokens) or 0, tonumber(u.output_tokens) or 0, tostring(r.model or "-")))
    if r.error_message then cli.out("    ", tostring(r.error_kind), ": ", one_line(r.error_message, 300), "\n") end
    if r.partial then cli.out("    streamed before it stopped: ", one_line(r.partial, 300), "\n") end
  end
  cli.out("\n")
  for i, m in ipairs(s.messages) do
    cli.out(string.format("[%d] %s%s\n", i, tostring(m.role), m.model and (" (" .. m.model .. ")") or ""))
    local text = render_message(m, json)
    if text ~= "" then cli.out("  ", (text:gsub("\n", "\n  ")), "\n") end
  end
  return 0
end

local function rm(store, o, cli)
  local json = require "lash.json"
  if o.older_ms then
    if #o.words > 1 then cli.usage_error("rm takes session ids or --older-than, not both") end
    local removed, _, warning = require("lash.durable").prune(store, require("lash.sessions").now_ms() - o.older_ms)
    if warning then cli.err("lash sessions rm: warning: ", warning, "\n") end
    if o.json then cli.out(json.encode_canonical { removed = json.array(removed) }, "\n")
    else cli.out("removed ", #removed, " session(s)\n") end
    return 0
  end
  if #o.words < 2 then cli.usage_error("rm takes one or more session ids (or --older-than AGE)") end
  local removed, failed = {}, nil
  for i = 2, #o.words do
    local ok, id, _, warning = require("lash.durable").remove(store, o.words[i])
    if warning then cli.err("lash sessions rm: warning: ", warning, "\n") end
    if ok then removed[#removed + 1] = id
    else failed = failed or id end
  end
  if o.json then cli.out(json.encode_canonical { removed = json.array(removed) }, "\n")
  else for _, id in ipairs(removed) do cli.out("removed ", id, "\n") end end
  if failed then return { kind = "error", message = failed } end
  return 0
end

-- rewind / fork: conversation and workspace together (lash.durable)
local function moved(what, flag)
  return function(store, o, cli)
    local json = require "lash.json"
    if #o.words ~= 2 then cli.usage_error(what .. " takes one session id") end
    if o.n_flag ~= flag then
      cli.usage_error(what .. " needs " .. flag .. " N (a message number, as show numbers them)")
    end
    local durable = require "lash.durable"
    local res, err = durable[what](store, o.words[2], o.n)
    if not res then return { kind = "usage", message = err } end
    if res.warning then cli.err("lash sessions ", what, ": warning: ", res.warning, "\n") end
    if o.json then
      cli.out(json.encode_canonical(res), "\n")
    elseif what == "rewind" then
      cli.out(string.format("session %s rewound to message %d (%d removed)%s\n", res.id, o.n, res.removed,
        res.snapshot and ("; its next run starts from workspace " .. res.snapshot) or ""))
    else
      cli.out(string.format("session %s forked from %s at message %d%s\n", res.id, res.parent, o.n,
        res.snapshot and ("; its first run starts from workspace " .. res.snapshot) or ""))
    end
    return 0
  end
end

function M.main(args, cli)
  local o = parse(args, cli)
  local sub = o.words[1]
  local sessions = require "lash.sessions"
  if sub == "path" then
    local p, why = sessions.path()
    cli.out(p, why ~= "default" and ("  (" .. why .. ")") or "", "\n")
    return 0
  end
  local fn = ({ list = list, show = show, rm = rm,
                rewind = moved("rewind", "--to"), fork = moved("fork", "--at") })[sub]
  if not fn then
    cli.usage_error(sub and ("unknown subcommand '" .. sub .. "' (list, show, rm, rewind, fork, path)")
                    or "missing the subcommand (list, show, rm, rewind, fork, path)")
  end
  local store = sessions.open()
  local ok, res = pcall(fn, store, o, cli)
  store:close()
  if not ok then error(res, 0) end
  return res
end

return M
