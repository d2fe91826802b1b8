-- Tasks, futures, sleep and typed errors: the runtime's Lua face.
local lash = require "lash"

describe("lash tasks", function()
  it("spawns a task and joins its results", function()
    local t = lash.spawn(function(a, b) return a + b, "x" end, 2, 3)
    local s, x = t:join()
    assert.equal(5, s)
    assert.equal("x", x)
    assert.equal("done", t:status())
  end)

  it("re-raises a task's error on join, with a traceback", function()
    local t = lash.spawn(function() error("boom") end)
    local ok, err = pcall(t.join, t)
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.matches("stack traceback", err)
    assert.equal("failed", t:status())
  end)

  it("keeps typed errors typed through join", function()
    local t = lash.spawn(function() error(lash.error("limit", "too many", { value = 3 })) end)
    local ok, err = pcall(t.join, t)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "limit"))
    assert.equal(3, err.value)
    assert.equal("limit: too many", tostring(err))
  end)

  it("wait returns ok flags instead of raising", function()
    local good = lash.spawn(function() return 1 end)
    local bad = lash.spawn(function() error("nope", 0) end)
    assert.same({ true, 1 }, { good:wait() })
    local ok, err = bad:wait()
    assert.is_false(ok)
    assert.matches("^nope", err)
  end)

  it("runs sleeping tasks concurrently", function()
    -- Counted, not timed: every task is asleep at the same moment.
    local asleep, most = 0, 0
    local tasks = {}
    for i = 1, 50 do
      tasks[i] = lash.spawn(function()
        asleep = asleep + 1
        most = math.max(most, asleep)
        lash.sleep(0.1)
        asleep = asleep - 1
        return i
      end)
    end
    for i = 1, 50 do
      assert.equal(i, tasks[i]:join())
    end
    assert.equal(50, most)
  end)

  it("wakes sleepers in deadline order", function()
    local order = {}
    local ts = {}
    for _, d in ipairs({ 0.06, 0.02, 0.04 }) do
      ts[#ts + 1] = lash.spawn(function() lash.sleep(d) order[#order + 1] = d end)
    end
    for _, t in ipairs(ts) do t:join() end
    assert.same({ 0.02, 0.04, 0.06 }, order)
  end)

  it("cancel makes the current wait raise cancelled, once", function()
    local cleaned = false
    local t = lash.spawn(function()
      local ok, err = pcall(lash.sleep, 30)
      assert(not ok and lash.is_error(err, "cancelled"))
      lash.sleep(0.01) -- cleanup may still wait
      cleaned = true
      error(err)
    end)
    lash.sleep(0.01)
    assert.equal("waiting", t:status())
    assert.is_true(t:cancel())
    local ok, err = pcall(t.join, t)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.is_true(cleaned)
    assert.equal("cancelled", t:status())
    assert.is_false(t:cancel())
  end)

  it("cancelling a task that has not started never runs it", function()
    local ran = false
    local t = lash.spawn(function() ran = true end)
    t:cancel()
    local ok, err = t:wait()
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.is_false(ran)
  end)

  it("a task that cancels itself gets the error at its next wait", function()
    local t = lash.spawn(function()
      lash.current():cancel()
      lash.sleep(0)
      return "not reached"
    end)
    local ok, err = t:wait()
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
  end)

  it("closes to-be-closed variables of a failing task", function()
    local closed = false
    local t = lash.spawn(function()
      local guard <close> = setmetatable({}, { __close = function() closed = true end })
      lash.sleep(0)
      error("fail")
    end)
    t:wait()
    assert.is_true(closed)
  end)

  it("a plain coroutine.yield in a task lets others run", function()
    local log = {}
    local a = lash.spawn(function() log[#log + 1] = "a1"; coroutine.yield(); log[#log + 1] = "a2" end)
    local b = lash.spawn(function() log[#log + 1] = "b1" end)
    a:join(); b:join()
    assert.same({ "a1", "b1", "a2" }, log)
  end)

  it("waits inside a foreign coroutine drive the loop in place", function()
    local co = coroutine.wrap(function() lash.sleep(0.01) return "slept" end)
    assert.equal("slept", co())
  end)

  it("survives waits where tasks cannot yield, nested deeper than the main thread's stack", function()
    -- a comparator is called from C, so its wait drives the loop in place;
    -- the other tasks wake meanwhile and do the same, one level deeper each
    local n, deepest, inside = 80, 0, 0
    local tasks = {}
    for i = 1, n do
      tasks[i] = lash.spawn(function()
        lash.sleep(0.001 * i)
        table.sort({ 2, 1 }, function(a, b)
          inside = inside + 1
          deepest = math.max(deepest, inside)
          lash.sleep(0.3)
          inside = inside - 1
          return a < b
        end)
        return i
      end)
    end
    for i = 1, n do assert.equal(i, tasks[i]:join()) end
    assert.is_true(deepest > 40, "nesting reached " .. deepest)
  end)

  it("refuses to join itself", function()
    local t
    t = lash.spawn(function() return pcall(function() return t:join() end) end)
    local ok, err = t:join()
    assert.is_false(ok)
    assert.matches("cannot join itself", err)
  end)

  it("step advances without blocking past its timeout", function()
    -- no wall-clock bound (a loaded machine stalls for any margin): a step
    -- that waited for the sleeper's timer would have finished it
    local t = lash.spawn(function() lash.sleep(30) return 1 end)
    assert.is_true(lash.step(0.01))
    assert.is_true(lash.step(0.01))
    assert.equal("waiting", t:status())
    t:cancel()
    assert.is_true(lash.is_error(select(2, t:wait()), "cancelled"))
    local u = lash.spawn(function() lash.sleep(0.01) return 1 end)
    assert.equal(1, u:join())
    assert.is_false(lash.step(0))
  end)

  it("rejects bad sleep durations", function()
    assert.has_error(function() lash.sleep(-1) end)
    assert.has_error(function() lash.sleep(0 / 0) end)
    assert.has_error(function() lash.sleep(math.huge) end)
  end)

  it("sleeps past what nanoseconds can count without waking at once", function()
    for _, s in ipairs { 1e20, 2 ^ 64 / 1e9, 1.8e10 } do
      local t = lash.spawn(function() lash.sleep(s) return "woke" end)
      assert.is_true(lash.step(0.01))
      assert.is_true(lash.step(0.01))
      assert.equal("waiting", t:status())
      t:cancel()
      assert.is_false((t:wait()))
    end
  end)

  it("step takes any timeout: huge ones wait like a negative one, NaN is refused", function()
    -- with nothing that could wake it, an unbounded step returns at once
    assert.is_false(lash.step(1e300))
    assert.is_false(lash.step(-1))
    assert.has_error(function() lash.step(0 / 0) end)
  end)
end)

describe("lash futures", function()
  it("wakes every waiter with the values", function()
    local f = lash.future()
    local a = lash.spawn(function() return f:wait() end)
    local b = lash.spawn(function() return f:wait() end)
    lash.spawn(function() lash.sleep(0.01); f:set("v", 2) end)
    assert.same({ "v", 2 }, { a:join() })
    assert.same({ "v", 2 }, { b:join() })
    assert.is_true(f:done())
    assert.is_false(f:set("again"))
  end)

  it("fail raises in waiters", function()
    local f = lash.future()
    lash.spawn(function() f:fail(lash.error("http", "down")) end)
    local ok, err = pcall(f.wait, f)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "http"))
    assert.same({ false, err }, { f:result() })
  end)

  it("a cancelled waiter leaves the future usable", function()
    local f = lash.future()
    local t = lash.spawn(function() return f:wait() end)
    lash.step(0)
    t:cancel()
    assert.is_false((t:wait()))
    f:set(1)
    assert.equal(1, f:wait())
  end)

  it("deadlock is an error, not a hang", function()
    local f = lash.future()
    local ok, err = pcall(f.wait, f)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "deadlock"))
  end)

  it("a wait given up by a deadlock leaves the future usable and nothing for the collector to trip on", function()
    local f = lash.future()
    assert.is_false((pcall(f.wait, f)))
    f:set("later")
    assert.equal("later", f:wait())
    -- the abandoned waiter and a future that dies with it, collected together
    do
      local g = lash.future()
      assert.is_false((pcall(g.wait, g)))
    end
    collectgarbage()
    collectgarbage()
  end)
end)

describe("lash.log", function()
  it("checks its level", function()
    assert.has_error(function() lash.log("loud", "x") end)
    assert.has_error(function() lash.log("info") end)
  end)

  it("accepts every level", function()
    for _, level in ipairs({ "debug", "info", "warning", "warn", "error" }) do
      lash.log(level, "level " .. level .. " (expected output on stderr for warnings and errors)")
    end
  end)
end)
