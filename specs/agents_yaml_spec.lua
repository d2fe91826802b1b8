-- Sub-agents, handoffs, code mode and guardrails from YAML specs (the
-- names pydantic-ai-harness uses: SubAgents, CodeMode, InputGuardrail,
-- OutputGuardrail) and through `lash run`.
local spec = require "lash.spec"
local cli = require "helpers.lash_cli"
local json = require "lash.json"

local function load(text, opts)
  local a, err = spec.load_string(text, "team.yaml", opts)
  assert(a, err)
  return a
end

local function refused(text, opts)
  local a, err = spec.load_string(text, "team.yaml", opts)
  assert.is_nil(a, "expected the spec to be refused")
  return err
end

local function results_of(messages)
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" and m.parts[1] and m.parts[1].type == "tool_result" then return m.parts end
  end
end

describe("YAML specs", function()
  it("SubAgents gives one delegate_task tool over named inline agents, listed in the instructions", function()
    local a = load [[
name: lead
model: test
capabilities:
  - SubAgents:
      agents:
        - name: researcher
          description: Finds things out.
          model: test
          instructions: Research.
          max_calls: 1
        - name: writer
          model: test
]]
    local res = a:run("go")
    assert.equal('{"delegate_task":"success (no tool calls)"}', res.output)
    local part = results_of(res.messages)[1]
    assert.equal("researcher", part.subagent.agent)
    assert.equal(3, res.usage.requests)
    -- a second call of researcher past max_calls is answered, not run
    local tool
    for _, c in ipairs(a.capabilities) do
      for _, ts in ipairs(c:get_toolsets()) do tool = ts.tools[1] end
    end
    assert.equal("delegate_task", tool.name)
    assert.same({ "researcher", "writer" }, tool.parameters.properties.agent_name.enum)
  end)

  it("says where a Lua tool goes when a YAML or JSON spec names tools", function()
    for _, k in ipairs { "tools", "toolsets" } do
      local err = refused("model: test\n" .. k .. ":\n  - shout\n")
      assert.matches("team.yaml: '" .. k .. "' has no form here: a YAML or JSON spec is data and carries no Lua code",
        err, 1, true)
      assert.matches("MCPServerStdio", err, 1, true)
      assert.matches("write the spec in Lua: return lash.agent {", err, 1, true)
    end
  end)

  it("refuses sub-agents without a name and unknown delegate options", function()
    assert.matches("give the sub%-agent a name", refused "capabilities:\n  - SubAgents: {agents: [{model: test}]}\n")
    assert.matches("unknown key 'colour'", refused "capabilities:\n  - SubAgents: {agents: [{name: a, colour: red}]}\n")
  end)

  it("handoffs name inline agents or agents of the same spec, so two agents can hand back and forth", function()
    local a = load [[
name: triage
model: test
handoffs:
  - name: billing
    handoff_description: Invoices.
    model: test
    handoffs: [triage]
  - refunds
  - name: refunds
    tool_name: go_refunds
    model: test
]]
    local billing = a.handoffs[1]
    assert.equal("billing", billing.name)
    assert.equal(a, billing.handoffs[1])
    assert.equal("refunds", a.handoffs[2].name)
    assert.equal("go_refunds", a.handoffs[3].tool_name)
    assert.matches("no agent named 'nobody' in this spec %(agents with a name: triage%)",
      refused "name: triage\nmodel: test\nhandoffs: [nobody]\n")
  end)

  it("CodeMode offers run_lua; a spec without trust cannot raise its budgets", function()
    local a = load "model: test\ncapabilities:\n  - CodeMode: {max_tool_calls: 5}\n"
    local res = a:run("go", { model = require("lash").script_model {
      { tool_calls = { { name = "run_lua", args = { code = "return 6 * 7" } } } },
      function(m) return results_of(m)[1].content end } })
    assert.equal("42", res.output)
    assert.matches("instructions = 1000000000000 is more than a spec loaded without %-%-trust may give its code",
      refused "model: test\ncapabilities:\n  - CodeMode: {instructions: 1000000000000}\n")
    assert.is_not_nil(spec.load_string("model: test\ncapabilities:\n  - CodeMode: {instructions: 1000000000000}\n",
      "team.yaml", { trust = true }))
  end)

  it("InputGuardrail and OutputGuardrail: blocked keywords and a guardrail agent", function()
    local a = load [[
model: test
capabilities:
  - InputGuardrail: {blocked_keywords: [password, "api key"]}
  - OutputGuardrail:
      name: reviewer
      agent: {name: reviewer, model: test}
]]
    local ok, err = pcall(a.run, a, "here is my API KEY")
    assert.is_false(ok)
    assert.equal("guardrail", err.kind)
    assert.matches("blocked keyword 'api key'", err.message, 1, true)
    -- the reviewer (test model: a value of the verdict schema) lets it pass
    local res = a:run("hello")
    assert.equal("success (no tool calls)", res.output)
    assert.matches("give blocked_keywords, agent or both", refused "capabilities:\n  - InputGuardrail: {}\n")
  end)
end)

describe("lash run", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. cli.quote(dir))
  end)
  teardown(function() os.execute("rm -rf " .. cli.quote(dir)) end)

  local function write(name, text)
    local f = assert(io.open(dir .. "/" .. name, "w"))
    f:write(text)
    f:close()
    return dir .. "/" .. name
  end

  it("shows a sub-agent's events indented under the call, and --json gives them with their path", function()
    local path = write("team.yaml", [[
name: lead
model: test
capabilities:
  - SubAgents: {agents: [{name: researcher, model: test}]}
]])
    local out, err, code = cli.run { "run", path, "go", "--no-save" }
    assert.equal(0, code, err)
    assert.matches("\n  researcher#[%w_]+ ↳ researcher · test\n", out)
    assert.matches("\n  researcher#[%w_]+ ■ complete · 1 request", out)
    out, err, code = cli.run { "run", path, "go", "--no-save", "--json" }
    assert.equal(0, code, err)
    local paths = 0
    for line in out:gmatch("[^\n]+") do
      local ev = json.decode(line)
      if ev.path then
        paths = paths + 1
        assert.equal("lead", ev.path[1])
      end
    end
    assert.is_true(paths >= 4)
  end)

  it("saves a sub-agent's transcript with the call's result in the session", function()
    local path = write("saved.yaml", "name: lead\nmodel: test\ncapabilities:\n  - SubAgents: {agents: [{name: helper, model: test}]}\n")
    local env = "XDG_STATE_HOME=" .. cli.quote(dir .. "/state") .. " LASH_SESSIONS_DB="
      .. cli.quote(dir .. "/sessions.db")
    local _, err, code = cli.run({ "run", path, "go" }, env)
    assert.equal(0, code, err)
    local out
    out, err, code = cli.run({ "sessions", "list", "--json" }, env)
    assert.equal(0, code, err)
    local list = json.decode(out)
    local id = (list.sessions or list)[1].id
    out, err, code = cli.run({ "sessions", "show", id, "--json" }, env)
    assert.equal(0, code, err)
    local sub
    for _, m in ipairs(json.decode(out).messages) do
      for _, p in ipairs(m.parts or {}) do if p.subagent then sub = p.subagent end end
    end
    assert.is_table(sub, "no sub-agent transcript in the saved session")
    assert.equal("helper", sub.agent)
    assert.equal("success (no tool calls)", sub.messages[#sub.messages].parts[1].text)
  end)

  it("exits 10 when a guardrail trips", function()
    local path = write("guarded.yaml", "model: test\ncapabilities:\n  - InputGuardrail: {blocked_keywords: [secret]}\n")
    local _, err, code = cli.run { "run", path, "tell me the secret", "--no-save" }
    assert.equal(10, code)
    assert.matches("input guardrail 'blocked_keywords' tripped", err, 1, true)
  end)
end)
