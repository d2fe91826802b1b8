-- lash.sqlite (the binding) and lash.sessions (the store): handles that
-- close once and raise after; the schema version; a message that meets a
-- locked file kept and written once the lock goes; a session opened by
-- another writer meanwhile forks instead of interleaving.
local lash = require "lash"
local sessions = require "lash.sessions"

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(lash.sys.mkdirs(p))
  return p
end

describe("lash.sqlite", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("binds and reads back every type, and reports failures as nil, message, code", function()
    local db = assert(lash.sqlite.open(dir .. "/a.db"))
    assert(db:exec("CREATE TABLE t (a, b, c, d)"))
    local ins = assert(db:prepare("INSERT INTO t VALUES (?, ?, ?, ?)"))
    assert.is_false(ins:bind(42, 2.5, "x\0y", nil):step())
    assert.equal(1, db:changes())
    local row = assert(db:prepare("SELECT * FROM t")):step()
    assert.same({ a = 42, b = 2.5, c = "x\0y" }, row)
    assert.equal("integer", math.type(row.a))
    local st, msg, code = db:prepare("SELECT * FROM missing")
    assert.is_nil(st)
    assert.matches("no such table", msg)
    assert.equal("error", code)
    local ok, err, ccode = db:exec("INSERT INTO t (rowid) VALUES (1); INSERT INTO t (rowid) VALUES (1)")
    assert.is_nil(ok)
    assert.matches("UNIQUE", err)
    assert.equal("constraint", ccode)
    db:close()
  end)

  it("raises on misuse: a wrong bind count, two statements to prepare", function()
    local db = assert(lash.sqlite.open(dir .. "/b.db"))
    local st = assert(db:prepare("SELECT ?"))
    assert.has_error(function() st:bind() end, "the statement takes 1 value(s), got 0")
    assert.has_error(function() db:prepare("SELECT 1; SELECT 2") end)
    assert.has_error(function() st:bind({}) end)
    db:close()
  end)

  it("closes idempotently; a closed database or statement raises", function()
    local db = assert(lash.sqlite.open(dir .. "/c.db"))
    local st = assert(db:prepare("SELECT 1 AS one"))
    db:close()
    db:close()
    assert.is_true(db:isclosed())
    assert.is_true(st:isclosed())
    assert.has_error(function() db:exec("SELECT 1") end, "attempt to use a closed sqlite database")
    assert.has_error(function() st:step() end)
    st:close()
    do
      local db2 <close> = assert(lash.sqlite.open(dir .. "/d.db"))
      local s2 <close> = assert(db2:prepare("SELECT 1"))
      assert(s2:step())
    end
  end)

  it("opens in WAL mode", function()
    local db = assert(lash.sqlite.open(dir .. "/w.db"))
    assert.equal("wal", db:prepare("PRAGMA journal_mode"):step().journal_mode)
    db:close()
  end)

  it("says a file that is not a database is not one", function()
    local f = assert(io.open(dir .. "/junk.db", "wb"))
    f:write(string.rep("junk", 1024))
    f:close()
    local db, msg, code = lash.sqlite.open(dir .. "/junk.db")
    assert.is_nil(db)
    assert.equal("notadb", code, msg)
  end)
end)

describe("lash.sessions", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("creates the schema at the current version and reopens it", function()
    local store = sessions.open(dir .. "/s/sessions.db")
    assert.equal(sessions.SCHEMA_VERSION, store:query("PRAGMA user_version")[1].user_version)
    local s = store:start { kind = "chat", spec = "a.lua", agent = "a", model = "test" }
    s:begin { prompt = "hi", model = "test" }
    s:append { role = "user", parts = { { type = "text", text = "hi" } } }
    s:finish { status = "complete", usage = { input_tokens = 3, output_tokens = 4 } }
    store:close()
    store = sessions.open(dir .. "/s/sessions.db")
    local got = assert(store:load(s.id))
    assert.equal("chat", got.session.kind)
    assert.equal("hi", got.messages[1].parts[1].text)
    assert.equal(4, got.runs[1].usage.output_tokens)
    assert.equal(s.id, store:latest())
    assert.equal("hi", store:list()[1].title)
    store:resume(s.id):set_title("  my   chat ")
    assert.equal("my chat", store:list()[1].title)
    assert.same({ 3, 4 }, { store:list()[1].input_tokens, store:list()[1].output_tokens })
    store:close()
  end)

  it("migrates a database of an older schema forward, keeping what it holds", function()
    local path = dir .. "/m.db"
    local current = sessions.SCHEMA_VERSION
    sessions.SCHEMA_VERSION = 1
    local ok, err = pcall(function()
      local old = sessions.open(path)
      local s = old:start { kind = "run" }
      s:begin { prompt = "kept" }
      s:append { role = "user", parts = { { type = "text", text = "kept" } } }
      s:finish { status = "complete" }
      old:close()
    end)
    sessions.SCHEMA_VERSION = current
    assert(ok, err)
    local store = sessions.open(path)
    assert.equal(current, store:query("PRAGMA user_version")[1].user_version)
    -- the durable ledger's tables exist after the migration (schema 3)
    assert.equal(0, store:query("SELECT count(*) AS n FROM tool_calls")[1].n)
    assert.equal(0, store:query("SELECT count(*) AS n FROM workspaces")[1].n)
    local id = store:latest()
    assert.equal("kept", store:load(id).messages[1].parts[1].text)
    local s = assert(store:resume(id))
    s:begin { prompt = "next" }
    s:set_partial("half an ans")
    assert.equal("half an ans", store:load(id).runs[2].partial)
    s:append { role = "assistant", parts = { { type = "text", text = "half an answer" } } }
    assert.is_nil(store:load(id).runs[2].partial)
    store:close()
  end)

  it("keeps a message that meets a locked file and writes it after the lock goes", function()
    local path = dir .. "/l.db"
    local store = sessions.open(path, { busy_timeout = 50 })
    local s = store:start { kind = "run" }
    s:begin { prompt = "one" }
    assert(s:record { role = "user", parts = { { type = "text", text = "one" } } })
    local other = assert(lash.sqlite.open(path))
    assert(other:exec("BEGIN IMMEDIATE"))
    local ok, err = s:record { role = "assistant", parts = { { type = "text", text = "two" } } }
    assert.is_false(ok)
    assert.equal("store", err.kind)
    assert.equal("busy", err.code)
    assert.matches("stayed locked by another process", err.message, 1, true)
    assert(other:exec("ROLLBACK"))
    other:close()
    assert(s:record { role = "user", parts = { { type = "text", text = "three" } } })
    assert(s:close_run { status = "complete" })
    local texts = {}
    for _, m in ipairs(store:load(s.id).messages) do texts[#texts + 1] = m.parts[1].text end
    assert.same({ "one", "two", "three" }, texts)
    store:close()
  end)

  it("forks when another writer continued the session meanwhile", function()
    local path = dir .. "/f.db"
    local store = sessions.open(path)
    local s = store:start { kind = "run" }
    s:begin { prompt = "a" }
    s:append { role = "user", parts = { { type = "text", text = "a" } } }
    s:finish { status = "complete" }
    local x = assert(store:resume(s.id))
    local y = assert(store:resume(s.id))
    x:begin { prompt = "x" }
    y:begin { prompt = "y" }
    assert.equal(s.id, x.id)
    assert.are_not.equal(s.id, y.id)
    assert.equal(s.id, y.forked_from)
    x:append { role = "user", parts = { { type = "text", text = "x" } } }
    y:append { role = "user", parts = { { type = "text", text = "y" } } }
    local function texts(id)
      local t = {}
      for _, m in ipairs(store:load(id).messages) do t[#t + 1] = m.parts[1].text end
      return table.concat(t, " ")
    end
    assert.equal("a x", texts(s.id))
    assert.equal("a y", texts(y.id))
    assert.equal(s.id, store:load(y.id).session.parent)
    store:close()
  end)

  it("sees another connection's write to the session between two of its own messages, and forks", function()
    local path = dir .. "/dv.db"
    local a, b = sessions.open(path), sessions.open(path)
    local function msg(t) return { role = "user", parts = { { type = "text", text = t } } } end
    local s = a:start { kind = "run" }
    s:begin { prompt = "1" }
    s:append(msg("1"))
    s:append(msg("2"))   -- nothing else wrote: no check needed, none forks
    assert.is_nil(s.forked_from)
    local other = assert(b:resume(s.id))
    other:begin { prompt = "x" }
    other:append(msg("x"))
    local original = s.id
    s:append(msg("3"))   -- the file moved on (data_version): checked, forked
    assert.equal(original, s.forked_from)
    local function texts(store, id)
      local t = {}
      for _, m in ipairs(store:load(id).messages) do t[#t + 1] = m.parts[1].text end
      return table.concat(t, " ")
    end
    assert.equal("1 2 x", texts(a, original))
    assert.equal("1 2 3", texts(a, s.id))
    a:close()
    b:close()
  end)

  it("does not take a run another live process is still writing as history; forks past it", function()
    local store = sessions.open(dir .. "/g.db")
    local s = store:start { kind = "run" }
    s:begin { prompt = "a" }
    s:append { role = "user", parts = { { type = "text", text = "a" } } }
    s:finish { status = "complete" }
    local other = assert(store:resume(s.id))
    other:begin { prompt = "b" }
    other:append { role = "user", parts = { { type = "text", text = "b" } } }
    -- as if that run belonged to another process that is still alive (pid 1)
    store:query("UPDATE runs SET pid = 1 WHERE session_id = ? AND n = 2", s.id)
    local me = assert(store:resume(s.id))
    assert.equal(1, #me.history)
    me:begin { prompt = "c" }
    assert.are_not.equal(s.id, me.id)
    me:append { role = "user", parts = { { type = "text", text = "c" } } }
    local texts = {}
    for _, m in ipairs(store:load(me.id).messages) do texts[#texts + 1] = m.parts[1].text end
    assert.same({ "a", "c" }, texts)
    store:close()
  end)

  it("refuses a database from a newer lash and does not write to it", function()
    local path = dir .. "/n.db"
    local db = assert(lash.sqlite.open(path))
    assert(db:exec("PRAGMA user_version = 999"))
    db:close()
    local ok, err = pcall(sessions.open, path)
    assert.is_false(ok)
    assert.equal("newer", err.code)
    assert.matches("schema version 999, newer than this lash", err.message, 1, true)
    db = assert(lash.sqlite.open(path))
    assert.equal(999, db:prepare("PRAGMA user_version"):step().user_version)
    assert.is_false(db:prepare("SELECT name FROM sqlite_master"):step())
    db:close()
  end)

  it("finds sessions by unique prefix and says when a prefix is ambiguous or unknown", function()
    local store = sessions.open(dir .. "/p.db")
    local a = store:start {}
    assert.equal(a.id, store:find(a.id:sub(1, 5)))
    assert.is_nil((store:find("zz")))
    local none, msg = store:find("0000000000")
    assert.is_nil(none)
    assert.matches("no session", msg)
    store:close()
  end)

  it("answers dangling tool calls as not finished", function()
    local h = { { role = "user", parts = { { type = "text", text = "go" } } },
                { role = "assistant", parts = { { type = "tool_call", id = "c1", name = "t", args = {} } } } }
    local calls = sessions.dangling_calls(h)
    assert.equal(1, #calls)
    local m = sessions.interrupted_results(calls)
    assert.equal("c1", m.parts[1].id)
    assert.equal("retry", m.parts[1].status)
    assert.same({}, sessions.dangling_calls({ h[1] }))
  end)

  it("closes a turn cut short so the next prompt never follows an unanswered one", function()
    local prompt = { role = "user", parts = { { type = "text", text = "go" } } }
    -- what it streamed is its answer
    local m = sessions.close_unanswered({ prompt }, "Half a")
    assert.same({ role = "assistant", parts = { { type = "text", text = "Half a" } }, finish = "interrupted" }, m)
    -- it said nothing: a note stands for the answer
    assert.equal(sessions.NO_ANSWER, sessions.close_unanswered({ prompt }).parts[1].text)
    assert.equal(sessions.NO_ANSWER, sessions.close_unanswered({ prompt }, "").parts[1].text)
    -- answered already, or tool results (interrupted ones too) that the model reads next: nothing
    assert.is_nil(sessions.close_unanswered({ prompt, m }))
    local results = { role = "user", parts = { { type = "tool_result", id = "c1", name = "t", status = "retry",
                                                  content = "interrupted" } } }
    assert.is_nil(sessions.close_unanswered({ prompt, results }))
    assert.is_nil(sessions.close_unanswered({}))
  end)
end)
