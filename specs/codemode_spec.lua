-- Lua code mode (lash.codemode): run_lua runs the model's chunk in the
-- untrusted-spec environment under the C-enforced budgets, with the run's
-- tools as functions. Hostile chunks are stopped with a clear tool error
-- and the run goes on; a chunk calling three tools answers in one turn.
local lash = require "lash"
local json = require "lash.json"
local collector = require("helpers.events").collector
local of_type = require("helpers.events").of_type

local files = { ["a.txt"] = "alpha", ["b.txt"] = "beta", ["c.txt"] = "gamma" }
local read_file = lash.tool { name = "read_file", description = "Read a file.",
  parameters = { type = "object", properties = { path = { type = "string" } }, required = { "path" } },
  handler = function(_, a)
    if not files[a.path] then return nil, "no file " .. a.path end
    return files[a.path]
  end }

-- Run CODE through run_lua once; the model then answers with the result it
-- got. Returns that result part, the run's result and its events.
local function run_code(code, opts, run_opts)
  local got
  local a = lash.agent { tools = { read_file }, capabilities = { lash.code_mode(opts) },
    model = lash.script_model {
      { tool_calls = { { name = "run_lua", args = { code = code }, id = "L" } } },
      function(m) got = m[#m].parts[1] return "after: " .. got.status end } }
  local events, on_event = collector()
  run_opts = run_opts or {}
  run_opts.on_event = on_event
  local res = a:run("go", run_opts)
  return got, res, events
end

local function stopped(code, needle, opts)
  local part, res = run_code(code, opts)
  assert.equal("retry", part.status, "expected the chunk to be stopped: " .. part.content)
  assert.matches(needle, part.content, 1, true)
  -- the run went on and answered
  assert.equal("after: retry", res.output)
  return part.content
end

describe("run_lua", function()
  it("calls three tools in one turn and returns their combined result", function()
    local part, res, events = run_code([[
      local out = {}
      for _, f in ipairs{"a.txt", "b.txt", "c.txt"} do out[#out + 1] = tools.read_file{path = f} end
      return table.concat(out, "+")]])
    assert.equal("ok", part.status)
    assert.equal("alpha+beta+gamma", part.content)
    assert.equal(2, res.usage.requests)
    assert.equal(4, res.usage.tool_calls)
    local inner = {}
    for _, e in ipairs(of_type(events, "tool_result")) do inner[#inner + 1] = e.id .. "=" .. e.content end
    assert.same({ "L.1=alpha", "L.2=beta", "L.3=gamma", "L=alpha+beta+gamma" }, inner)
  end)

  it("returns printed text and the value together, tables as JSON, and a tool's failure as an error", function()
    local part = run_code([[print("hi", 2) local ok, err = pcall(tools.read_file, {path = "zz"}) return {ok = ok, err = err}]])
    local v = json.decode(part.content)
    assert.equal("hi\t2\n", v.output)
    assert.is_false(v.result.ok)
    assert.matches("tools.read_file failed: no file zz", v.result.err, 1, true)
    assert.equal("{}", run_code("local x = 1").content)
  end)

  it("stops a chunk that loops forever, even under pcall", function()
    stopped("while true do end", "Lua instructions")
    stopped("while true do pcall(function() while true do end end) end", "Lua instructions")
    stopped("local co = coroutine.wrap(function() while true do end end) co()", "Lua instructions")
  end)

  it("stops a chunk that allocates without bound, in Lua or in one C call", function()
    stopped("local t = {} for i = 1, 1e9 do t[i] = {i} end", "bytes of memory")
    stopped("return string.rep('x', 2^30)", "bytes of memory")
    stopped("local s = 'x' while true do s = s .. s end", "bytes of memory")
  end)

  it("refuses os, io, debug, load, require and the like, naming them", function()
    stopped("os.execute('touch /tmp/pwned')", "os.execute is not available")
    stopped("return io.open('/etc/passwd'):read('a')", "io.open is not available in run_lua")
    stopped("return debug.getinfo(1)", "debug.getinfo is not available in run_lua")
    stopped("return load('return 1')()", "load is not available in run_lua")
    stopped("return require('lash')", "require is not available in run_lua")
    stopped("return dofile('/etc/passwd')", "dofile is not available in run_lua")
    stopped("return string.dump(print)", "string.dump is not available")
    stopped("collectgarbage('stop')", "collectgarbage is not available")
    stopped("return lash.sandbox", "attempt to index a nil value (global 'lash')")
    assert.is_nil(io.open("/tmp/pwned"))
  end)

  it("stops string-pattern bombs before they run", function()
    stopped("return (('a'):rep(1e5)):find('.-.-.-.-b')", "repetitions")
    stopped("return string.match(string.rep('a', 5e4), '(.-)(.-)(.-)(.-)x')", "repetitions")
  end)

  it("keeps lash's metatables out of reach", function()
    stopped("getmetatable('').__index.rep = nil", "attempt to index a nil value")
    stopped("setmetatable(tools, {})", "this table belongs to lash")
    stopped("local mt = getmetatable(tools); mt.__index = nil", "attempt to index a nil value")
    stopped("string.rep = nil", "read-only")
    -- the host's string library is untouched
    assert.equal("xx", ("x"):rep(2))
  end)

  it("stops a chunk past its run time; a bare yield only lets other tasks run", function()
    stopped("local t = os.clock() while os.clock() - t < 5 do end", "of run time", { seconds = 0.2, instructions = 1e12 })
    local part = run_code("for i = 1, 3 do coroutine.yield(i) end return 'still here'")
    assert.equal("ok", part.status)
    assert.equal("still here", part.content)
  end)

  it("reports a syntax error and an unknown tool", function()
    stopped("return (", "does not compile")
    stopped("return tools.rm{path='/'}", "no such tool in run_lua (callable: read_file)")
    stopped("return tools.run_lua{code = '1'}", "no such tool")
  end)

  it("bounds the tool calls of one chunk", function()
    local msg = stopped("for i = 1, 10 do tools.read_file{path = 'a.txt'} end", "made its 3 tool calls",
                        { max_tool_calls = 3 })
    assert.matches("Tool calls it made before that (3)", msg, 1, true)
  end)

  it("runs the run's hooks on inner calls, and asks no approval it cannot get", function()
    local part = run_code("return tools.read_file{path = 'a.txt'}", nil, { hooks = { before_tool_call = function(_, c)
      if c.name == "read_file" then return "not from code" end
    end } })
    assert.equal("retry", part.status)
    assert.matches("tools.read_file was denied: not from code", part.content, 1, true)
  end)

  it("is there for an untrusted spec, and its chunk stays inside the same walls", function()
    local text = [[return lash.agent{ capabilities = { lash.code_mode{} },
      model = lash.script_model{ {tool_calls = {{name = 'run_lua', args = {code = 'return os.getenv("HOME")'}}}},
        function(m) return m[#m].parts[1].content end } }]]
    local agent = assert(require("lash.spec").load_string(text, "evil.lua"))
    assert.matches("os.getenv is not available", agent:run("go").output, 1, true)
  end)
end)
