-- lash.core's C bindings share one checker of option tables (laux.c): a
-- misspelt option is refused by name, with every option the call takes,
-- instead of being ignored (a misspelt cap or timeout silently meaning
-- "none"); and a closed handle raises.
local core = require "lash.core"

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("lash.core option tables", function()
  it("refuse an unknown option, naming the call, the key and the known ones", function()
    local cases = {
      { function() return core.budget.run(function() end, { instrutions = 10 }) end,
        "budget.run: unknown option 'instrutions' (known: instructions, memory, seconds)" },
      { function() return core.budget.call(function() end, { lable = "x" }) end,
        "budget.call: unknown option 'lable' (known: instructions, memory, seconds, label, string_index)" },
      { function() return core.proc.spawn { argv = { "true" }, cdw = "/" } end,
        "lash.proc.spawn: unknown option 'cdw' (known: argv, env, cwd, stdin, stderr)" },
      { function() return core.net.listen { host = "127.0.0.1", prot = 0 } end,
        "lash.net.listen: unknown option 'prot' (known: host, port, backlog)" },
      { function() return core.sqlite.open(":memory:", { busy = 10 }) end,
        "lash.sqlite.open: unknown option 'busy' (known: busy_timeout, readonly, wal)" },
      { function() return core.yaml.decode("a: 1", { max_node = 1 }) end,
        "lash.yaml.decode: unknown option 'max_node' (known: max_depth, max_nodes, null)" },
      { function() return core.output.truncate("x", { max_byte = 1 }) end,
        "lash.output.truncate: unknown option 'max_byte' (known: max_lines, max_bytes, direction, already_truncated)" },
    }
    for _, c in ipairs(cases) do
      local e = err_of(c[1])
      assert(e:find(c[2], 1, true), e)
    end
  end)

  it("accept every option they document", function()
    assert.is_true((core.budget.run(function() return 1 end, { instructions = 1e6, memory = 0, seconds = 0 })))
    assert.equal(1, core.budget.call(function() return 1 end,
      { instructions = 1e6, memory = 0, seconds = 0, label = "f", string_index = string }))
    local l = core.net.listen { host = "127.0.0.1", port = 0, backlog = 4 }
    l:close()
    local db = assert(core.sqlite.open(":memory:", { busy_timeout = 10, readonly = false, wal = false }))
    db:close()
    assert.same({ a = 1 }, core.yaml.decode("a: 1", { max_depth = 4, max_nodes = 10 }))
  end)

  it("check the listen backlog", function()
    assert.matches("backlog must be 1%-65535", err_of(core.net.listen, { backlog = 0 }))
  end)
end)

describe("lash.core handles", function()
  it("raise once closed, and close twice without harm", function()
    local r = core.output.ring(10)
    r:close()
    r:close()
    assert.matches("closed", err_of(r.feed, r, "x"))
    local db = assert(core.sqlite.open(":memory:"))
    db:close()
    db:close()
    assert.matches("closed", err_of(db.exec, db, "select 1"))
  end)
end)

describe("lash.sqlite in WAL mode", function()
  local function size(path)
    local f = io.open(path)
    if not f then return nil end
    local n = f:seek("end")
    f:close()
    return n
  end

  it("closes without a checkpoint while the WAL is small, and with one once it is not", function()
    local dir = os.tmpname()
    os.remove(dir)
    local path = dir .. ".db"
    local db = assert(core.sqlite.open(path))
    assert(db:exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('kept')"))
    db:close()
    -- the commit is in the WAL the next open reads back (no fsyncs at close)
    assert.is_true(size(path .. "-wal") > 0)
    db = assert(core.sqlite.open(path))
    local st = assert(db:prepare("SELECT v FROM t"))
    assert.equal("kept", st:step().v)
    st:close()
    -- past 256 KiB the closing connection checkpoints and the WAL goes
    assert(db:exec("INSERT INTO t SELECT hex(randomblob(1000)) FROM (WITH RECURSIVE c(x) AS "
      .. "(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200) SELECT x FROM c)"))
    assert.is_true(size(path .. "-wal") > 256 * 1024)
    db:close()
    assert.is_nil(size(path .. "-wal"))
    db = assert(core.sqlite.open(path))
    st = assert(db:prepare("SELECT count(*) AS n FROM t"))
    assert.equal(201, st:step().n)
    st:close()
    db:close()
    for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end
  end)
end)
