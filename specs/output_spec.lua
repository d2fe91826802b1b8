-- lash.output: the tail ring, truncation with the harness's markers, the
-- size format and UTF-8 repair, string for string.
local lash = require "lash"
local output = lash.output

local function tail(text, max_bytes, max_lines, already)
  return output.truncate(text, {
    max_bytes = max_bytes, max_lines = max_lines, already_truncated = already,
  })
end

local function head(text, max_bytes, max_lines)
  return output.truncate(text, { max_bytes = max_bytes, max_lines = max_lines, direction = "head" })
end

-- Feed s into a ring of cap bytes in chunks of n bytes.
local function through_ring(s, cap, n)
  local r <close> = output.ring(cap)
  for i = 1, #s, n do
    r:feed(s:sub(i, i + n - 1))
  end
  return r:result()
end

describe("lash.output.format_size", function()
  it("formats bytes, KB and MB as the markers do", function()
    local cases = {
      [0] = "0B", [1023] = "1023B", [1024] = "1.0KB", [5000] = "4.9KB",
      [51200] = "50.0KB", [1048575] = "1024.0KB", [1048576] = "1.0MB",
      [5242880] = "5.0MB", [3145728] = "3.0MB",
    }
    for n, want in pairs(cases) do
      assert.are.equal(want, output.format_size(n))
    end
  end)

  it("refuses negative and fractional sizes", function()
    assert.has_error(function() output.format_size(-1) end,
      "bad argument #1 to 'format_size' (must be a non-negative integer)")
    assert.has_error(function() output.format_size(1.5) end)
    assert.has_error(function() output.format_size("x") end)
  end)
end)

describe("lash.output.truncate", function()
  it("holds every example of the host issue", function()
    assert.are.equal("[... output truncated to the last 50B ...]\n" .. ("A"):rep(47) .. "END",
      (tail(("A"):rep(500) .. "END", 50)))
    assert.are.equal("[... output truncated to the last 1 lines ...]\nthird",
      (tail("first\nsecond\nthird", nil, 1)))
    assert.are.equal("[... output truncated to the last 5B ...]\néé", (tail(("é"):rep(20), 5)))
    assert.are.equal("[... output truncated to the last 50B ...]\nEND",
      (tail(("X"):rep(100) .. "\nEND", 50)))
    assert.are.equal("a\nb\n[... output truncated to the first 2 lines ...]",
      (head("a\nb\nc", nil, 2)))
    assert.are.equal("[... first line exceeds the 10B limit, output omitted ...]",
      (head(("x"):rep(200), 10)))
  end)

  it("uses the default cap's marker text", function()
    local out, cut = tail(("y\n"):rep(60000), 51200, 2000)
    assert.is_true(cut)
    assert.are.equal("[... output truncated to the last 2000 lines ...]\n",
      out:sub(1, #"[... output truncated to the last 2000 lines ...]\n"))
    out = tail(("y"):rep(60000) .. "\n", 51200, 2000)
    assert.are.equal("[... output truncated to the last 50.0KB ...]\n" .. ("y"):rep(51200), out)
  end)

  it("keeps the last lines under a line cap", function()
    assert.are.equal("[... output truncated to the last 3 lines ...]\n8\n9\n10",
      (tail("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", nil, 3)))
  end)

  it("counts a joining newline as one byte and ignores one trailing newline", function()
    assert.are.same({ "ab\ncd", false }, { tail("ab\ncd\n", 5) })
    assert.are.same({ "[... output truncated to the last 4B ...]\ncd", true }, { tail("ab\ncd", 4) })
    assert.are.same({ "hello\n", false }, { tail("hello\n\n", 100) })
  end)

  it("returns untouched text as it is", function()
    local s = "line one\nline two"
    local out, cut = output.truncate(s, { max_bytes = 100, max_lines = 10 })
    assert.are.equal(s, out)
    assert.is_false(cut)
    assert.are.same({ "x", false }, { output.truncate("x") })
  end)

  it("marks a stream the ring already cut even when the rest fits", function()
    assert.are.equal("[... output truncated to the last 50.0KB ...]\nsmall",
      (tail("small", 51200, 2000, true)))
    assert.are.equal("a\n[... output truncated to the first 100B ...]",
      (output.truncate("a", { max_bytes = 100, direction = "head", already_truncated = true })))
  end)

  it("keeps 1000 B of output at a 100 B cap to whole lines within 100 B", function()
    local out = tail(("123456789\n"):rep(100), 100, 2000)
    assert.are.equal("[... output truncated to the last 100B ...]\n"
      .. ("123456789\n"):rep(9) .. "123456789", out)
  end)

  it("cuts a single wide line at a character boundary", function()
    assert.are.equal("[... output truncated to the last 7B ...]\n€€", (tail(("€"):rep(10), 7)))
    assert.are.equal("[... output truncated to the last 2B ...]\n", (tail("€", 2)))
  end)

  it("describes a cut with truncate_info", function()
    local info = output.truncate_info("L0\nL1\nL2\nL3", { max_lines = 3, direction = "head" })
    assert.are.same({
      body = "L0\nL1\nL2", lines = 3, by = "lines", first_line_exceeded = false,
      marker = "[... output truncated to the first 3 lines ...]",
      text = "L0\nL1\nL2\n[... output truncated to the first 3 lines ...]",
    }, info)
    info = output.truncate_info("line00\nline01\nline02", { max_bytes = 12, direction = "head" })
    assert.are.equal("line00", info.body)
    assert.are.equal(1, info.lines)
    assert.are.equal("bytes", info.by)
    info = output.truncate_info(("x"):rep(200), { max_bytes = 10, direction = "head" })
    assert.is_true(info.first_line_exceeded)
    assert.are.equal(0, info.lines)
    assert.are.equal("", info.body)
    info = output.truncate_info("fits", { max_bytes = 10 })
    assert.is_nil(info.by)
    assert.is_nil(info.marker)
    assert.are.equal("fits", info.text)
  end)

  it("refuses bad options, naming them", function()
    assert.has_error(function() output.truncate("x", { max_bytes = -1 }) end,
      "bad argument #2 to 'truncate' (max_bytes must be a non-negative integer or nil, got -1)")
    assert.has_error(function() output.truncate("x", { max_lines = 2.5 }) end,
      "bad argument #2 to 'truncate' (max_lines must be a non-negative integer or nil, got 2.5)")
    assert.has_error(function() output.truncate("x", { max_lines = "3" }) end,
      "bad argument #2 to 'truncate' (max_lines must be a non-negative integer or nil, got 3)")
    assert.has_error(function() output.truncate("x", { direction = "up" }) end,
      "bad argument #2 to 'truncate' (direction must be \"tail\" or \"head\")")
    assert.has_error(function() output.truncate("x", { already_truncated = 1 }) end,
      "bad argument #2 to 'truncate' (already_truncated must be a boolean)")
    assert.has_error(function() output.truncate("x", { max_byte = 10 }) end,
      "lash.output.truncate: unknown option 'max_byte' (known: max_lines, "
      .. "max_bytes, direction, already_truncated)")
    assert.has_error(function() output.truncate(nil) end)
    assert.has_error(function() output.truncate("x", 5) end)
  end)
end)

describe("lash.output.ring", function()
  it("keeps the last N bytes and says whether it dropped any", function()
    local r = output.ring(4)
    r:feed("0123456789")
    assert.are.same({ "6789", true }, { r:result() })
    r:close()
    r = output.ring(4)
    r:feed("0123456789"):feed("AB")
    assert.are.same({ "89AB", true }, { r:result() })
    assert.are.equal(12, r:total())
    r:close()
    r = output.ring(4)
    r:feed("abcd")
    assert.are.same({ "abcd", false }, { r:result() })
    assert.is_false(r:dropped())
    r:feed("e")
    assert.is_true(r:dropped())
    r:reset()
    assert.are.same({ "", false }, { r:result() })
    r:close()
  end)

  it("gives the same tail for every chunk size", function()
    local s = ("abcdefghijklmnopqrstuvwxyz"):rep(40)
    for _, n in ipairs({ 1, 2, 3, 7, 64, 100, 1040 }) do
      assert.are.equal(s:sub(-100), (through_ring(s, 100, n)))
    end
  end)

  it("keeps output ending in END through 1-byte chunks", function()
    local s = ("A"):rep(597) .. "END"
    local kept, dropped = through_ring(s, 50, 1)
    assert.are.equal(("A"):rep(47) .. "END", kept)
    assert.is_true(dropped)
  end)

  it("starts a cut on a character boundary", function()
    assert.are.equal("éé", (through_ring(("é"):rep(20), 5, 1)))
    assert.are.equal("😀", (through_ring("😀😀", 7, 3)))
  end)

  it("decodes UTF-8 split across 1-byte chunks", function()
    local s = "héllo wörld €"
    assert.are.same({ s, false }, { through_ring(s, 100, 1) })
  end)

  it("feeds the truncation: X*100..\\nEND through 1-byte chunks at 50 B", function()
    local kept, dropped = through_ring(("X"):rep(100) .. "\nEND", 50, 1)
    assert.are.equal(("X"):rep(46) .. "\nEND", kept)
    assert.are.equal("[... output truncated to the last 50B ...]\n" .. ("X"):rep(46) .. "\nEND",
      (tail(kept, 50, 2000, dropped)))
  end)

  it("repairs what it kept when asked", function()
    local kept = through_ring("ok\xe2\x82", 10, 1)
    assert.are.equal("ok\u{FFFD}", (output.utf8_repair(kept)))
  end)

  it("closes idempotently and refuses use after close", function()
    local r = output.ring(10)
    r:close()
    r:close()
    assert.has_error(function() r:feed("x") end, "attempt to use a closed lash.ring")
    assert.has_error(function() r:result() end, "attempt to use a closed lash.ring")
    assert.are.equal("lash.ring (closed)", tostring(r))
    do
      local r2 <close> = output.ring(10)
      r2:feed("abc")
      assert.are.equal("lash.ring (3 of 10 bytes kept)", tostring(r2))
    end
  end)

  it("refuses a negative or missing cap", function()
    assert.has_error(function() output.ring(-1) end,
      "bad argument #1 to 'ring' (must be a non-negative integer)")
    assert.has_error(function() output.ring() end)
    assert.has_error(function() output.ring(10):feed() end)
  end)
end)

describe("lash.output UTF-8", function()
  it("replaces invalid bytes with U+FFFD and passes valid text", function()
    assert.are.same({ "\u{FFFD}\u{FFFD}ok", true }, { output.utf8_repair("\xff\xfeok") })
    assert.are.same({ "ok\u{FFFD}", true }, { output.utf8_repair("ok\xe2\x82") })
    assert.are.same({ "h\u{e9} \u{20ac}", false }, { output.utf8_repair("h\u{e9} \u{20ac}") })
    assert.are.same({ "\u{FFFD}\u{FFFD}\u{FFFD}", true }, { output.utf8_repair("\xed\xa0\x80") })
    assert.are.same({ "\u{FFFD}A", true }, { output.utf8_repair("\xf0\x9f\x98A") })
  end)

  it("checks validity and locates the first bad byte", function()
    assert.is_true(output.is_utf8("plain é"))
    assert.are.same({ false, 4 }, { output.is_utf8("abc\xff") })
    assert.are.same({ false, 1 }, { output.is_utf8("\xc0\xaf") })
    assert.is_true(output.is_utf8(""))
  end)
end)
