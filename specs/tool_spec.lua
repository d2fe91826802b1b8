-- lash.tool: definitions checked at creation, argument decoding and
-- validation, results, lash.retry, timeouts.
local lash = require "lash"
local tool = require "lash.tool"

local function def_error(def)
  local ok, err = pcall(lash.tool, def)
  assert.is_false(ok, "expected the definition to be refused")
  return tostring(err)
end

local function noop() return "ok" end

describe("lash.tool definitions", function()
  it("makes a tool with defaults", function()
    local t = lash.tool { name = "ping", handler = noop }
    assert.is_true(tool.is_tool(t))
    assert.equal("", t.description)
    assert.same({ type = "object", properties = {} }, t.parameters)
    assert.same({ name = "ping", description = "", parameters = { type = "object", properties = {} } },
                t:definition())
  end)

  it("refuses unknown fields, naming them and the known ones", function()
    local err = def_error { name = "x", handler = noop, desc = "typo" }
    assert.matches("lash.tool 'x': unknown field 'desc' (known fields: description, handler, idempotent, metadata, "
      .. "name, parameters, requires_approval, retries, timeout)", err, 1, true)
  end)

  it("blames the caller's line, not lash's", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() lash.tool { name = "x", handler = noop, retries = "a" } end)
    assert.is_false(ok)
    assert.equal("specs/tool_spec.lua:" .. line .. ": lash.tool 'x': field 'retries' must be a number, got string", err)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() lash.tool { name = "x" } end)
    assert.is_false(ok)
    assert.equal("specs/tool_spec.lua:" .. line .. ": lash.tool 'x': field 'handler' is required (a function(ctx, args))",
      err)
  end)

  it("refuses bad names", function()
    assert.matches("field 'name' must be 1-64 characters of letters, digits, '_' or '-', got 'has space'",
                   def_error { name = "has space", handler = noop }, 1, true)
    assert.matches("got nil", def_error { handler = noop }, 1, true)
    assert.matches("got '" .. ("a"):rep(65) .. "'", def_error { name = ("a"):rep(65), handler = noop }, 1, true)
  end)

  it("refuses a schema that is not an object schema, naming the field", function()
    assert.matches("lash.tool 'x': field parameters.type must be \"object\"",
                   def_error { name = "x", handler = noop, parameters = { type = "string" } }, 1, true)
    assert.matches("parameters.properties.a.type: unknown type 'text'",
                   def_error { name = "x", handler = noop,
                               parameters = { type = "object", properties = { a = { type = "text" } } } }, 1, true)
  end)

  it("checks field types", function()
    assert.matches("field 'handler' must be a function, got string", def_error { name = "x", handler = "f" }, 1, true)
    assert.matches("field 'handler' is required", def_error { name = "x" }, 1, true)
    assert.matches("field 'retries' must be an integer >= 0, got -1",
                   def_error { name = "x", handler = noop, retries = -1 }, 1, true)
    assert.matches("field 'timeout' must be a positive number of seconds, got 0",
                   def_error { name = "x", handler = noop, timeout = 0 }, 1, true)
    assert.matches("field 'requires_approval' must be a boolean or a function",
                   def_error { name = "x", handler = noop, requires_approval = "yes" }, 1, true)
  end)
end)

describe("tool.prepare_args", function()
  local t = lash.tool { name = "add", handler = noop, parameters = {
    type = "object", properties = { a = { type = "integer" }, b = { type = "integer" } },
    required = { "a", "b" }, additionalProperties = false } }

  it("accepts decoded tables and JSON strings", function()
    assert.same({ a = 1, b = 2 }, tool.prepare_args(t, { a = 1, b = 2 }))
    assert.same({ a = 1, b = 2 }, tool.prepare_args(t, '{"a": 1, "b": 2}'))
  end)

  it("returns a retry message listing every problem", function()
    local args, msg = tool.prepare_args(t, { a = "1", c = 3 })
    assert.is_nil(args)
    assert.equal("3 validation errors:\n- missing required property 'b'\n- a: expected integer, got string\n"
      .. "- unexpected property 'c'", msg)
  end)

  it("explains malformed JSON", function()
    local args, msg = tool.prepare_args(t, '{"a": 1, "b": ')
    assert.is_nil(args)
    assert.matches("^The arguments are not valid JSON %(invalid JSON", msg)
    assert.matches("Send the arguments as one JSON object.$", msg)
  end)

  it("refuses arguments that are not an object", function()
    local _, msg = tool.prepare_args(t, "[1, 2]")
    assert.equal("The arguments must be a JSON object, got array.", msg)
    _, msg = tool.prepare_args(t, "5")
    assert.equal("The arguments must be a JSON object, got integer.", msg)
  end)

  it("treats missing arguments as an empty object", function()
    local none = lash.tool { name = "none", handler = noop }
    assert.same({}, tool.prepare_args(none, nil))
    assert.same({}, tool.prepare_args(none, ""))
  end)
end)

describe("tool.call", function()
  local function call(handler, timeout)
    local t = lash.tool { name = "t", handler = handler, timeout = timeout }
    return lash.spawn(function() return tool.call(t, {}, {}) end):join()
  end

  it("turns results into text", function()
    assert.same({ "ok", "hi" }, { call(function() return "hi" end) })
    assert.same({ "ok", "" }, { call(function() end) })
    assert.same({ "ok", "42" }, { call(function() return 42 end) })
    assert.same({ "ok", '{"a":1}' }, { call(function() return { a = 1 } end) })
  end)

  it("treats lash.retry and nil, message as retry prompts", function()
    assert.same({ "retry", "path must be absolute" }, { call(function() lash.retry("path must be absolute") end) })
    assert.same({ "retry", "no such file" }, { call(function() return nil, "no such file" end) })
  end)

  it("fails with a tool error carrying the traceback", function()
    local ok, err = pcall(call, function() error("disk on fire") end)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "tool"))
    assert.matches("^Tool 't' failed: .*disk on fire", err.message)
    assert.matches("stack traceback", err.traceback)
  end)

  it("keeps typed errors as they are", function()
    local ok, err = pcall(call, function() error(lash.error("unavailable", "sandbox is gone")) end)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "unavailable"))
    assert.equal("t", err.tool)
  end)

  it("lets handlers wait", function()
    assert.same({ "ok", "slept" }, { call(function() lash.sleep(0.01) return "slept" end) })
  end)

  it("cancels a handler past its timeout and returns a retry prompt", function()
    local cleaned = false
    assert.same({ "retry", "Tool 't' timed out after 0.05s." }, { call(function()
      local ok, err = pcall(lash.sleep, 10)
      cleaned = not ok and lash.is_error(err, "cancelled")
      error(err, 0)
    end, 0.05) })
    assert.is_true(cleaned)
  end)

  it("leaves a handler that finishes in time alone", function()
    assert.same({ "ok", "fast" }, { call(function() lash.sleep(0.01) return "fast" end, 5) })
    -- no stray cancellation is left pending for the next wait
    lash.spawn(function() lash.sleep(0.01) end):join()
  end)
end)

describe("lash.retry", function()
  it("raises a retry error", function()
    local ok, err = pcall(lash.retry, "try again")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "retry"))
    assert.equal("try again", err.message)
  end)

  it("needs a message", function()
    assert.has_error(function() lash.retry() end, "lash.retry expects a message string, got nil")
  end)
end)
