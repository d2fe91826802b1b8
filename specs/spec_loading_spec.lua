-- Agent specs: Lua specs in a safe environment under a budget (and what a
-- malicious one gets), YAML and JSON specs in the reference's shape,
-- capability entries, PrefixTools nesting, registered capability types,
-- and `lash run` with each format.
local lash = require "lash"
local spec = require "lash.spec"
local fakes = require "helpers.fake_sandbox"
local cli = require "helpers.lash_cli"

-- A fresh path ending in .ext (os.tmpname creates its file: remove it, or
-- every call leaves an empty file in /tmp).
local function tmppath(ext)
  local base = os.tmpname()
  os.remove(base)
  return base .. "." .. ext
end

local function write(ext, text)
  local path = tmppath(ext)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

local function load_fails(ext, text, opts)
  local path = write(ext, text)
  local agent, err = lash.load_spec(path, opts)
  os.remove(path)
  assert.is_nil(agent, "expected the spec to be refused")
  return err, path
end

local function load_ok(ext, text, opts)
  local path = write(ext, text)
  local agent, err = lash.load_spec(path, opts)
  os.remove(path)
  assert(agent, err)
  return agent
end

local function tool_names(cap)
  local names = {}
  local inst = cap:for_run({})
  for _, ts in ipairs(inst:get_toolsets()) do
    for _, t in ipairs(ts:get_tools({})) do names[#names + 1] = t.name end
  end
  return names
end

local SMALL = { instructions = 200000, memory = 8 * 1024 * 1024 }

-- ModalSandbox specs need a backend named modal; the real one is built in
-- once its issue lands, until then a fake stands in for construction.
local has_modal = false
for _, b in ipairs(lash.sandbox.backends()) do
  if b == "modal" then has_modal = true end
end
if not has_modal then fakes.new { name = "modal", create_options = { "image" } } end

describe("Lua specs", function()
  it("load a file that returns lash.agent{...}", function()
    local agent = load_ok("lua", [[
      local lash = require "lash"
      return lash.agent { name = "box", model = "test", capabilities = { lash.sandbox_capability { sandbox_timeout = 600 } } }
    ]])
    assert.equal("box", agent.name)
    assert.equal(600, agent.capabilities[1].opts.sandbox_timeout)
  end)

  it("load a plain table, with capability entries by name", function()
    local agent = load_ok("lua", [[
      return { model = "test", capabilities = { "Sandbox", { LocalSandbox = { sandbox_timeout = 600 } },
                                               { PrefixTools = { prefix = "b", capability = "Sandbox" } } } }
    ]], { check_tools = false })  -- the shape only: these tools would conflict
    assert.equal("owned", agent.capabilities[1].mode)
    assert.equal(600, agent.capabilities[2].opts.sandbox_timeout)
    assert.equal("b_run_command", tool_names(agent.capabilities[3])[1])
  end)

  it("may build a shared session in Lua (only files cannot)", function()
    local f = fakes.new {}
    local code = string.format([[
      return lash.agent { model = "test", capabilities = {
        lash.sandbox_capability { session = lash.sandbox.session { backend = %q } } } }
    ]], f.name)
    -- a session is a live sandbox: only a trusted spec may open one
    assert.matches("lash.sandbox is not available to a spec loaded without --trust", load_fails("lua", code), 1, true)
    local agent = load_ok("lua", code, { trust = true })
    assert.equal("shared", agent.capabilities[1].mode)
  end)

  it("refuse io, os.execute, require, debug and friends, each with the reason", function()
    for _, code in ipairs {
      "os.execute('touch /tmp/pwned')", "io.open('/etc/passwd')", "require 'socket'", "debug.getinfo(1)",
      "os.getenv('HOME')", "os.exit(1)", "dofile('/etc/passwd')", "collectgarbage('stop')", "package.loadlib('x')",
      "string.dump(print)",
    } do
      local err, path = load_fails("lua", code .. "\nreturn {}")
      assert.matches(path .. ":1: ", err, 1, true)
      assert.matches("is not available to a spec loaded without --trust", err, 1, true)
    end
    local err = load_fails("lua", "os.execute('touch /tmp/pwned')\nreturn {}")
    assert.matches("os.execute is not available to a spec loaded without --trust (a spec gets the lash API and the "
      .. "safe standard library). Pass --trust (or trust = true) to load it with the full standard library.", err,
      1, true)
  end)

  it("say a spec path that is a directory cannot be read", function()
    local dir = tmppath("lua")
    assert(os.execute("mkdir '" .. dir .. "'"))
    local agent, err = lash.load_spec(dir)
    os.execute("rmdir '" .. dir .. "'")
    assert.is_nil(agent)
    assert.equal("cannot read " .. dir .. ": Is a directory", err)
  end)

  it("load text only (no binary chunks), and load() inside stays in the spec's world", function()
    local path = tmppath("lua")
    local f = assert(io.open(path, "wb"))
    f:write(string.dump(function() return {} end))
    f:close()
    local agent, err = lash.load_spec(path)
    os.remove(path)
    assert.is_nil(agent)
    assert.matches("binary", err)
    local err2 = load_fails("lua", "local f = load('return io.open') ; f()('/etc/passwd') ; return {}")
    assert.matches("io.open is not available", err2, 1, true)
    assert.matches("only text chunks", load_fails("lua", "load('x', 'x', 'b')\nreturn {}"), 1, true)
  end)

  it("cannot change the lash API or the strings' methods", function()
    assert.matches("lash is read-only in a spec (tried to set lash.agent)", load_fails("lua", "lash.agent = nil\nreturn {}"), 1, true)
    local agent = load_ok("lua", [[
      local mt = getmetatable("")
      assert(mt == nil, "the string metatable must not be reachable")
      return { model = "test" }
    ]])
    assert.is_not_nil(agent)
    assert.equal("xxx", ("x"):rep(3))
  end)

  it("stop an endless loop at the instruction budget", function()
    local err, path = load_fails("lua", "while true do end", { budget = SMALL })
    assert.equal(path .. ": the spec ran past its budget of 200000 Lua instructions while loading (an endless "
      .. "loop?). A spec should only build the agent; pass --trust to load it without limits.", err)
  end)

  it("stop an endless loop with the default budget", function()
    -- the message names the budget that stopped it; how long that takes is
    -- the machine's business (no timed assertions: valgrind took over 60 s)
    local err = load_fails("lua", "local n = 0 while true do n = n + 1 end")
    assert.matches("ran past its budget of 10000000 Lua instructions", err, 1, true)
  end)

  it("stop loops that catch the budget error, and loops in coroutines", function()
    for _, code in ipairs {
      "while true do pcall(function() while true do end end) end",
      "local co = coroutine.wrap(function() while true do end end) co()",
      "local co = coroutine.create(function() while true do end end) while true do coroutine.resume(co) end",
    } do
      assert.matches("ran past its budget", load_fails("lua", code, { budget = SMALL }), 1, true)
    end
  end)

  it("stop memory bombs", function()
    for _, code in ipairs {
      "local s = 'x' while true do s = s .. s end",
      "local t = {} while true do t[#t + 1] = {} end",
      "local t = {} for i = 1, 1e9 do t[i] = ('y'):rep(1000) .. i end",
      "return string.rep('x', 1e9)",
      "return ('x'):rep(5e8, ',')",
      "return table.concat(setmetatable({}, {__index = function() return ('x'):rep(1e6) end}), '', 1, 1e4)",
      "return (('x'):rep(1e6)):gsub('x', 'yyyyyyyy')",
    } do
      local err = load_fails("lua", code, { budget = { instructions = 1e9, memory = 8 * 1024 * 1024 } })
      assert.matches("of memory while loading (a runaway allocation?)", err, 1, true)
    end
    assert.equal("zz", ("z"):rep(2))
  end)

  it("load with the full standard library and no budget under trust", function()
    local agent = load_ok("lua", "local home = os.getenv('HOME') return { model = 'test', name = type(home) }",
      { trust = true })
    assert.equal("string", agent.name)
  end)

  it("report errors with the file and line", function()
    local err, path = load_fails("lua", "return {\n model = 'test',,\n}")
    assert.matches(path .. ":2:", err, 1, true)
    err, path = load_fails("lua", "error('nope')")
    assert.equal(path .. ":1: nope", err)
    err, path = load_fails("lua", "return 42")
    assert.equal(path .. ": the spec must return lash.agent{...} or a table in the same shape, got number", err)
    err = load_fails("lua", "return { capabilities = { 'Nope' } }")
    assert.matches("capabilities[1]: Capability 'Nope' is not a known capability type.", err, 1, true)
  end)

  it("point at the spec, never into lash's own files", function()
    -- a tail call (return lash.agent{...}) leaves no line to name: the file
    local err, path = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = 'test',\n"
      .. "  limits = { max_step = 5 } }\n")
    assert.equal(path .. ": lash.agent: unknown limit 'max_step' (known: ", err:sub(1, #path + 47))
    assert.matches("max_steps", err, 1, true)
    err, path = load_fails("lua", "local lash = require 'lash'\nlocal a = lash.agent { model = 'test',\n"
      .. "  limits = { max_step = 5 } }\nreturn a\n")
    assert.matches("^" .. path:gsub("%p", "%%%0") .. ":2: lash.agent: unknown limit 'max_step'", err)
    err = load_fails("yaml", "model: test\nlimits: {max_step: 5}\n")
    assert.is_nil(err:find("%.lua:%d+:"), err)
  end)

  it("name the lash function a misspelt one meant", function()
    local err, path = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = "
      .. "lash.script_modle { 'hi' } }\n")
    assert.equal(path .. ":2: attempt to call a nil value (field 'script_modle'): lash has no script_modle; did you "
      .. "mean lash.script_model?", err)
    err = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = lash.script_modle { 'hi' } }\n",
                     { trust = true })
    assert.matches("did you mean lash.script_model?", err, 1, true)
  end)

  it("refuse one tool, toolset or capability where a list belongs", function()
    local err = load_fails("lua", "local lash = require 'lash'\nlocal shout = lash.tool { name = 'shout', "
      .. "handler = function() return 'x' end }\nreturn lash.agent { model = 'test', tools = shout }\n")
    assert.matches("field 'tools' must be a list, got the tool 'shout': write tools = { ... } around it", err, 1, true)
    err = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = 'test', "
      .. "capabilities = lash.sandbox_capability {} }\n")
    assert.matches("field 'capabilities' must be a list, got one capability rather than a list", err, 1, true)
  end)

  it("say what a model must be, and quote strings where numbers belong", function()
    local err = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = 42 }\n")
    assert.matches("field 'model' must be a model name such as \"anthropic:claude-sonnet-4-6\" or \"test\" (or a "
      .. "function(messages, info)), got 42", err, 1, true)
    err = load_fails("lua", "local lash = require 'lash'\nreturn lash.agent { model = 'test', limits = { "
      .. "max_steps = '5' } }\n")
    assert.matches("limit 'max_steps' must be an integer >= 0 (or false for none), got \"5\"", err, 1, true)
  end)
end)

describe("YAML specs", function()
  it("load the reference's shape", function()
    local agent = load_ok("yaml", [[
model: anthropic:claude-sonnet-4-6
name: coder
instructions: Keep answers short.
retries: 2
model_settings: {max_tokens: 1000}
metadata: {team: platform}
capabilities:
  - Sandbox
  - LocalSandbox: {sandbox_timeout: 600, workdir: /work}
  - ModalSandbox: {image: python:3.12-slim, sandbox_timeout: 600}
  - ModalSandbox: python:3.11-slim
  - PrefixTools: {prefix: box, capability: {LocalSandbox: {default_command_timeout: 30}}}
]], { check_tools = false })  -- the shape only: these tools would conflict
    assert.equal("coder", agent.name)
    assert.equal("anthropic:claude-sonnet-4-6", agent.model)
    assert.equal(2, agent.retries)
    local caps = agent.capabilities
    assert.equal("local", caps[1].backend)
    assert.equal(600, caps[2].opts.sandbox_timeout)
    assert.equal("/work", caps[2].opts.workdir)
    assert.equal("modal", caps[3].backend)
    assert.equal("python:3.12-slim", caps[3].opts.image)
    assert.equal("python:3.11-slim", caps[4].opts.image)
    assert.same({ "box_run_command", "box_read_file", "box_write_file", "box_list_directory" }, tool_names(caps[5]))
  end)

  it("refuse two capabilities that define the same tools at load, naming both and the YAML fix", function()
    local err, path = load_fails("yaml", "model: test\ncapabilities:\n  - Sandbox: {}\n  - LocalSandbox: {}\n")
    assert.equal(path .. ": tool names conflict: capabilities[2] (LocalSandbox) defines tools that capabilities[1] "
      .. "(Sandbox) already defines: 'run_command', 'read_file', 'write_file', 'list_directory'. Give one of them "
      .. "a prefix: `- PrefixTools: {prefix: box, capability: {LocalSandbox: {}}}` (an MCP server takes "
      .. "`tool_prefix: box`), or drop one.", err:gsub("'edit_file'.-'list_directory'", "'list_directory'"))
    -- the fix works
    load_ok("yaml", "model: test\ncapabilities:\n  - Sandbox: {}\n  - PrefixTools: {prefix: box, capability: "
      .. "{LocalSandbox: {}}}\n")
    err = load_fails("json", '{"model": "test", "capabilities": ["Sandbox", "Sandbox"]}')
    assert.matches('{"PrefixTools": {"prefix": "box", "capability": {"LocalSandbox": {}}}}', err, 1, true)
    err = load_fails("lua", "local lash = require 'lash'\nlocal t = lash.tool { name = 'read_file', handler = "
      .. "function() return '' end }\nreturn lash.agent { model = 'test', tools = { t }, capabilities = { "
      .. "lash.sandbox_capability {} } }\n")
    assert.matches("capabilities[1] (", err, 1, true)
    assert.matches("already defines: 'read_file'. Give one of them a prefix (lash.prefix_tools", err, 1, true)
  end)

  it("name the valid capability types for an unknown one", function()
    local err, path = load_fails("yaml", "capabilities: [Sandboxx]\n")
    assert.equal(path .. ": capabilities[1]: Capability 'Sandboxx' is not a known capability type. Valid "
      .. "choices: [CodeMode, EditorTools, InputGuardrail, LocalSandbox, MCPServerStdio, MCPServerStreamableHTTP, ModalSandbox, "
      .. "OutputGuardrail, PrefixTools, Sandbox, SubAgents]. Register a custom one from Lua with "
      .. "lash.register_capability(name, constructor).", err)
  end)

  it("refuse unknown options, and session", function()
    local err, path = load_fails("yaml", "capabilities:\n  - Sandbox: {colour: red}\n")
    assert.matches(path .. ": capabilities[1]: Failed to instantiate capability 'Sandbox': unknown option colour",
      err, 1, true)
    err = load_fails("yaml", "capabilities:\n  - Sandbox: {session: abc}\n")
    assert.matches("Failed to instantiate capability 'Sandbox': Sandbox cannot be built from a spec file with "
      .. "`session`: it takes a live, open lash.sandbox session object. Set `sandbox_id` to attach to an existing "
      .. "sandbox, or build the capability in Lua (lash.sandbox_capability{session = ...}) to share a session.",
      err, 1, true)
    err = load_fails("yaml", "capabilities:\n  - LocalSandbox: {backend: modal}\n")
    assert.matches("LocalSandbox is the Sandbox capability with backend 'local'", err, 1, true)
    err = load_fails("yaml", "capabilities:\n  - Sandbox: {sandbox_id: sb-1, sandbox_timeout: 600}\n")
    assert.matches("sandbox_timeout only apply when creating a sandbox", err, 1, true)
  end)

  it("refuse entries with several keys, unknown keys, and unsupported ones", function()
    local err = load_fails("yaml", "capabilities:\n  - {Sandbox: {}, LocalSandbox: {}}\n")
    assert.matches("capabilities[1]: a capability entry is a name, or a mapping with exactly one key (the name), "
      .. "got 2 keys", err, 1, true)
    local path
    err, path = load_fails("yaml", "model: test\ncolour: red\n")
    assert.equal(path .. ": unknown key 'colour' (known keys: capabilities, description, handoff_description, "
      .. "handoffs, instructions, limits, metadata, model, model_settings, name, output_schema, retries, stream, "
      .. "tool_timeout, values)", err)
    err = load_fails("yaml", "model: test\noutput_schema: {type: objet}\n")
    assert.matches("objet", err, 1, true)
    -- a valid one is the agent's output: the test model answers a value of it
    local agent = load_ok("yaml", "model: test\noutput_schema:\n  type: object\n  properties: {n: {type: integer}}\n"
      .. "  required: [n]\n")
    assert.same({ n = 0 }, agent:run("go").output)
    err = load_fails("yaml", "model: [1, 2]\n")
    assert.matches("model must be a string", err, 1, true)
    err = load_fails("yaml", "model: test\n  bad: indent\n")
    assert.matches("not valid YAML", err, 1, true)
  end)

  it("drop nulls", function()
    local agent = load_ok("yml", "model: test\ndescription: ~\ncapabilities:\n  - Sandbox: {workdir: ~}\n")
    assert.is_nil(agent.capabilities[1].opts.workdir)
  end)
end)

describe("JSON specs", function()
  it("load the same shape", function()
    local agent = load_ok("json", [[{
      "model": "test", "instructions": ["One.", "Two."],
      "capabilities": ["Sandbox", {"PrefixTools": {"prefix": "x", "capability": {"Sandbox": "local"}}},
                       {"Sandbox": {"max_output_lines": 10, "instructions": null}}]
    }]], { check_tools = false })  -- the shape only: these tools would conflict
    assert.same({ "One.", "Two." }, agent.instructions)
    assert.equal("x_list_directory", tool_names(agent.capabilities[2])[4])
    assert.equal(10, agent.capabilities[3].opts.max_output_lines)
  end)

  it("refuse what is not JSON or not an object", function()
    assert.matches("not valid JSON", load_fails("json", "{model: test}"), 1, true)
    assert.matches("the spec must be a mapping", load_fails("json", "[1, 2]"), 1, true)
    assert.matches("unknown spec format", load_fails("txt", "x"), 1, true)
  end)

  it("run with a model given at run time, against a backend named in the file", function()
    local f = fakes.new {}
    local agent = load_ok("json", '{"capabilities": [{"Sandbox": "' .. f.name .. '"}]}')
    local res = agent:run("go", { model = lash.script_model {
      { tool_calls = { { name = "write_file", args = { path = "/a", content = "x" } } } },
      function(m) return m[#m].parts[1].content end,
    } })
    assert.equal("Wrote 1 byte to '/a'.", res.output)
    assert.same(f.created, f.destroyed)
  end)
end)

describe("spec strings (spec.load_string)", function()
  it("run a Lua spec in the same safe environment as a file, naming the string", function()
    local agent = assert(spec.load_string("return lash.agent { name = 'str', model = 'test' }", "mine"))
    assert.equal("str", agent.name)
    for _, code in ipairs { "os.execute('touch /tmp/pwned')", "io.open('/etc/passwd')", "require 'socket'",
                            "debug.getinfo(1)", "os.getenv('HOME')", "load('x', 'x', 'b')" } do
      local a, err = spec.load_string(code .. "\nreturn {}", "mine")
      assert.is_nil(a, code)
      assert.matches("^mine:1: ", err)
    end
    local _, err = spec.load_string("os.execute('true') return {}", "user")
    assert.matches("os.execute is not available to a spec loaded without --trust", err, 1, true)
    assert.equal("string", spec.load_string("return { model = 'test', name = type(os.getenv('HOME')) }", "host",
      { trust = true }).name)
  end)

  it("keep to the instruction and memory budgets", function()
    local _, err = spec.load_string("while true do end", "loop", { budget = SMALL })
    assert.equal("loop: the spec ran past its budget of 200000 Lua instructions while loading (an endless "
      .. "loop?). A spec should only build the agent; pass --trust to load it without limits.", err)
    _, err = spec.load_string("local n = 0 while true do n = n + 1 end")
    assert.matches("^spec: the spec ran past its budget of 10000000 Lua instructions", err)
    _, err = spec.load_string("local s = 'x' while true do s = s .. s end", "bomb",
      { budget = { instructions = 1e9, memory = 8 * 1024 * 1024 } })
    assert.matches("^bomb: the spec used more than .* of memory while loading %(a runaway allocation%?%)", err)
  end)

  it("choose YAML or JSON by the name's extension, or JSON by a leading {", function()
    assert.equal("j", assert(spec.load_string('  {"model": "test", "name": "j", "description": null}')).name)
    assert.equal("n", assert(spec.load_string('{"model": "test", "name": "n"}', "agent.json")).name)
    assert.equal("x", assert(spec.load_string('return { model = "test", name = "x" }', "agent.json",
      { format = "lua" })).name)
    local _, err = spec.load_string("{model: test}", "agent.json")
    assert.matches("^agent.json: not valid JSON", err)
    _, err = spec.load_string('{"modle": "test"}')
    assert.matches("^spec: unknown key 'modle'", err)
    _, err = spec.load_string("{ model = 'test' }", "t.lua")
    assert.matches("^t.lua:1: ", err)
    -- YAML is lash's own loader (lash.core.yaml): always there
    assert.equal("y", assert(spec.load_string("model: test\nname: y\n", "agent.yaml")).name)
    assert.equal("local", assert(spec.load_string("capabilities: [Sandbox]\n", "a.YML")).capabilities[1].backend)
    _, err = spec.load_string("model: test\n  bad: indent\n", "agent.yml")
    assert.matches("^agent.yml: not valid YAML: line 2", err)
  end)

  it("refuse misuse", function()
    assert.has_error(function() spec.load_string(nil) end, "lash.spec.load_string: text must be a string, got nil")
    assert.has_error(function() spec.load_string("x", 3) end,
      "lash.spec.load_string: name must be a string (or nil), got number")
    assert.has_error(function() spec.load_string("x", "x", "t") end,
      "lash.spec.load_string: options must be a table, got string")
    assert.has_error(function() spec.load_string("x", "x", { format = "toml" }) end,
      'lash.spec.load_string: format must be "lua", "yaml" or "json", got toml')
  end)

  it("take the attach and backend options like files", function()
    local a = assert(spec.load_string('{"capabilities": ["Sandbox"]}', "s.yaml", { format = "json", attach = "lb-x",
                                       owner = "o" }))
    assert.equal("lb-x", a.capabilities[1].opts.attach_to)
    local _, err = spec.load_string('{"model": "test"}', "s", { owner = "o" })
    assert.equal("owner only applies together with attach (--owner needs --attach)", err)
  end)
end)

describe("registered capability types", function()
  after_each(function()
    spec.unregister_capability("Notes")
  end)

  it("are usable by name, get their argument, and are refused twice", function()
    local seen
    lash.register_capability("Notes", function(arg, info)
      seen = { arg = arg, info = info }
      if type(arg) == "table" and arg.colour then error("Notes has no option colour", 0) end
      return { name = "notes", instructions = "Take notes." }
    end)
    local agent = load_ok("yaml", "capabilities:\n  - Notes: {topic: x}\n  - Notes\n")
    assert.equal("notes", agent.capabilities[1].name)
    assert.is_nil(seen.arg)
    assert.is_true(seen.info.from_file)
    local err = load_fails("yaml", "capabilities:\n  - Notes: {colour: red}\n")
    assert.matches("Failed to instantiate capability 'Notes': Notes has no option colour", err, 1, true)
    assert.matches("Valid choices: [CodeMode, EditorTools, InputGuardrail, LocalSandbox, MCPServerStdio, MCPServerStreamableHTTP, "
      .. "ModalSandbox, Notes, OutputGuardrail, PrefixTools, Sandbox, SubAgents]",
      load_fails("yaml", "capabilities: [Nope]\n"), 1, true)
    assert.has_error(function() lash.register_capability("Notes", function() end) end,
      "lash.register_capability: a capability type named 'Notes' is already registered")
    assert.has_error(function() lash.register_capability("Sandbox", function() end) end,
      "lash.register_capability: a capability type named 'Sandbox' is already registered")
    assert.has_error(function() lash.register_capability("bad name", function() end) end)
  end)
end)

describe("lash run with each format", function()
  local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }

  it("loads YAML and JSON specs and runs them (test model, real local sandbox)", function()
    if not jail_ok then
      pending("needs the local sandbox: " .. tostring(jail_why))
      return
    end
    local root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'"))
    for _, s in ipairs {
      -- the state root is the trusted side's to choose (an untrusted spec
      -- may not set it), here through the environment
      { "yaml", "model: test\ncapabilities:\n  - Sandbox: {sandbox_timeout: 60}\n" },
      { "json", '{"model": "test", "capabilities": [{"LocalSandbox": {"sandbox_timeout": 60}}]}' },
    } do
      local path = write(s[1], s[2])
      local out, err, code = cli.run({ "run", path, "hi", "--no-stream" }, "LASH_SANDBOX_ROOT=" .. cli.quote(root))
      os.remove(path)
      -- the test model calls every tool at once with generated arguments:
      -- read_file 'a' may run before write_file 'a'; retried with the same
      -- arguments it finds the file, and the run finishes
      assert.matches('\n▸ write_file {', out, 1, true)
      assert.matches("  ✓ Wrote 1 byte to 'a'.\n", out, 1, true)
      assert.matches("▸ run_command {\"command\":\"a\"}", out, 1, true)
      err = err:gsub("lash: warning: local sandboxes get no disk quota here:[^\n]*\n", "")
      assert.equal(0, code, err)
      assert.matches('"read_file":"a"', out, 1, true)
      assert.same({}, lash.sandbox.list { state_root = root })
    end
    os.execute("rm -rf '" .. root .. "'")
  end)

  it("refuses an unsafe Lua spec unless --trust is given", function()
    local path = write("lua", "local h = os.getenv('HOME')\nreturn { model = 'test', name = type(h) }\n")
    local _, err, code = cli.run { "run", path, "hi" }
    assert.equal(6, code)  -- a spec error
    assert.matches("os.getenv is not available to a spec loaded without --trust", err, 1, true)
    local out, err2, code2 = cli.run { "run", path, "hi", "--trust", "--no-stream" }
    os.remove(path)
    assert.equal(0, code2, err2)
    assert.matches("string", out, 1, true)
  end)

  it("stops a runaway spec with a clear error", function()
    local path = write("lua", "local t = {} while true do t[#t+1] = ('x'):rep(4096) end")
    local _, err, code = cli.run { "run", path, "hi" }
    os.remove(path)
    assert.equal(6, code)
    assert.matches("of memory while loading (a runaway allocation?)", err, 1, true)
  end)
end)

describe("the examples", function()
  it("load without --trust", function()
    for _, path in ipairs { "examples/sandbox_coder.lua", "examples/sandbox_agent.yaml",
                            "examples/pipeline/analyse.lua", "examples/hello_tools.lua",
                            "examples/test_model.lua" } do
      local agent, err = lash.load_spec(path)
      assert(agent, err)
    end
    local agent = lash.load_spec("examples/sandbox_agent.yaml")
    assert.equal("anthropic:claude-sonnet-4-6", agent.model)
    assert.equal(600, agent.capabilities[1].opts.sandbox_timeout)
    local attached = assert(lash.load_spec("examples/pipeline/analyse.lua", { attach = "lb-x", owner = "o" }))
    assert.equal("lb-x", attached.capabilities[1].opts.attach_to)
    -- the standalone example attaches too: its sandbox_timeout is dropped
    attached = assert(lash.load_spec("examples/sandbox_agent.yaml", { attach = "lb-x", owner = "o" }))
    assert.equal("lb-x", attached.capabilities[1].opts.attach_to)
    assert.is_nil(attached.capabilities[1].given.sandbox_timeout)
  end)
end)
