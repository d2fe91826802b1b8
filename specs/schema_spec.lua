-- lash.schema: validating tool arguments (every problem listed) and
-- checking schemas when tools are defined.
local schema = require "lash.schema"
local json = require "lash.json"

local function problems(value, s)
  local ok, errs = schema.validate(value, s)
  local out = {}
  for i, e in ipairs(errs) do out[i] = (e.path ~= "" and (e.path .. ": ") or "") .. e.message end
  return ok, out
end

describe("schema.validate", function()
  local person = {
    type = "object",
    properties = {
      name = { type = "string", minLength = 2, maxLength = 5 },
      age = { type = "integer", minimum = 0, maximum = 150 },
      role = { enum = { "admin", "user" } },
      tags = { type = "array", items = { type = "string" }, minItems = 1, maxItems = 2 },
      address = {
        type = "object",
        properties = { city = { type = "string" } },
        required = { "city" },
        additionalProperties = false,
      },
    },
    required = { "name", "age" },
    additionalProperties = false,
  }

  it("accepts a valid value", function()
    local ok, errs = problems({ name = "Ada", age = 36, role = "admin", tags = { "x" },
                                address = { city = "London" } }, person)
    assert.is_true(ok)
    assert.same({}, errs)
  end)

  it("lists every problem, not just the first", function()
    local ok, errs = problems({ name = "A", age = 200, role = "root", tags = {}, extra = 1,
                                address = { town = "x" } }, person)
    assert.is_false(ok)
    assert.same({
      "address: missing required property 'city'",
      "address: unexpected property 'town'",
      "age: must be <= 150, got 200",
      "unexpected property 'extra'",
      "name: must be at least 2 characters long, got 1",
      "role: must be one of 'admin', 'user', got 'root'",
      "tags: must have at least 1 item, got 0",
    }, errs)
  end)

  it("reports missing required properties and wrong types", function()
    local ok, errs = problems({ age = "old" }, person)
    assert.is_false(ok)
    assert.same({ "missing required property 'name'", "age: expected integer, got string" }, errs)
  end)

  it("checks nested arrays with 0-based paths", function()
    local s = { type = "object", properties = { rows = { type = "array", items = {
      type = "object", properties = { n = { type = "number" } }, required = { "n" } } } } }
    local ok, errs = problems({ rows = { { n = 1 }, { n = "x" }, {} } }, s)
    assert.is_false(ok)
    assert.same({ "rows[1].n: expected number, got string", "rows[2]: missing required property 'n'" }, errs)
  end)

  it("tells integers from numbers", function()
    local s = { type = "integer" }
    assert.is_true((schema.validate(3, s)))
    assert.is_true((schema.validate(3.0, s)))
    assert.is_false((schema.validate(3.5, s)))
    assert.is_true((schema.validate(3.5, { type = "number" })))
  end)

  it("handles null, type lists and anyOf (optional parameters)", function()
    local s = { type = "object", properties = {
      t = { anyOf = { { type = "number" }, { type = "null" } } },
      u = { type = { "string", "null" } } } }
    assert.is_true((schema.validate({ t = json.null, u = json.null }, s)))
    assert.is_true((schema.validate({ t = 5, u = "x" }, s)))
    local ok, errs = problems({ t = "5", u = 1 }, s)
    assert.is_false(ok)
    assert.same({ "t: must match one of: number, null; got string", "u: expected string or null, got integer" }, errs)
  end)

  it("enforces maxItems, maxLength, exclusive bounds", function()
    local s = { type = "object", properties = {
      a = { type = "array", maxItems = 1 }, s = { type = "string", maxLength = 2 },
      x = { type = "number", exclusiveMinimum = 0, exclusiveMaximum = 10 } } }
    local ok, errs = problems({ a = { 1, 2 }, s = "abc", x = 0 }, s)
    assert.is_false(ok)
    assert.same({ "a: must have at most 1 item, got 2", "s: must be at most 2 characters long, got 3",
                  "x: must be > 0, got 0" }, errs)
  end)

  it("counts string length in characters, not bytes", function()
    assert.is_true((schema.validate("héé", { type = "string", maxLength = 3 })))
  end)

  it("validates additionalProperties given as a schema", function()
    local s = { type = "object", additionalProperties = { type = "integer" } }
    local ok, errs = problems({ a = 1, b = "x" }, s)
    assert.is_false(ok)
    assert.same({ "b: expected integer, got string" }, errs)
  end)

  it("treats a decoded empty array as an array, not an object", function()
    local v = json.decode('{"tags": []}')
    assert.is_true((schema.validate(v, { type = "object", properties = { tags = { type = "array" } } })))
    local ok = schema.validate(v, { type = "object", properties = { tags = { type = "object" } } })
    assert.is_false(ok)
  end)

  it("formats problems for the model", function()
    local _, errs = schema.validate({}, { type = "object", required = { "a", "b" } })
    assert.equal("2 validation errors:\n- missing required property 'a'\n- missing required property 'b'",
                 schema.format_errors(errs))
  end)
end)

describe("schema.check", function()
  it("requires an object schema for tool parameters, naming the field", function()
    local ok, err = schema.check_object_schema({ type = "string" })
    assert.is_nil(ok)
    assert.matches("parameters.type must be \"object\"", err, 1, true)
    ok, err = schema.check_object_schema("x")
    assert.is_nil(ok)
    assert.matches("parameters must be a JSON Schema table", err, 1, true)
  end)

  it("refuses unknown keywords and bad types with the path", function()
    local ok, err = schema.check({ type = "object", properties = { a = { type = "strin" } } })
    assert.is_nil(ok)
    assert.equal("parameters.properties.a.type: unknown type 'strin' (one of object, array, string, number, "
      .. "integer, boolean, null)", err)
    ok, err = schema.check({ type = "object", propertes = {} })
    assert.is_nil(ok)
    assert.equal("parameters has an unknown keyword 'propertes'", err)
    ok, err = schema.check({ type = "object", required = "a" })
    assert.equal("parameters.required must be a list of property names", err)
    ok, err = schema.check({ type = "object", properties = { n = { type = "integer", minimum = "0" } } })
    assert.equal("parameters.properties.n.minimum must be a number, got string", err)
  end)

  it("accepts annotations it does not enforce", function()
    assert.is_true(schema.check({ type = "object", description = "d", title = "t", properties = {
      p = { type = "string", format = "uri", pattern = "^x", default = "x", examples = { "x" } } } }))
  end)
end)

describe("schema.prepare", function()
  it("keeps properties an object and drops an empty required list", function()
    local s = schema.prepare({ type = "object", properties = {}, required = {} })
    assert.equal('{"properties":{},"type":"object"}', json.encode_canonical(s))
  end)

  it("marks list keywords as arrays", function()
    local s = schema.prepare({ type = { "string", "null" }, enum = { "a" } })
    assert.equal('{"enum":["a"],"type":["string","null"]}', json.encode_canonical(s))
  end)
end)
