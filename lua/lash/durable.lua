--- lash.durable: turns that are transactions. A saved session keeps, next
-- to its messages (lash.sessions), two more records in the same SQLite
-- file:
--
-- * **the ledger of tool side effects**: each call is written as
--   `started` before its handler runs and `finished`, with its result,
--   after. A run that continues the session (`--resume`) never runs a
--   finished call again: its recorded result answers the model. A call that
--   started and never finished (the process was killed while it ran) runs
--   again, after the workspace went back to where it was before the call;
--   a tool marked `idempotent = false` is not run again without asking: the
--   call goes through the approval machinery (`--yes`, the terminal's
--   question, an embedder's `approve`), saying that it may already have
--   had its effects.
-- * **the workspace** (durable runs, `lash run --durable`): right after a
--   call finished, and before its `finished` row is committed, the run's
--   sandbox is snapshotted; the snapshot's id is committed with the result.
--   The calls of a turn run one at a time, so each snapshot holds exactly
--   the calls finished before it. A run that continues the session starts
--   its sandbox from the latest recorded snapshot; a rewind to message N
--   keeps the snapshots taken before message N's calls, so the next run's
--   sandbox holds that turn's files.
--
-- The order makes a kill at any point safe: killed before `started` is
-- committed, nothing ran; between `started` and `finished`, the call runs
-- again on a workspace that never saw it (durable) or is asked about
-- (idempotent = false); after `finished`, its result is replayed. A
-- snapshot taken but not yet committed is an orphan (it names no state of
-- the session) and is never restored.
--
--   local durable = require "lash.durable"
--   local ledger = durable.ledger(session, { workspace = true })
--   agent:run(prompt, { history = session.history, on_message = ..., ledger = ledger })
--   durable.workspace_of(store, session_id)   -- the snapshot a resumed run starts from
--   durable.rewind(store, session_id, n)      -- conversation and workspace back to message n
--   durable.fork(store, session_id, n)        -- a new session holding messages 1..n and that workspace
-- @module lash.durable
local json = require "lash.json"
local runtime = require "lash.runtime"
local sessions = require "lash.sessions"

local M = {}

local Ledger = {}
Ledger.__index = Ledger
Ledger.__name = "lash.durable.ledger"

--- A ledger over a saved session (a `lash.sessions` session).
-- @tparam table session the run's session (begun)
-- @tparam[opt] table opts `workspace` (boolean: snapshot the run's sandbox
--   after each finished call), `on_snapshot` (function(seconds, id): told
--   what each snapshot cost), `on_warning` (function(err))
-- @return a ledger, for `agent:run`'s `ledger` option
--
-- A durable ledger is strict: a call that cannot be recorded (the file
-- locked past the busy timeout, its disk full or read-only) is not run, and
-- the run stops with the store's error, so nothing runs that a resume could
-- not account for. Without `workspace` the ledger is best effort, as the
-- saving of messages is: a failed write is a warning (`on_warning`, once),
-- the run goes on, and a resume runs such a call again.
function M.ledger(session, opts)
  opts = opts or {}
  if type(session) ~= "table" or type(session.store) ~= "table" then
    error("lash.durable.ledger: needs a saved session (lash.sessions store:start or store:resume)", 2)
  end
  local self = setmetatable({ session = session, workspace = opts.workspace and true or false,
                              sequential = opts.workspace and true or false, on_snapshot = opts.on_snapshot,
                              on_warning = opts.on_warning, snapshots = 0, snapshot_seconds = 0 }, Ledger)
  if not self.workspace then
    -- best effort: each operation warns (once) instead of raising
    for _, name in ipairs { "recorded", "start", "finish" } do
      local strict = Ledger[name]
      self[name] = function(me, ...)
        local res = table.pack(pcall(strict, me, ...))
        if res[1] then return table.unpack(res, 2, res.n) end
        if runtime.is_error(res[2], "cancelled") then error(res[2], 0) end
        if not me.warned then
          me.warned = true
          if me.on_warning then pcall(me.on_warning, res[2]) end
        end
        return nil
      end
    end
  end
  return self
end

--- Is v a ledger?
function M.is_ledger(v)
  return getmetatable(v) == Ledger
end

-- The message the calls being run belong to: the last one committed. A
-- message still waiting to be written (the file was locked or full) is
-- written first; if it cannot be, no call may run (it could not be
-- recorded as started), and the run stops with the store's error.
function Ledger:_seq()
  local s = self.session
  while s.pending and #s.pending > 0 do
    local ok, err = pcall(s.append, s, s.pending[1])
    if not ok then error(err, 0) end
    table.remove(s.pending, 1)
  end
  return s.last_seq
end

local function row(self, seq, id)
  local s = self.session
  return s.store:query("SELECT state, result, name FROM tool_calls WHERE session_id = ? AND msg_seq = ? "
    .. "AND call_id = ?", s.id, seq, id)[1]
end

--- What the ledger holds for a call of the current turn: nil (never
-- started), `{state = "started"}`, or `{state = "finished", status =,
-- content =}`.
function Ledger:recorded(call)
  local r = row(self, self:_seq(), tostring(call.id))
  if not r then return nil end
  if r.state ~= "finished" then return { state = r.state } end
  local res = json.try_decode(r.result or "")
  if type(res) ~= "table" or type(res.content) ~= "string" then
    error(runtime.error("store", string.format("the sessions database %s: the recorded result of call %s "
      .. "(%s) in session %s is damaged; rewind the session before that turn (lash sessions rewind)",
      self.session.store.path, tostring(call.id), tostring(r.name), self.session.id), { code = "corrupt" }), 0)
  end
  return { state = "finished", status = res.status or "ok", content = res.content }
end

-- Snapshot the run's sandbox (nil when the run has none); returns the id,
-- the backend and the sandbox's id.
local function snapshot(self, ctx)
  local sb = ctx and ctx.sandbox and ctx.sandbox()
  if not sb then return nil end
  local t0 = runtime.now()
  local id = sb:snapshot()
  local dt = runtime.now() - t0
  self.snapshots = self.snapshots + 1
  self.snapshot_seconds = self.snapshot_seconds + dt
  if self.on_snapshot then pcall(self.on_snapshot, dt, id) end
  return id, sb.backend, sb.id
end

local function add_workspace(self, seq, snap, backend, sbid)
  local s = self.session
  s.store:query("INSERT INTO workspaces (session_id, seq, snapshot, backend, sandbox, created_at) "
    .. "VALUES (?, ?, ?, ?, ?, ?)", s.id, seq, snap, backend, sbid, sessions.now_ms())
end

--- A call is about to run: committed before its handler starts. In a
-- durable run, the first call of a session records the workspace it
-- starts from first (what a rewind before it goes back to).
function Ledger:start(call, args, ctx)
  local s = self.session
  local seq = self:_seq()
  if self.workspace and not self.based then
    self.based = true
    local has = s.store:query("SELECT 1 AS x FROM workspaces WHERE session_id = ? LIMIT 1", s.id)[1]
    if not has then
      local snap, backend, sbid = snapshot(self, ctx)
      if snap then
        s.store:transaction(function() add_workspace(self, seq - 1, snap, backend, sbid) end)
      end
    end
  end
  s.store:transaction(function()
    s.store:query("INSERT OR REPLACE INTO tool_calls (session_id, msg_seq, call_id, run, name, args, state, "
      .. "started_at) VALUES (?, ?, ?, ?, ?, ?, 'started', ?)", s.id, seq, tostring(call.id), s.run_n,
      tostring(call.name), json.try_encode(args) or nil, sessions.now_ms())
  end)
end

--- A call returned `res` ({status, content}): in a durable run the
-- workspace is snapshotted, then result and snapshot are committed together.
function Ledger:finish(call, res, ctx)
  local s = self.session
  local seq = self:_seq()
  local snap, backend, sbid
  if self.workspace then snap, backend, sbid = snapshot(self, ctx) end
  s.store:transaction(function()
    s.store:query("UPDATE tool_calls SET state = 'finished', result = ?, snapshot = ?, ended_at = ? "
      .. "WHERE session_id = ? AND msg_seq = ? AND call_id = ?",
      json.encode_canonical { status = res.status, content = res.content }, snap, sessions.now_ms(),
      s.id, seq, tostring(call.id))
    if snap then add_workspace(self, seq, snap, backend, sbid) end
  end)
end

---------------------------------------------------------------------------
-- Sessions' workspaces

--- What `lash run` runs with: whether the run is durable (asked for, or
-- the session it continues was), and the agent whose sandbox starts from
-- the continued session's last workspace.
-- @tparam table agent
-- @tparam[opt] table session the continued session (nil: a new one)
-- @tparam table o `durable` (--durable), `save` (the run is saved), `attach` (--attach)
-- @return agent, durable (boolean); or nil, nil, message
function M.for_run(agent, session, o)
  local durable = o.durable or (session ~= nil and M.is_durable(session.store, session.id))
  if not durable then return agent, false end
  if not o.save then
    return nil, nil, "--durable records the workspace with the saved session; it cannot be combined with --no-save "
      .. "(or LASH_NO_SAVE)"
  end
  if o.attach then
    return nil, nil, "--durable cannot yet work with --attach: restoring the workspace of the last committed turn "
      .. "into an existing sandbox is not built; run durable with a sandbox the run creates"
  end
  if not session then return agent, true end
  local snap = M.workspace_of(session.store, session.id)
  if not snap then return agent, true end
  M.reclaim(session.store, session.id)
  local copy, err = require("lash.cli.agents").from_snapshot_agent(agent, snap)
  if not copy then return nil, nil, err end
  return copy, true
end

--- The snapshot a run continuing the session starts its sandbox from (the
-- latest one recorded), or nil when the session recorded none.
-- @treturn[1] string snapshot id
-- @treturn[1] string backend
function M.workspace_of(store, id)
  local r = store:query("SELECT snapshot, backend FROM workspaces WHERE session_id = ? ORDER BY rowid DESC LIMIT 1",
    id)[1]
  if not r then return nil end
  return r.snapshot, r.backend
end

--- Destroy the sandbox a killed run of the session left behind (the one
-- its last workspace was taken of): a run continuing the session starts a
-- new one from the snapshot. Nothing is done while a live process runs the
-- session; a sandbox already gone is fine.
function M.reclaim(store, id)
  local live
  for _, r in ipairs(store:query("SELECT pid FROM runs WHERE session_id = ? AND status = 'running'", id)) do
    if r.pid and r.pid ~= runtime.sys.getpid() and runtime.sys.alive(r.pid) then live = true end
  end
  if live then return end
  local r = store:query("SELECT sandbox, backend FROM workspaces WHERE session_id = ? ORDER BY rowid DESC LIMIT 1",
    id)[1]
  if not (r and r.sandbox) then return end
  local ok, sb = pcall(runtime.sandbox.open, r.sandbox, { backend = r.backend })
  if ok and sb then
    pcall(sb.destroy, sb)
    pcall(sb.close, sb)
  end
end

--- Does the session record its workspace (was it run durable)?
function M.is_durable(store, id)
  return store:query("SELECT 1 AS x FROM workspaces WHERE session_id = ? LIMIT 1", id)[1] ~= nil
end

local function message_count(store, id)
  return store:query("SELECT COALESCE(MAX(seq), 0) AS n FROM messages WHERE session_id = ?", id)[1].n
end

local function check_n(store, id, n, what)
  local count = message_count(store, id)
  if math.type(n) ~= "integer" or n < 0 or n > count then
    return nil, string.format("%s: N must be a message number from 0 to %d (lash sessions show %s numbers them), "
      .. "got %s", what, count, id, tostring(n))
  end
  return count
end

local function live_run(store, id)
  for _, r in ipairs(store:query("SELECT n, pid FROM runs WHERE session_id = ? AND status = 'running'", id)) do
    if r.pid and r.pid ~= runtime.sys.getpid() and runtime.sys.alive(r.pid) then return r.n, r.pid end
  end
end

-- The snapshots (with their backends) of the workspaces rows that `where`
-- selects (an SQL condition on workspaces, with its values).
local function snapshots_where(store, where, ...)
  return store:query("SELECT DISTINCT snapshot, backend FROM workspaces WHERE " .. where, ...)
end

--- Drop each of the snapshots (`{snapshot =, backend =}` rows) that no
-- session records any more: a rewind or removal made them unreachable, and
-- a fork may still share one. A backend that cannot drop snapshots (modal:
-- its images are the platform's) keeps them silently; another failure is
-- a warning, never an error (the session's records are already right).
-- @treturn int how many were dropped
-- @treturn[opt] string the first failure
function M.drop_unreferenced(store, snaps)
  local dropped, failure, done = 0, nil, {}
  for _, r in ipairs(snaps) do
    if not done[r.snapshot] then
      done[r.snapshot] = true
      if not store:query("SELECT 1 AS x FROM workspaces WHERE snapshot = ? LIMIT 1", r.snapshot)[1] then
        local ok, err = pcall(runtime.sandbox.drop_snapshot, r.snapshot, { backend = r.backend })
        if ok then dropped = dropped + 1
        elseif not (runtime.is_error(err) and err.code == "unsupported") then
          failure = failure or string.format("could not remove snapshot %s: %s", r.snapshot,
            runtime.is_error(err) and err.message or tostring(err))
        end
      end
    end
  end
  return dropped, failure
end

--- Remove a session (lash.sessions store:remove) and drop the workspace
-- snapshots only it recorded.
-- @return true, id, dropped, failure; or nil, message
function M.remove(store, ref)
  local id = store:find(ref)
  local snaps = id and snapshots_where(store, "session_id = ?", id) or {}
  local ok, rid = store:remove(ref)
  if not ok then return nil, rid end
  return true, rid, M.drop_unreferenced(store, snaps)
end

--- Remove the sessions not updated since before_ms (store:prune) and drop
-- the snapshots only they recorded.
-- @return the removed ids, dropped, failure
function M.prune(store, before_ms)
  local snaps = store:query("SELECT DISTINCT w.snapshot, w.backend FROM workspaces w JOIN sessions s "
    .. "ON s.id = w.session_id WHERE s.updated_at < ?", before_ms)
  local removed = store:prune(before_ms)
  return removed, M.drop_unreferenced(store, snaps)
end

--- Rewind a session to message n: the messages after it go, with the
-- ledger rows and workspace snapshots of calls made after it; the next
-- run that continues the session starts from message n's workspace.
-- Refused while a live process is running the session.
-- The snapshots of the workspaces dropped (no other session, e.g. a
-- fork, recording them) are removed from the backend.
-- @return `{removed = messages removed, snapshot = the workspace now current or nil, dropped = snapshots
--   removed, warning = a failure to remove one or nil}`, or nil, message
function M.rewind(store, ref, n)
  local id, ferr = store:find(ref)
  if not id then return nil, ferr end
  local _, cerr = check_n(store, id, n, "rewind")
  if cerr then return nil, cerr end
  local _, pid = live_run(store, id)
  if pid then
    return nil, string.format("session %s is being run by process %d; stop it first", id, pid)
  end
  local removed
  local gone = snapshots_where(store, "session_id = ? AND seq >= ?", id, n)
  store:transaction(function()
    removed = store:query("SELECT COUNT(*) AS c FROM messages WHERE session_id = ? AND seq > ?", id, n)[1].c
    local last_run = store:query("SELECT COALESCE(MAX(run), 0) AS r FROM messages WHERE session_id = ? AND seq <= ?",
      id, n)[1].r
    store:query("DELETE FROM messages WHERE session_id = ? AND seq > ?", id, n)
    -- a call of message n itself has no result in the history now: it runs again
    store:query("DELETE FROM tool_calls WHERE session_id = ? AND msg_seq >= ?", id, n)
    store:query("DELETE FROM workspaces WHERE session_id = ? AND seq >= ?", id, n)
    store:query("DELETE FROM runs WHERE session_id = ? AND n > ?", id, last_run)
    store:query("UPDATE runs SET partial = NULL WHERE session_id = ?", id)
    store:query("UPDATE sessions SET updated_at = ?, status = 'rewound' WHERE id = ?", sessions.now_ms(), id)
  end)
  -- after the commit: a kill in between leaves an unreachable snapshot, never a
  -- recorded workspace without its files
  local dropped, failure = M.drop_unreferenced(store, gone)
  return { id = id, removed = removed, snapshot = (M.workspace_of(store, id)), dropped = dropped,
           warning = failure }
end

--- A new session holding messages 1..n of session ref (and the ledger and
-- workspace up to them): continuing it starts a new sandbox from that
-- turn's files; the original is untouched.
-- @return `{id = the new session, parent =, snapshot =}`, or nil, message
function M.fork(store, ref, n)
  local old, ferr = store:find(ref)
  if not old then return nil, ferr end
  local _, cerr = check_n(store, old, n, "fork")
  if cerr then return nil, cerr end
  local id
  store:transaction(function()
    repeat
      id = (runtime.sys.random(6):gsub(".", function(c) return string.format("%02x", c:byte()) end))
    until not store:query("SELECT 1 AS x FROM sessions WHERE id = ?", id)[1]
    local t = sessions.now_ms()
    local last_run = store:query("SELECT COALESCE(MAX(run), 0) AS r FROM messages WHERE session_id = ? AND seq <= ?",
      old, n)[1].r
    store:query("INSERT INTO sessions (id, created_at, updated_at, kind, spec, agent, model, title, parent, status) "
      .. "SELECT ?, ?, ?, kind, spec, agent, model, title, id, 'forked' FROM sessions WHERE id = ?", id, t, t, old)
    store:query("INSERT INTO runs (session_id, n, started_at, ended_at, model, prompt, pid, status, stop_reason, "
      .. "error_kind, error_message, usage) SELECT ?, n, started_at, ended_at, model, prompt, NULL, "
      .. "CASE status WHEN 'running' THEN 'interrupted' ELSE status END, stop_reason, error_kind, error_message, "
      .. "usage FROM runs WHERE session_id = ? AND n <= ?", id, old, last_run)
    store:query("INSERT INTO messages (session_id, seq, run, created_at, role, body) "
      .. "SELECT ?, seq, run, created_at, role, body FROM messages WHERE session_id = ? AND seq <= ?", id, old, n)
    store:query("INSERT INTO tool_calls (session_id, msg_seq, call_id, run, name, args, state, result, snapshot, "
      .. "started_at, ended_at) SELECT ?, msg_seq, call_id, run, name, args, state, result, snapshot, started_at, "
      .. "ended_at FROM tool_calls WHERE session_id = ? AND msg_seq < ?", id, old, n)
    -- snapshots are never changed once taken: both sessions may start from one
    store:query("INSERT INTO workspaces (session_id, seq, snapshot, backend, sandbox, created_at) "
      .. "SELECT ?, seq, snapshot, backend, sandbox, created_at FROM workspaces WHERE session_id = ? AND seq < ? "
      .. "ORDER BY rowid", id, old, n)
  end)
  return { id = id, parent = old, snapshot = (M.workspace_of(store, id)) }
end

return M
