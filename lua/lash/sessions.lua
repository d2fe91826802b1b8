--- Saved conversations: one SQLite file (`$LASH_SESSIONS_DB`, else
-- `$XDG_STATE_HOME/lash/sessions.db`, i.e. `~/.local/state/lash/sessions.db`)
-- holding every session lash ran, its runs and its messages.
--
-- A **session** is one conversation: a spec, the messages so far, and the
-- runs (turns) that added them. Each message is committed on its own the
-- moment it enters the history, so a process killed mid-turn loses nothing
-- already said. The file is in WAL mode with a busy timeout: many lash
-- processes may write at once. When two runs continue the same session at
-- the same time, the one that writes second moves to a new session (a fork
-- holding the shared history), so neither history is interleaved with the
-- other and nothing is lost. A session's `updated_at` moves when a run
-- begins and when it ends (not with each of its messages: that would double
-- what each message's commit writes), so a run killed midway leaves it at
-- the run's start.
--
-- The schema is versioned with `PRAGMA user_version` and migrated forward
-- in one transaction; a database from a newer lash is refused, never
-- written to. Failures raise typed errors (`kind = "store"`, `code` =
-- SQLite's result name) whose message names the file and what to do.
--
--   local sessions = require "lash.sessions"
--   local store = sessions.open()                  -- or sessions.open(path)
--   local s = store:start{ spec = "a.lua", agent = "coder", model = "test", kind = "run" }
--   s:begin{ prompt = "hi", model = "test" }      -- a run (turn) starts
--   s:append(message)                            -- as each message enters the history
--   s:finish{ status = "complete", usage = {...} } -- the run ends
--   s:set_partial(text)                          -- what the unfinished turn streamed so far
--   local again = store:resume(s.id)             -- again.history: the stored messages,
--                                                -- again.partial: text of a turn cut short
--   s:set_title("name")                          -- e.g. a chat's /save
--   store:list(), store:load(id), store:remove(id), store:close()
-- @module lash.sessions
local json = require "lash.json"

local M = {}

--- The schema version this lash writes.
M.SCHEMA_VERSION = 3

-- Migrations: MIGRATIONS[v] takes a database at version v - 1 to v.
local MIGRATIONS = {
  [1] = [[
    CREATE TABLE sessions (
      id         TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,        -- Unix time, milliseconds
      updated_at INTEGER NOT NULL,
      kind       TEXT NOT NULL,           -- run | chat
      spec       TEXT,                    -- the spec file, as given
      agent      TEXT,
      model      TEXT,                    -- of the last run
      title      TEXT,                    -- the first prompt, cut short
      parent     TEXT,                    -- forked from this session
      status     TEXT NOT NULL            -- of the last run
    );
    CREATE INDEX sessions_by_update ON sessions (updated_at);
    CREATE TABLE runs (
      session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      n             INTEGER NOT NULL,     -- 1, 2, ... within the session
      started_at    INTEGER NOT NULL,
      ended_at      INTEGER,
      model         TEXT,
      prompt        TEXT,
      pid           INTEGER,              -- of the lash process while running
      status        TEXT NOT NULL,        -- running | complete | error | cancelled | ...
      stop_reason   TEXT,
      error_kind    TEXT,
      error_message TEXT,
      usage         TEXT,                 -- JSON: the run's token usage
      PRIMARY KEY (session_id, n)
    );
    CREATE TABLE messages (
      session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      seq        INTEGER NOT NULL,        -- 1, 2, ... the history's order
      run        INTEGER,                 -- the run that added it
      created_at INTEGER NOT NULL,
      role       TEXT NOT NULL,
      body       TEXT NOT NULL,           -- the message, JSON
      PRIMARY KEY (session_id, seq)
    );
  ]],
  -- the text a model turn has streamed so far, before the turn enters the
  -- history (a run killed mid-stream keeps what it showed)
  [2] = [[
    ALTER TABLE runs ADD COLUMN partial TEXT;
  ]],
  -- durable turns (lash.durable): the ledger of tool side effects, and the
  -- workspace recorded with the conversation
  [3] = [[
    CREATE TABLE tool_calls (
      session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      msg_seq    INTEGER NOT NULL,        -- the assistant message holding the call
      call_id    TEXT NOT NULL,
      run        INTEGER,
      name       TEXT NOT NULL,
      args       TEXT,                    -- JSON
      state      TEXT NOT NULL,           -- started | finished
      result     TEXT,                    -- JSON {status, content} once finished
      snapshot   TEXT,                    -- the workspace right after it finished (durable)
      started_at INTEGER NOT NULL,
      ended_at   INTEGER,
      PRIMARY KEY (session_id, msg_seq, call_id)
    );
    CREATE TABLE workspaces (
      session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      seq        INTEGER NOT NULL,        -- the workspace as it was after message seq
      snapshot   TEXT NOT NULL,
      backend    TEXT,
      sandbox    TEXT,                    -- the sandbox it was taken of
      created_at INTEGER NOT NULL
    );
    CREATE INDEX workspaces_by_session ON workspaces (session_id, seq);
  ]],
}

local runtime = require "lash.runtime"
local paths = require "lash.paths"

local function store_error(message, code, fields)
  fields = fields or {}
  fields.code = code
  return runtime.error("store", message, fields)
end

--- Where the sessions database is.
-- @treturn string path
-- @treturn string what chose it: "LASH_SESSIONS_DB", "XDG_STATE_HOME" or "default"
function M.path(getenv)
  return paths.user_file(getenv, "LASH_SESSIONS_DB", "state", "sessions.db")
end

local function now_ms()
  local s, ns = runtime.sys.time()
  return s * 1000 + ns // 1000000
end

local function new_id()
  return (runtime.sys.random(6):gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- What to tell the user for a failure code on `path`.
local function advice(path, code, msg)
  if code == "notadb" or code == "corrupt" then
    return string.format("the sessions database %s is damaged or not a SQLite database (%s); lash will not "
      .. "touch it: move it aside (mv %s %s.bad) and lash starts a new one, or run --no-save", path, msg, path, path)
  elseif code == "busy" or code == "locked" then
    return string.format("the sessions database %s stayed locked by another process past the busy timeout (%s); "
      .. "try again, or run --no-save", path, msg)
  elseif code == "readonly" or code == "perm" or code == "cantopen" then
    return string.format("cannot write the sessions database %s (%s); check its directory's permissions, "
      .. "point LASH_SESSIONS_DB elsewhere, or run --no-save", path, msg)
  elseif code == "full" then
    return string.format("the disk holding the sessions database %s is full (%s)", path, msg)
  end
  return string.format("the sessions database %s: %s (%s)", path, msg, code or "error")
end

---------------------------------------------------------------------------
-- Store

local Store = {}
Store.__index = Store
Store.__name = "lash.sessions.store"

-- Run fn(stmt) on a cached prepared statement.
function Store:_stmt(sql)
  local st = self.stmts[sql]
  if not st then
    local err, code
    st, err, code = self.db:prepare(sql)
    if not st then error(store_error(advice(self.path, code, err), code), 0) end
    self.stmts[sql] = st
  end
  return st
end

--- Run one statement with values; returns the rows (a list of tables).
function Store:query(sql, ...)
  local st = self:_stmt(sql)
  st:bind(...)
  local rows = {}
  while true do
    local row, err, code = st:step()
    if row == false then break end
    if not row then
      st:reset()
      error(store_error(advice(self.path, code, err), code), 0)
    end
    rows[#rows + 1] = row
  end
  return rows
end

local function exec(self, sql)
  local ok, err, code = self.db:exec(sql)
  if not ok then error(store_error(advice(self.path, code, err), code), 0) end
end

--- Run fn inside one write transaction (BEGIN IMMEDIATE: the write lock is
-- taken first, so concurrent writers wait on the busy timeout instead of
-- failing at commit). Returns what fn returns; on error rolls back and
-- raises again. BEGIN and COMMIT are prepared once, not parsed per call
-- (two transactions a tool step).
function Store:transaction(fn, ...)
  self:query("BEGIN IMMEDIATE")
  -- read under the write lock: no other connection can commit before ours,
  -- and ours does not move data_version, so this is also the file's
  -- version right after our commit (read after it, another's commit could
  -- slip in and be taken for known)
  self.locked_version = self:query("PRAGMA data_version")[1].data_version
  local res = table.pack(pcall(fn, ...))
  if not res[1] then
    self.db:exec("ROLLBACK")
    error(res[2], 0)
  end
  local ok, err = pcall(self.query, self, "COMMIT")
  if not ok then
    self.db:exec("ROLLBACK")
    error(err, 0)
  end
  self.commits = self.commits + 1
  self.committed = self.locked_version .. ":" .. self.commits
  return table.unpack(res, 2, res.n)
end

-- Inside a transaction: a token that changes whenever anything was
-- committed to the file, by this connection (our count) or by another
-- (SQLite's data_version, read when the write lock was taken).
function Store:_version()
  return self.locked_version .. ":" .. self.commits
end

local function user_version(self)
  return self:query("PRAGMA user_version")[1].user_version
end

function Store:_migrate()
  local v = user_version(self)
  if v == M.SCHEMA_VERSION then return end
  if v > M.SCHEMA_VERSION then
    error(store_error(string.format("the sessions database %s has schema version %d, newer than this lash "
      .. "(%s) knows (%d); upgrade lash, or point LASH_SESSIONS_DB at another file", self.path, v,
      runtime.version, M.SCHEMA_VERSION), "newer", { version = v }), 0)
  end
  self:transaction(function()
    -- another process may have migrated meanwhile
    local cur = user_version(self)
    for n = cur + 1, M.SCHEMA_VERSION do
      exec(self, MIGRATIONS[n])
      exec(self, "PRAGMA user_version = " .. n)
    end
  end)
end

--- Open the sessions database (created with its directories when missing).
-- @tparam[opt] string path default `sessions.path()`
-- @tparam[opt] table opts `busy_timeout` (ms; default $LASH_SESSIONS_BUSY_TIMEOUT, else 5000)
-- @return a store
-- @raise a `store` error naming the file and what to do
function M.open(path, opts)
  opts = opts or {}
  if not path then
    local why
    path, why = M.path()
    if not path then error(store_error("no place for the sessions database: " .. why, "cantopen"), 0) end
  end
  local dir = path:match("^(.*)/[^/]*$")
  if dir and dir ~= "" then
    local ok, err = runtime.sys.mkdirs(dir, 448) -- 0700: conversations are private
    -- the state directory may stay 0711 (a jail's uid reaches the sandboxes
    -- under it), never readable by others
    if ok then ok, err = runtime.sys.private(dir, "dir", 457) end -- 0711
    if not ok then error(store_error(advice(path, "cantopen", err), "cantopen"), 0) end
  end
  -- conversations are private whatever the umask: the database made 0600
  -- before SQLite opens it (its WAL and shared memory take its mode), an
  -- older, wider one tightened, a planted link or another user's file refused
  for i, f in ipairs { path, path .. "-wal", path .. "-shm" } do
    local ok, err = runtime.sys.private(f, i == 1 and "file" or "existing")
    if not ok then error(store_error(err, "cantopen"), 0) end
  end
  local busy = opts.busy_timeout or math.tointeger(tonumber(os.getenv("LASH_SESSIONS_BUSY_TIMEOUT") or ""))
  local db, err, code = runtime.sqlite.open(path, { busy_timeout = busy or 5000 })
  if not db then error(store_error(advice(path, code, err), code), 0) end
  local self = setmetatable({ db = db, path = path, stmts = {}, commits = 0 }, Store)
  local ok, merr = pcall(self._migrate, self)
  if not ok then
    self:close()
    error(merr, 0)
  end
  return self
end

--- Close the store (idempotent); its sessions can no longer write.
function Store:close()
  for _, st in pairs(self.stmts) do st:close() end
  self.stmts = {}
  self.db:close()
end
Store.__close = Store.close

local SESSION_COLS = "id, created_at, updated_at, kind, spec, agent, model, title, parent, status"

--- Find a session by id or unique id prefix (at least 4 characters).
-- @return the id, or nil, message
function Store:find(ref)
  if type(ref) ~= "string" or not ref:match("^[%x]+$") then
    return nil, "'" .. tostring(ref) .. "' is not a session id (see lash sessions list)"
  end
  local exact = self:query("SELECT id FROM sessions WHERE id = ?", ref)[1]
  if exact then return exact.id end
  if #ref < 4 then return nil, "no session " .. ref .. " (give at least 4 characters of an id)" end
  local rows = self:query("SELECT id FROM sessions WHERE substr(id, 1, ?) = ? LIMIT 2", #ref, ref:lower())
  if #rows == 0 then return nil, "no session " .. ref .. " (see lash sessions list)" end
  if #rows > 1 then return nil, "session id " .. ref .. " is ambiguous; give more of it" end
  return rows[1].id
end

--- The id of the session touched last (of `spec` when given), or nil.
function Store:latest(spec)
  local r
  if spec then
    r = self:query("SELECT id FROM sessions WHERE spec = ? ORDER BY updated_at DESC, rowid DESC LIMIT 1", spec)[1]
  else
    r = self:query("SELECT id FROM sessions ORDER BY updated_at DESC, rowid DESC LIMIT 1")[1]
  end
  return r and r.id
end

-- A run still marked running whose process is gone was interrupted.
local function effective_status(status, pid)
  if status == "running" and pid and not runtime.sys.alive(pid) then return "interrupted" end
  return status
end

--- The sessions, most recently updated first.
-- @tparam[opt] table opts `limit` (default 50)
-- @treturn table list of `{id, created_at, updated_at, kind, spec, agent, model, title,
--   parent, status, runs, messages, input_tokens, output_tokens}`
function Store:list(opts)
  opts = opts or {}
  local rows = self:query("SELECT " .. SESSION_COLS .. ", "
    .. "(SELECT COUNT(*) FROM runs r WHERE r.session_id = s.id) AS runs, "
    .. "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS messages, "
    .. "(SELECT pid FROM runs r WHERE r.session_id = s.id ORDER BY n DESC LIMIT 1) AS pid "
    .. "FROM sessions s ORDER BY updated_at DESC, rowid DESC LIMIT ?", opts.limit or 50)
  for _, r in ipairs(rows) do
    r.status = effective_status(r.status, r.pid)
    r.pid = nil
    local tin, tout = 0, 0
    for _, run in ipairs(self:query("SELECT usage FROM runs WHERE session_id = ?", r.id)) do
      local u = run.usage and json.try_decode(run.usage)
      if type(u) == "table" then
        tin = tin + (tonumber(u.input_tokens) or 0)
        tout = tout + (tonumber(u.output_tokens) or 0)
      end
    end
    r.input_tokens, r.output_tokens = tin, tout
  end
  return rows
end

local function decode_body(self, row)
  local m, err = json.try_decode(row.body)
  if type(m) ~= "table" then
    error(store_error(string.format("the sessions database %s: message %d of session %s is not valid JSON "
      .. "(%s)", self.path, row.seq, row.session_id, tostring(err)), "corrupt"), 0)
  end
  return m
end

--- A session in full: its row, its runs and its messages.
-- @tparam string ref id or unique prefix
-- @return `{session=, runs=, messages=}`, or nil, message
function Store:load(ref)
  local id, ferr = self:find(ref)
  if not id then return nil, ferr end
  local s = self:query("SELECT " .. SESSION_COLS .. " FROM sessions WHERE id = ?", id)[1]
  local runs = self:query("SELECT n, started_at, ended_at, model, prompt, pid, status, stop_reason, "
    .. "error_kind, error_message, usage, partial FROM runs WHERE session_id = ? ORDER BY n", id)
  for _, r in ipairs(runs) do
    r.status = effective_status(r.status, r.pid)
    r.usage = r.usage and json.try_decode(r.usage) or nil
  end
  if #runs > 0 then s.status = runs[#runs].status end
  local messages = {}
  for _, row in ipairs(self:query("SELECT session_id, seq, body FROM messages WHERE session_id = ? ORDER BY seq", id)) do
    messages[#messages + 1] = decode_body(self, row)
  end
  return { session = s, runs = runs, messages = messages }
end

--- Delete a session with its runs and messages.
-- @return true, or nil, message
function Store:remove(ref)
  local id, ferr = self:find(ref)
  if not id then return nil, ferr end
  self:transaction(function()
    self:query("DELETE FROM messages WHERE session_id = ?", id)
    self:query("DELETE FROM tool_calls WHERE session_id = ?", id)
    self:query("DELETE FROM workspaces WHERE session_id = ?", id)
    self:query("DELETE FROM runs WHERE session_id = ?", id)
    self:query("DELETE FROM sessions WHERE id = ?", id)
  end)
  return true, id
end

--- Delete every session not updated since `before_ms` (Unix ms) whose
-- last run is not still running in a live process.
-- @treturn table the ids removed
function Store:prune(before_ms)
  local ids = {}
  for _, r in ipairs(self:query("SELECT s.id, (SELECT pid FROM runs r WHERE r.session_id = s.id ORDER BY n DESC LIMIT 1) "
      .. "AS pid, s.status FROM sessions s WHERE s.updated_at < ? ORDER BY s.updated_at", before_ms)) do
    if effective_status(r.status, r.pid) ~= "running" then ids[#ids + 1] = r.id end
  end
  for _, id in ipairs(ids) do self:remove(id) end
  return ids
end

--- Now, in the store's unit (Unix milliseconds).
M.now_ms = now_ms

---------------------------------------------------------------------------
-- Session: the writer of one conversation

local Session = {}
Session.__index = Session
Session.__name = "lash.sessions.session"

local function title_of(prompt)
  if type(prompt) ~= "string" then return nil end
  local t = prompt:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if #t > 80 then t = t:sub(1, 77):gsub("[\128-\191]*$", ""):gsub("[\192-\255]$", "") .. "..." end
  return t
end

--- Start a new session.
-- @tparam table meta `kind` ("run" or "chat"), `spec`, `agent`, `model`, `title`
-- @return a session (no messages yet)
function Store:start(meta)
  meta = meta or {}
  local s = setmetatable({ store = self, history = {}, last_seq = 0, last_run = 0, base_run = 0 }, Session)
  local t = now_ms()
  self:transaction(function()
    for _ = 1, 8 do
      local id = new_id()
      if not self:query("SELECT 1 AS x FROM sessions WHERE id = ?", id)[1] then
        s.id = id
        break
      end
    end
    if not s.id then error(store_error("cannot pick a new session id", "error"), 0) end
    self:query("INSERT INTO sessions (id, created_at, updated_at, kind, spec, agent, model, title, status) "
      .. "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'new')", s.id, t, t, meta.kind or "run", meta.spec, meta.agent,
      meta.model, meta.title)
  end)
  return s
end

--- Open an existing session to continue it: `session.history` holds its
-- stored messages (pass them as the run's history).
-- @tparam string ref id or unique prefix
-- @return a session, or nil, message
function Store:resume(ref)
  local id, ferr = self:find(ref)
  if not id then return nil, ferr end
  local s = setmetatable({ store = self, id = id, history = {}, last_seq = 0 }, Session)
  local row = self:query("SELECT " .. SESSION_COLS .. " FROM sessions WHERE id = ?", id)[1]
  s.meta = row
  -- a run another live process is still writing is not history yet: take
  -- what came before it (and fork at begin, as the session moved on)
  local upto = math.maxinteger
  for _, r in ipairs(self:query("SELECT n, pid FROM runs WHERE session_id = ? AND status = 'running' ORDER BY n", id)) do
    if r.pid and r.pid ~= runtime.sys.getpid() and runtime.sys.alive(r.pid) then
      upto = r.n
      break
    end
  end
  for _, r in ipairs(self:query("SELECT session_id, seq, body FROM messages WHERE session_id = ? "
      .. "AND (run IS NULL OR run < ?) ORDER BY seq", id, upto)) do
    s.history[#s.history + 1] = decode_body(self, r)
    s.last_seq = r.seq
  end
  s.base_run = self:query("SELECT COALESCE(MAX(n), 0) AS n FROM runs WHERE session_id = ? AND n < ?", id, upto)[1].n
  local last = self:query("SELECT partial FROM runs WHERE session_id = ? AND n = ?", id, s.base_run)[1]
  if last and last.partial and last.partial ~= "" then s.partial = last.partial end
  return s
end

-- Another writer added to this session since we read it: carry on in a
-- new session holding the history as we knew it (and our run so far).
local function fork(self)
  local store, old = self.store, self.id
  local id
  repeat id = new_id() until not store:query("SELECT 1 AS x FROM sessions WHERE id = ?", id)[1]
  local t = now_ms()
  store:query("INSERT INTO sessions (id, created_at, updated_at, kind, spec, agent, model, title, parent, status) "
    .. "SELECT ?, ?, ?, kind, spec, agent, model, title, id, status FROM sessions WHERE id = ?", id, t, t, old)
  store:query("INSERT INTO runs (session_id, n, started_at, ended_at, model, prompt, pid, status, stop_reason, "
    .. "error_kind, error_message, usage) SELECT ?, n, started_at, ended_at, model, prompt, pid, status, stop_reason, "
    .. "error_kind, error_message, usage FROM runs WHERE session_id = ? AND n <= ?", id, old, self.base_run)
  store:query("INSERT INTO messages (session_id, seq, run, created_at, role, body) "
    .. "SELECT ?, seq, run, created_at, role, body FROM messages WHERE session_id = ? AND seq <= ?",
    id, old, self.last_seq)
  if self.run_n then
    -- our run row moves along; the old session keeps what we wrote there
    store:query("UPDATE runs SET session_id = ?, n = ? WHERE session_id = ? AND n = ?",
      id, self.base_run + 1, old, self.run_n)
    self.run_n = self.base_run + 1
  end
  self.id, self.forked_from = id, old
  return id
end

-- Under the write lock: has someone else written to this session? Asked
-- of the file only when anything at all was committed since this session
-- last looked (data_version), not before each of its messages.
local function check_fresh(self)
  local store = self.store
  local version = store:_version()
  if version == self.seen_version then return end
  local r = store:query("SELECT COALESCE(MAX(seq), 0) AS seq, "
    .. "(SELECT COALESCE(MAX(n), 0) FROM runs WHERE session_id = ?) AS n FROM messages WHERE session_id = ?",
    self.id, self.id)[1]
  local expect_run = self.run_n or self.base_run
  if r.seq ~= self.last_seq or r.n ~= expect_run then fork(self) end
end

-- After this session's own commit: what it wrote is what it knows (the
-- version taken under that commit's lock).
local function saw_own_commit(self)
  self.seen_version = self.store.committed
end

--- Begin a run (one turn) in this session.
-- @tparam table run `prompt`, `model`
function Session:begin(run)
  run = run or {}
  local store = self.store
  local t = now_ms()
  store:transaction(function()
    check_fresh(self)
    local n = self.base_run + 1
    store:query("INSERT INTO runs (session_id, n, started_at, model, prompt, pid, status) "
      .. "VALUES (?, ?, ?, ?, ?, ?, 'running')", self.id, n, t, run.model,
      type(run.prompt) == "string" and run.prompt or nil, runtime.sys.getpid())
    store:query("UPDATE sessions SET updated_at = ?, status = 'running', model = COALESCE(?, model), "
      .. "title = COALESCE(title, ?) WHERE id = ?", t, run.model, title_of(run.prompt), self.id)
    self.run_n = n
  end)
  saw_own_commit(self)
  return self.run_n
end

--- Commit one message of the history (call it as the message enters it).
-- Returns the session id (which changes if the session had to fork).
function Session:append(msg)
  local store = self.store
  local body = json.encode(msg)
  local t = now_ms()
  store:transaction(function()
    check_fresh(self)
    local seq = self.last_seq + 1
    store:query("INSERT INTO messages (session_id, seq, run, created_at, role, body) VALUES (?, ?, ?, ?, ?, ?)",
      self.id, seq, self.run_n, t, tostring(msg.role), body)
    if self.partial_set and self.run_n then
      -- the streamed text is now part of a message
      store:query("UPDATE runs SET partial = NULL WHERE session_id = ? AND n = ?", self.id, self.run_n)
      self.partial_set = nil
    end
    -- a message outside a run (none in lash's own use) moves the session;
    -- a run's messages do not (its begin and finish do): the row and its
    -- index are two of the four pages a message's commit would write
    if not self.run_n then store:query("UPDATE sessions SET updated_at = ? WHERE id = ?", t, self.id) end
    self.last_seq = seq
  end)
  saw_own_commit(self)
  self.history[#self.history + 1] = msg
  return self.id
end

--- Keep the text the model has streamed so far in this run's unfinished
-- turn ("" or nil forgets it); a message appended after it clears it.
function Session:set_partial(text)
  if not self.run_n then return end
  if text == "" then text = nil end
  if text == nil and not self.partial_set then return end
  local store = self.store
  store:transaction(function()
    store:query("UPDATE runs SET partial = ? WHERE session_id = ? AND n = ?", text, self.id, self.run_n)
  end)
  self.partial_set = text ~= nil
end

--- The message that carries a turn's streamed text into the history of
-- the run that continues it (`session.partial`, after resume).
function M.partial_message(text)
  return { role = "assistant", parts = { { type = "text", text = text } }, finish = "interrupted" }
end

--- What stands for the answer of a turn cut short before it said anything.
M.NO_ANSWER = "[no answer: the turn was interrupted]"

--- The answer a conversation cut short gets, so the next prompt does not
-- follow the user's unanswered prompt: what the turn had streamed
-- (`streamed`), or NO_ANSWER when it said nothing; nil when the history
-- does not end with a prompt (tool results answered as interrupted are the
-- model's to read next, as every provider takes them before a new prompt).
-- `lash chat` after Ctrl-C and `lash run --continue` both use it, so a
-- cancelled turn reads the same to the model either way.
-- @tparam table history
-- @tparam[opt] string streamed
-- @treturn table|nil the assistant message to append
function M.close_unanswered(history, streamed)
  local last = history[#history]
  if streamed and streamed ~= "" then
    if last and last.role == "assistant" then return nil end
    return M.partial_message(streamed)
  end
  if not last or last.role ~= "user" then return nil end
  for _, p in ipairs(last.parts or {}) do
    if p.type == "tool_result" then return nil end
  end
  return M.partial_message(M.NO_ANSWER)
end

--- End the current run with its outcome.
-- @tparam table o `status` (complete, error, cancelled, approval_required, ...),
--   `stop_reason`, `error_kind`, `error_message`, `usage` (table)
function Session:finish(o)
  o = o or {}
  if not self.run_n then return end
  local store = self.store
  local t = now_ms()
  local status = o.status or "complete"
  store:transaction(function()
    store:query("UPDATE runs SET ended_at = ?, status = ?, stop_reason = ?, error_kind = ?, error_message = ?, "
      .. "usage = ? WHERE session_id = ? AND n = ?", t, status, o.stop_reason, o.error_kind,
      o.error_message and tostring(o.error_message) or nil, o.usage and json.encode_canonical(o.usage) or nil,
      self.id, self.run_n)
    store:query("UPDATE sessions SET updated_at = ?, status = ? WHERE id = ?", t, status, self.id)
  end)
  self.base_run = self.run_n
  self.run_n = nil
end

--- Name the session (shown by `lash sessions list`; e.g. chat's /save).
function Session:set_title(title)
  local t = now_ms()
  self.store:transaction(function()
    self.store:query("UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?", title_of(title), t, self.id)
  end)
end

--- Like append, but never raises: a message that cannot be written now
-- (the file locked past the timeout, the disk full) is kept and written
-- before the next one, or by finish. Returns true, or false, error.
local function flush(self)
  local pending = self.pending or {}
  while #pending > 0 do
    local ok, err = pcall(self.append, self, pending[1])
    if not ok then return false, err end
    table.remove(pending, 1)
  end
  return true
end

function Session:record(msg)
  self.pending = self.pending or {}
  self.pending[#self.pending + 1] = msg
  return flush(self)
end

--- Like finish, after writing what record kept; never raises. Returns
-- true, or false, error (the messages still unwritten are counted in
-- `session.pending`).
function Session:close_run(o)
  local ok, err = flush(self)
  if not ok then return false, err end
  ok, err = pcall(self.finish, self, o)
  if not ok then return false, err end
  return true
end

--- The messages at the end of a history that are tool calls without
-- results (a run stopped for approval, or was killed while its tools ran).
-- @return the list of call parts (empty when none)
function M.dangling_calls(history)
  local last = history[#history]
  local calls = {}
  if not (last and last.role == "assistant") then return calls end
  for _, p in ipairs(last.parts or {}) do
    if p.type == "tool_call" then calls[#calls + 1] = p end
  end
  return calls
end

--- The message that closes dangling calls when the user moves on with a
-- new prompt: each call is answered as not having finished.
function M.interrupted_results(calls)
  local parts = {}
  for i, c in ipairs(calls) do
    parts[i] = { type = "tool_result", id = c.id, name = c.name, status = "retry",
                 content = "This call did not finish: the run stopped (it was interrupted or awaited "
                   .. "approval) before it returned. Its effects, if any, are unknown; call it again if "
                   .. "it is still needed." }
  end
  return { role = "user", parts = parts }
end

return M
