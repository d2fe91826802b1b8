-- The CLI's exit-code table (lash.cli.EXIT): every row produced by a real
-- `lash` invocation, and one mapping from a kind to its code, whether a
-- command returns an outcome or raises an error, for every kind lash's
-- sources can produce. (128 + N, cancelled by a signal, is produced by
-- real signals in tests/integration/test_signals.sh.)
local lash = require "lash"
local cli_mod = require "lash.cli"
local cli = require "helpers.lash_cli"
local fake = require "helpers.fake_server"

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p '" .. p .. "' && chmod 711 '" .. p .. "'"))
  return p
end

local function spec(body)
  return cli.spec(body)
end

local jail = lash.sandbox.probe()
local it_jail = jail and it or pending
local it_fake = fake.available() and it or pending

describe("every exit code in the table comes from a real lash invocation", function()
  local root = tmpdir()
  local ENV = "LASH_SANDBOX_ROOT=" .. root
  local function sb(...)
    return cli.run({ "sandbox", ... }, ENV)
  end
  teardown(function() os.execute("rm -rf '" .. root .. "'") end)

  it("0: success", function()
    local s = spec [[return lash.agent { model = function() return "fine" end }]]
    local out, err, code = cli.run { "run", s, "x" }
    os.remove(s)
    assert.equal(0, code, err)
    assert.matches("fine", out, 1, true)
  end)

  it("1: a tool raised", function()
    local s = spec [[return lash.agent {
      tools = { { name = "boom", handler = function() error("kaput") end } },
      model = function() return { tool_calls = { { name = "boom" } } } end }]]
    local _, err, code = cli.run { "run", s, "x", "--json" }
    os.remove(s)
    assert.equal(1, code, err)
  end)

  it("2: usage", function()
    local _, err, code = cli.run { "run" }
    assert.equal(2, code)
    assert.matches("see 'lash run --help'", err, 1, true)
    _, _, code = cli.run { "sandbox", "frobnicate" }
    assert.equal(2, code)
  end)

  it("3: the sandbox is gone", function()
    local _, err, code = sb("exec", "lb-aaaaaaaaaaaaaaaaaaaa", "--", "true")
    assert.equal(3, code, err)
    assert.matches("gone", err, 1, true)
  end)

  it_fake("4: credentials refused by the model provider", function()
    local srv = fake.start("anthropic", 60)
    srv:script { { status = 401, json = { type = "error",
      error = { type = "authentication_error", message = "invalid x-api-key" } } } }
    local out, err, code = cli.run({ "run", "examples/test_model.lua", "hi", "--json",
      "--model", "anthropic:claude-sonnet-4-6" }, "ANTHROPIC_API_KEY=bad ANTHROPIC_BASE_URL=" .. srv.base)
    srv:stop()
    assert.equal(4, code, err)
    assert.matches('"exit_code":4', out, 1, true)
    assert.matches('"kind":"auth"', out, 1, true)
  end)

  it_jail("5: attach refused (wrong owner)", function()
    local id = assert(sb("create", "--timeout", "60", "--owner", "dag/run1")):match("lb%-%w+")
    local _, err, code = sb("attach", id, "--owner", "dag/other")
    sb("destroy", id)
    assert.equal(5, code, err)
  end)

  it("6: the spec does not load", function()
    local _, err, code = cli.run { "run", "examples/nope.lua", "x" }
    assert.equal(6, code, err)
  end)

  it_fake("7: the provider failed", function()
    local srv = fake.start("anthropic", 60)
    srv:script { { status = 400, json = { type = "error",
      error = { type = "invalid_request_error", message = "bad request" } } } }
    local out, err, code = cli.run({ "run", "examples/test_model.lua", "hi", "--json",
      "--model", "anthropic:claude-sonnet-4-6" }, "ANTHROPIC_API_KEY=k ANTHROPIC_BASE_URL=" .. srv.base)
    srv:stop()
    assert.equal(7, code, err)
    assert.matches('"exit_code":7', out, 1, true)
  end)

  it("8: a limit was reached", function()
    local s = spec [[return lash.agent {
      tools = { { name = "again", handler = function() return "more" end } },
      model = function() return { tool_calls = { { name = "again" } } } end }]]
    local _, err, code = cli.run { "run", s, "x", "--max-steps", "2" }
    os.remove(s)
    assert.equal(8, code, err)
  end)

  it("9: stopped for approval", function()
    local s = spec [[return lash.agent {
      tools = { { name = "rm", requires_approval = true, handler = function() return "removed" end } },
      model = function(m) if #m == 1 then return { tool_calls = { { name = "rm" } } } end return "ok" end }]]
    local _, err, code = cli.run { "run", s, "x" }
    os.remove(s)
    assert.equal(9, code, err)
  end)

  it_jail("124, 125 and the command's own code: sandbox exec", function()
    local id = assert(sb("create", "--timeout", "120")):match("lb%-%w+")
    local _, err, code = sb("exec", id, "--timeout", "1", "--", "sleep", "30")
    assert.equal(124, code, err)
    _, err, code = sb("exec", id, "--", "/nonexistent/command")
    assert.equal(125, code, err)
    _, err, code = sb("exec", id, "--", "sh", "-c", "exit 42")
    assert.equal(42, code, err)
    sb("destroy", id)
  end)
end)

describe("the table", function()
  it("reads the same in docs/cli.md and in lash --help", function()
    local f = assert(io.open("docs/cli.md"))
    local readme, inside = {}, false
    for line in f:lines() do
      if line == "| code | meaning |" then inside = true
      elseif inside and line:match("^|") then
        local code, meaning = line:match("^| ([^|]+) | (.+) |$")
        if code and code ~= "---" then readme[#readme + 1] = code .. " " .. meaning end
      elseif inside then break end
    end
    f:close()
    local help = {}
    for code, meaning in cli_mod.exit_codes_text():gmatch("\n  (%S+)%s+([^\n]+)") do
      help[#help + 1] = code .. " " .. meaning
    end
    assert.is_true(#help >= 14)
    assert.same(help, readme)
  end)
end)

describe("one mapping from a kind to its exit code", function()
  -- every kind lash's sources give an error or an outcome, and the row of
  -- the table it must land on; a new kind fails here until it is placed
  local EXPECTED = {
    ok = 0,
    error = 1, tool = 1, sandbox = 1, mcp = 1, acp = 1, io = 1, spawn = 1, deadlock = 1, decode = 1,
    memory = 1, closed = 1, proc = 1, json = 1, cancelled = 1, exit = 1, not_found = 1, store = 1,
    usage = 2,
    unavailable = 3,
    auth = 4,
    refused = 5,
    spec = 6, config = 6, template = 6, arg = 6,
    provider = 7, model = 7, stream = 7, connect = 7, timeout = 7, tls = 7, http = 7, status = 7,
    limit = 8, retries = 8, output = 8, budget = 8,
    approval = 9,
    guardrail = 10, hook = 10,
    timed_out = 124, exec_failed = 125,
  }

  -- the kinds the sources name where they make errors and outcomes
  local function kinds_in_sources()
    local found = {}
    local patterns = {
      'lash%.error%("([%w_]+)"', 'new_error%("([%w_]+)"', 'model_error%("([%w_]+)"',
      '[^%w_]error%("([%w_]+)",', 'kind = "([%w_]+)"',
      'lash_error_push%(L, "([%w_]+)"', 'lash_error_raise%(L, "([%w_]+)"',
      'lash_error_result%(L, "([%w_]+)"', '%*kind = "([%w_]+)"',
    }
    local p = io.popen("ls lua/lash/*.lua lua/lash/*/*.lua src/*/*.c src/*/*/*.c")
    for path in p:lines() do
      local f = assert(io.open(path))
      local text = f:read("a")
      f:close()
      for _, pat in ipairs(patterns) do
        for k in text:gmatch(pat) do found[k] = path end
      end
    end
    p:close()
    for _, k in ipairs { "sandbox", "unavailable", "auth", "refused", "config" } do
      found[k] = "src/4-sandbox/sandbox.h"   -- LASH_SB_* kinds
    end
    return found
  end

  it("places every kind the sources produce on the row the table says", function()
    local found = kinds_in_sources()
    -- kinds that are not errors (file kinds from stat, event kinds)
    local NOT_ERRORS = { file = true, dir = true, symlink = true, other = true, retry = true,
                         elicitation = true, text = true, image = true, document = true,
                         thinking = true, redacted_thinking = true, tool_call = true,
                         tool_result = true, user = true, model_request = true,
                         -- saved sessions' own kinds (what a session records)
                         chat = true, run = true,
                         -- ACP permission options (lash.acp.server)
                         allow_once = true, allow_always = true, reject_once = true }
    local unplaced = {}
    for k, where in pairs(found) do
      if not NOT_ERRORS[k] and EXPECTED[k] == nil then unplaced[#unplaced + 1] = k .. " (" .. where .. ")" end
    end
    table.sort(unplaced)
    assert.same({}, unplaced)
    for k, want in pairs(EXPECTED) do
      assert.equal(want, (cli_mod.exit_code(k)), "kind " .. k)
    end
  end)

  it("maps a returned outcome exactly as a raised error of the same kind", function()
    local seen = {}
    package.preload["lash.commands.zz_exit_probe"] = function()
      return { json_errors = true, main = function(args)
        if args[1] == "raise" then error(lash.error(args[2], "raised " .. args[2]), 0) end
        return { kind = args[2], message = "returned " .. args[2] }
      end }
    end
    local out_w, err_w = cli_mod.out, cli_mod.err
    cli_mod.out = function(...) seen[#seen + 1] = table.concat({ ... }) end
    cli_mod.err = function() end
    local ok, res = pcall(function()
      local codes = {}
      for k, want in pairs(EXPECTED) do
        if k ~= "ok" and k ~= "exit" then
          local r = cli_mod.main { [0] = "lash", "zz_exit_probe", "return", k, "--json" }
          local e = cli_mod.main { [0] = "lash", "zz_exit_probe", "raise", k, "--json" }
          codes[k] = { r, e, want }
        end
      end
      return codes
    end)
    cli_mod.out, cli_mod.err = out_w, err_w
    package.preload["lash.commands.zz_exit_probe"] = nil
    package.loaded["lash.commands.zz_exit_probe"] = nil
    assert.is_true(ok, tostring(res))
    for k, c in pairs(res) do
      assert.equal(c[3], c[1], "returned {kind = '" .. k .. "'}")
      assert.equal(c[3], c[2], "raised lash.error('" .. k .. "')")
    end
    assert.equal(6, res.config[1])   -- was 1 when a returned kind skipped the error table
    local last = seen[#seen]
    assert.matches('"type":"exit"', last, 1, true)
  end)
end)
