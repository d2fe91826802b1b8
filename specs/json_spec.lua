-- lash.json: the C codec behind lua/lash/json.lua (src/2-runtime/json.c).
local json = require "lash.json"

describe("json.encode_canonical", function()
  it("sorts keys bytewise at every level and keeps [] and {} apart", function()
    assert.equal('{"A":1,"B":[],"a":{"x":{},"y":[1,2]},"b":null}',
      json.encode_canonical { b = json.null, a = { y = { 1, 2 }, x = {} }, B = json.array(), A = 1 })
  end)

  it("writes integers exactly and floats with 14 significant digits", function()
    assert.equal("[1,0,-0,2.5,0.1,1e-07,1.2345678901235e+19,9007199254740993,123456789.12346]",
      json.encode_canonical { 1, -0, -0.0, 2.5, 0.1, 1e-7, 12345678901234567890.0, 9007199254740993, 123456789.123456789 })
  end)

  it("escapes quotes, backslashes, control characters and DEL, and not '/'", function()
    assert.equal([["a\"b\\c/d\n\t\r\b\f\u0001\u001f\u007f é 😀 ]] .. "\u{2028}" .. [["]],
      json.encode_canonical("a\"b\\c/d\n\t\r\b\f\1\31\127 é 😀 \u{2028}"))
    assert.equal('"\\u0000x"', json.encode_canonical("\0x"))
  end)

  it("writes a table that is not a proper sequence as an object with string keys", function()
    assert.equal('{"1":"a","3":"c"}', json.encode_canonical { [1] = "a", [3] = "c" })
    assert.equal('{"1":"a","k":true}', json.encode_canonical { "a", k = true })
    assert.equal('{"1.5":1}', json.encode_canonical { [1.5] = 1 })
    assert.equal('{"k":1}', json.encode_canonical(setmetatable({ k = 1 }, json.array_mt)))
  end)

  it("sorts objects with many keys", function()
    local t, want = {}, {}
    for i = 1, 300 do t["k" .. i] = i end
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do want[i] = '"' .. k .. '":' .. t[k] end
    assert.equal("{" .. table.concat(want, ",") .. "}", json.encode_canonical(t))
  end)

  it("refuses what JSON cannot hold, naming it", function()
    assert.has_error(function() json.encode_canonical { f = print } end, "cannot encode a function as JSON")
    assert.has_error(function() json.encode_canonical { 0 / 0 } end, "cannot encode NaN or infinity as JSON")
    assert.has_error(function() json.encode_canonical { math.huge } end, "cannot encode NaN or infinity as JSON")
    assert.has_error(function() json.encode_canonical { [true] = 1 } end, "cannot encode a table key of type boolean")
    local cycle = {}
    cycle.self = cycle
    assert.has_error(function() json.encode_canonical(cycle) end, "cannot encode: nested too deeply (a cycle?)")
    assert.is_nil((json.try_encode { f = print }))
  end)

  it("still works after an error unwound an earlier call", function()
    pcall(json.encode_canonical, { a = string.rep("x", 100000), f = print })
    assert.equal('{"a":1}', json.encode_canonical { a = 1 })
  end)

  it("reuses the text of a frozen table and gives the same bytes as without", function()
    local msg = json.freeze { role = "tool", content = "hi", list = json.array() }
    local body = { messages = { msg, msg } }
    local once = json.encode_canonical(body)
    assert.equal('{"messages":[{"content":"hi","list":[],"role":"tool"},{"content":"hi","list":[],"role":"tool"}]}', once)
    assert.equal(once, json.encode_canonical(body))
    -- the reuse is real: the frozen text is written even after the table
    -- changed (which freeze forbids); unfrozen tables are encoded afresh
    msg.content = "changed"
    assert.equal(once, json.encode_canonical(body))
    assert.matches('"changed"', json.encode(msg))
  end)

  it("encodes a grow-only list as the same bytes, encoding only what was appended", function()
    local list = json.grow_only {}
    local plain = {}
    local body = { messages = list, model = "m" }
    assert.equal('{"messages":[],"model":"m"}', json.encode_canonical(body))
    for i = 1, 5 do
      local m = json.freeze { role = "user", n = i, parts = json.array { "x" .. i, { k = json.array() } } }
      list[#list + 1], plain[#plain + 1] = m, m
      assert.equal(json.encode_canonical { messages = plain, model = "m" }, json.encode_canonical(body))
      -- encoded twice with nothing appended: the same bytes again
      assert.equal(json.encode_canonical { messages = plain, model = "m" }, json.encode_canonical(body))
    end
    -- the reuse is real: an element changed after it was encoded (which
    -- the promise forbids) keeps its old text
    local before = json.encode_canonical(list)
    list[1] = "replaced"
    assert.equal(before, json.encode_canonical(list))
    -- a list that shrank is encoded whole again
    list[5], list[4] = nil, nil
    assert.equal('["replaced",' .. json.encode_canonical(plain[2]) .. "," .. json.encode_canonical(plain[3]) .. "]",
      json.encode_canonical(list))
    -- json.encode (hash order, no memo) is not affected
    assert.matches('"replaced"', json.encode(list))
  end)

  it("lets the last element of a grow-only list be replaced", function()
    local list, plain = json.grow_only {}, {}
    for i = 1, 6 do
      local m = json.freeze { n = i }
      list[#list + 1], plain[#plain + 1] = m, m
      assert.equal(json.encode_canonical(plain), json.encode_canonical(list))
      -- the newest one changes (a merge, a cache breakpoint): seen each time
      local last = { n = i, extra = json.array { i } }
      list[#list], plain[#plain] = last, last
      assert.equal(json.encode_canonical(plain), json.encode_canonical(list))
      list[#list], plain[#plain] = m, m
    end
    assert.equal('[{"n":1},{"n":2},{"n":3},{"n":4},{"n":5},{"n":6}]', json.encode_canonical(list))
  end)
end)

describe("json.encode", function()
  it("follows the same rules in hash order", function()
    assert.equal('{"a":[]}', json.encode { a = json.array() })
    assert.equal("[1,2,3]", json.encode { 1, 2, 3 })
    assert.equal("null", json.encode(nil))
    assert.equal('"x/y"', json.encode("x/y"))
    local v = json.decode(json.encode { b = { 1, { c = "d" } }, a = json.null })
    assert.equal("d", v.b[2].c)
    assert.equal(json.null, v.a)
  end)
end)

describe("json.decode", function()
  it("marks arrays, empty or not, and keeps objects plain", function()
    local v = json.decode('{"a":[],"b":{},"c":[1,[2]]}')
    assert.is_true(json.is_array(v.a))
    assert.is_false(json.is_array(v.b))
    assert.is_true(json.is_array(v.c) and json.is_array(v.c[2]))
    assert.is_nil(getmetatable(v))
    assert.equal('{"a":[],"b":{},"c":[1,[2]]}', json.encode_canonical(v))
  end)

  it("reads whole numbers as integers", function()
    local v = json.decode("[1, 1.0, 1e3, -0, 2.5, 12345678901234567890, 9007199254740993, 1E-2]")
    assert.equal("integer", math.type(v[1]))
    assert.equal("integer", math.type(v[2]))
    assert.equal(1000, v[3]); assert.equal("integer", math.type(v[3]))
    assert.equal("integer", math.type(v[4]))
    assert.equal(2.5, v[5])
    assert.equal("float", math.type(v[6]))
    assert.equal(9007199254740993, v[7])
    assert.equal(0.01, v[8])
  end)

  it("reads escapes, surrogate pairs and raw UTF-8; a lone surrogate stays as its (invalid) 3-byte form", function()
    assert.equal('a"\\/\b\f\n\r\té😀', json.decode([["a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"]]))
    assert.equal("x\xED\xA0\x80y", json.decode([["x\ud800y"]]))
    assert.equal("\xED\xB0\x80", json.decode([["\udc00"]]))
    assert.equal("\0", json.decode([["\u0000"]]))
    assert.equal("é 😀", json.decode('"é 😀"'))
  end)

  it("returns null, booleans and scalars at the top level", function()
    assert.equal(json.null, json.decode(" null "))
    assert.is_true(json.decode("true"))
    assert.is_false(json.decode("false"))
    assert.equal("s", json.decode('"s"'))
  end)

  it("keeps the last of duplicate keys", function()
    assert.equal(2, json.decode('{"a":1,"a":2}').a)
  end)

  it("says where and what is wrong", function()
    local cases = {
      { "", "invalid JSON at character 1: unexpected end of text" },
      { "[1,2,]", "invalid JSON at character 6: unexpected character" },
      { '{"a" 1}', "invalid JSON at character 6: expected ':'" },
      { '{"a":1,}', "invalid JSON at character 8: expected a string key" },
      { "[1 2]", "invalid JSON at character 4: expected ',' or ']'" },
      { '"abc', "invalid JSON at character 1: unterminated string" },
      { '"\\x"', "invalid JSON at character 2: bad escape" },
      { '"\\u12"', "invalid JSON at character 2: bad \\u escape" },
      { "01", "invalid JSON at character 2: trailing characters" },
      { "1.", "invalid JSON at character 1: bad number" },
      { "-", "invalid JSON at character 1: unexpected character" },
      { "nul", "invalid JSON at character 1: unexpected character" },
      { "NaN", "invalid JSON at character 1: unexpected character" },
      { "{} x", "invalid JSON at character 4: trailing characters" },
      { string.rep("[", 201) .. string.rep("]", 201), "invalid JSON at character 201: too deeply nested" },
    }
    for _, c in ipairs(cases) do
      local v, err = json.try_decode(c[1])
      assert.is_nil(v, c[1])
      assert.equal(c[2], err)
    end
    assert.has_error(function() json.decode(42) end, "json.decode expects a string, got number")
  end)

  it("nests up to 200 levels", function()
    local v = json.decode(string.rep("[", 200) .. string.rep("]", 200))
    assert.is_true(json.is_array(v))
  end)

  it("round-trips what encode_canonical writes", function()
    local v = { s = "a\0b\127\u{10FFFF}", n = { 1, 2.25, -3 }, o = { x = json.array(), y = {} }, t = true, z = json.null }
    local s = json.encode_canonical(v)
    assert.equal(s, json.encode_canonical(json.decode(s)))
  end)
end)

describe("json.copy", function()
  it("copies deeply and keeps array marks", function()
    local v = json.decode('{"a":[[]],"b":{"c":1}}')
    local c = json.copy(v)
    assert.are_not.equal(v.a, c.a)
    assert.is_true(json.is_array(c.a[1]))
    assert.equal(json.encode_canonical(v), json.encode_canonical(c))
  end)
end)
