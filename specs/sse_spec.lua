-- lash.http.sse_parser: Server-Sent Events across chunk boundaries, CRLF,
-- comments, multi-line data, ids, retry, the BOM, and the size limits.
local lash = require "lash"

local sse_parser = lash.http.sse_parser

-- Parse chunks with a fresh parser; return every event in order.
local function parse(chunks, opts)
  local p <close> = sse_parser(opts)
  local all = {}
  for _, c in ipairs(chunks) do
    for _, ev in ipairs(p:feed(c)) do
      all[#all + 1] = ev
    end
  end
  return all
end

local STREAM = "\xef\xbb\xbf: hello\r\n"
  .. "event: add\r\nid: 1\r\ndata: first\r\ndata: line\r\n\r\n"
  .. "data: second\rretry: 250\r\r"
  .. "id: 2\ndata:x\n\n"
  .. ":comment\n"
  .. "event: end\ndata: € done\r\n\n"

local WANT = {
  { event = "add", data = "first\nline", id = "1" },
  { event = "message", data = "second", id = "1", retry = 250 },
  { event = "message", data = "x", id = "2" },
  { event = "end", data = "€ done", id = "2" },
}

describe("lash.http.sse_parser", function()
  it("is exposed by lash.http", function()
    assert.is_function(sse_parser)
  end)

  it("parses a stream with every kind of line", function()
    assert.are.same(WANT, parse({ STREAM }))
  end)

  it("gives the same events when split at every byte boundary", function()
    for i = 0, #STREAM do
      assert.are.same(WANT, parse({ STREAM:sub(1, i), STREAM:sub(i + 1) }), "split at " .. i)
    end
  end)

  it("gives the same events fed one byte at a time", function()
    local bytes = {}
    for i = 1, #STREAM do
      bytes[i] = STREAM:sub(i, i)
    end
    assert.are.same(WANT, parse(bytes))
  end)

  it("treats a CR ending one chunk and an LF starting the next as one line end", function()
    assert.are.same({ { event = "message", data = "a\nb" } },
      parse({ "data: a\r", "\ndata: b\r\n\r\n" }))
    assert.are.same({ { event = "message", data = "a" }, { event = "message", data = "b" } },
      parse({ "data: a\r", "\rdata: b\r\r" }))
  end)

  it("returns an empty array until an event is complete", function()
    local p = sse_parser()
    assert.are.same({}, p:feed("data: par"))
    assert.are.same({}, p:feed("tial\n"))
    assert.are.same({ { event = "message", data = "partial" } }, p:feed("\n"))
    assert.are.same({}, p:feed("data: never finished\n"))
    p:close()
  end)

  it("follows the field rules", function()
    assert.are.same({ { event = "message", data = " x" } }, parse({ "data:  x\n\n" }))
    assert.are.same({ { event = "message", data = "" } }, parse({ "data\n\n" }))
    assert.are.same({}, parse({ "event: ping\n\n" }))
    assert.are.same({}, parse({ ": only a comment\n\n" }))
    assert.are.same({ { event = "message", data = "y" } }, parse({ "retry: 5s\nfoo: bar\ndata: y\n\n" }))
    assert.are.same({ { event = "message", data = "a", id = "7" }, { event = "message", data = "b" } },
      parse({ "id: 7\ndata: a\n\nid\ndata: b\n\n" }))
  end)

  it("keeps the stream's retry and last event id", function()
    local p <close> = sse_parser()
    assert.is_nil(p:retry())
    assert.are.equal("", p:last_event_id())
    assert.are.same({}, p:feed("retry: 3000\nid: abc\n\n"))
    assert.are.equal(3000, p:retry())
    assert.are.equal("abc", p:last_event_id())
  end)

  it("repairs invalid UTF-8 in field values", function()
    assert.are.same({ { event = "message", data = "a\u{FFFD}b" } }, parse({ "data: a\xffb\n\n" }))
  end)

  it("refuses a line over the limit with a clear error", function()
    local p = sse_parser({ max_line = 16 })
    assert.are.same({}, p:feed("data: 0123456789"))
    assert.has_error(function() p:feed("x") end,
      "event stream line over the 16-byte limit (set max_line in sse_parser{} to allow more)")
    p:close()
    p = sse_parser({ max_event = 10 })
    assert.has_error(function() p:feed("data: 0123456789\ndata: x\n\n") end,
      "event stream event data over the 10-byte limit (set max_event in sse_parser{} to allow more)")
    p:close()
  end)

  it("refuses bad options, naming them", function()
    assert.has_error(function() sse_parser({ max_line = 0 }) end,
      "bad argument #1 to 'sse_parser' (max_line must be a positive integer (bytes), got 0)")
    assert.has_error(function() sse_parser({ maxline = 5 }) end,
      "lash.http.sse_parser: unknown option 'maxline' (known: max_line, max_event)")
    assert.has_error(function() sse_parser(5) end)
  end)

  it("closes idempotently and refuses use after close", function()
    local p = sse_parser()
    p:close()
    p:close()
    assert.has_error(function() p:feed("data: x\n\n") end, "attempt to use a closed lash.sse_parser")
    assert.are.equal("lash.sse_parser (closed)", tostring(p))
  end)
end)
