-- lash.outq: the bounded queue a command's output streams through, from
-- the loop to the task that turns it into tool_output_delta events.
local lash = require "lash"
local outq = lash.core.outq

local function drain(q, max)
  local got = {}
  while true do
    local stream, text, skipped = q:next(max)
    if not stream then return got end
    got[#got + 1] = { stream, text, skipped }
  end
end

describe("lash.outq", function()
  it("joins a stream's consecutive chunks and keeps the order across streams", function()
    local q = outq.new()
    q:push("stdout", "a")
    q:push("stdout", "b")
    q:push("stderr", "E")
    q:push("stdout", "c")
    q:close()
    assert.same({ { "stdout", "ab", 0 }, { "stderr", "E", 0 }, { "stdout", "c", 0 } }, drain(q))
  end)

  it("takes at most max bytes at a time", function()
    local q = outq.new()
    q:push("stdout", "abcdefg")
    q:close()
    assert.same({ { "stdout", "abc", 0 }, { "stdout", "def", 0 }, { "stdout", "g", 0 } }, drain(q, 3))
  end)

  it("drops the newest bytes past its bound and tells how many, in place", function()
    local q = outq.new(4)
    q:push("stdout", "abc")
    q:push("stdout", "defgh")   -- "d" fits, "efgh" does not
    q:push("stderr", "xy")      -- full: dropped
    assert.same({ "stdout", "abcd", 0 }, { q:next() })
    q:push("stdout", "ij")      -- room again: told that 4 bytes came before
    q:push("stderr", "z")
    q:close()
    assert.same({ { "stdout", "ij", 4 }, { "stderr", "z", 2 } }, drain(q))
    assert.same({ stdout = 10, stderr = 3 }, q:totals())
  end)

  it("tells what was dropped at the very end, when the queue closes", function()
    local q = outq.new(2)
    q:push("stderr", "12345")
    q:close()
    assert.same({ { "stderr", "12", 0 }, { "stderr", "", 3 } }, drain(q))
  end)

  it("wakes a waiting task on a push and on the close", function()
    local q = outq.new()
    local got = {}
    local reader = lash.spawn(function()
      for stream, text in function() return q:next() end do got[#got + 1] = stream .. "=" .. text end
      return "drained"
    end)
    lash.sleep(0.01)
    assert.same({}, got)
    q:push("stdout", "one")
    lash.sleep(0.01)
    assert.same({ "stdout=one" }, got)
    q:push("stderr", "two")
    q:close()
    assert.equal("drained", reader:join())
    assert.same({ "stdout=one", "stderr=two" }, got)
  end)

  it("leaves a cancelled reader's queue usable by the next one", function()
    local q = outq.new()
    local reader = lash.spawn(function() return q:next() end)
    lash.sleep(0.01)
    reader:cancel()
    assert.is_false((reader:wait()))
    q:push("stdout", "late")
    assert.same({ "stdout", "late", 0 }, { q:next() })
  end)

  it("refuses misuse with clear errors", function()
    local q = outq.new()
    assert.has_error(function() q:push("stdin", "x") end)
    q:close()
    assert.has_error(function() q:push("stdout", "x") end, "lash.outq: push on a closed queue")
    assert.has_error(function() outq.new(0) end)
    assert.is_nil(q:next())
  end)
end)
