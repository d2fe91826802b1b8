-- lash.acp.agent: defining an external ACP agent (the runs themselves are
-- proved against the real adapters in tests/integration/test_acp_agents.sh)
local lash = require "lash"

describe("lash.acp.agent", function()
  it("takes the agent's argv and names the agent after its program", function()
    local a = lash.acp.agent { command = { "/opt/bin/codex-acp", "-c", "x=1" } }
    assert.equal("codex-acp", a.name)
    assert.truthy(a.description:find("Agent Client Protocol", 1, true))
    assert.equal("function", type(a.as_tool))
  end)

  it("refuses a definition it cannot run, naming the field", function()
    assert.has_error(function() lash.acp.agent "codex" end, "lash.acp.agent: expected a table, got string")
    local _, ok, err
    ok, err = pcall(lash.acp.agent, { command = "codex-acp" })
    assert.falsy(ok)
    assert.truthy(tostring(err):find("'command' must be a table", 1, true))
    _, err = pcall(lash.acp.agent, { command = { "x", 3 } })
    assert.truthy(tostring(err):find("command[2] must be a string", 1, true))
    _, err = pcall(lash.acp.agent, { command = { "x" }, permissions = "maybe" })
    assert.truthy(tostring(err):find("'permissions' must be \"allow\" or \"deny\"", 1, true))
    _, err = pcall(lash.acp.agent, { command = { "x" }, timeout = 0 })
    assert.truthy(tostring(err):find("'timeout' must be seconds > 0", 1, true))
    ok, err = pcall(lash.acp.agent, { command = { "x" }, comand = { "y" } })
    assert.falsy(ok)
    assert.truthy(tostring(err):find("comand", 1, true))
  end)

  it("is a sub-agent tool a model can call", function()
    local t = lash.acp.agent { command = { "claude-code-acp" }, name = "Claude Code" }:as_tool()
    assert.equal("claude_code", t.name)
  end)

  it("reports an agent that is not there as a typed error, leaving nothing behind", function()
    local a = lash.acp.agent { command = { "/nonexistent/acp-agent" }, sandbox = false, init_timeout = 5 }
    local ok, err = pcall(a.run, a, "hi")
    assert.falsy(ok)
    assert.equal("table", type(err))
    assert.truthy(err.kind)
    assert.equal("hi", err.messages[1].parts[1].text)
  end)
end)

describe("lash.acp.editor_tools", function()
  it("gives the editor's file and command tools, and fails clearly outside lash acp", function()
    local cap = lash.acp.editor_tools {}
    assert.equal("EditorTools", cap.name)
    local a = lash.agent { model = { "test", call_tools = { "read_file" } }, capabilities = { cap } }
    local ok, err = pcall(a.run, a, "x")
    assert.falsy(ok)
    assert.truthy(tostring(err.message):find("works only under `lash acp`", 1, true))
  end)

  it("refuses options that leave nothing or misspell", function()
    local ok, err = pcall(lash.acp.editor_tools, { fs = false, terminal = false })
    assert.falsy(ok)
    assert.truthy(tostring(err):find("leave no tools", 1, true))
    ok, err = pcall(lash.acp.editor_tools, { terminals = true })
    assert.falsy(ok)
    assert.truthy(tostring(err):find("terminals", 1, true))
  end)

  it("is offered to an untrusted spec; lash.acp.agent is not", function()
    local agent = lash.load_spec_string([[
      return lash.agent { model = "test", capabilities = { lash.acp.editor_tools {} } }]], "e.lua")
    assert.truthy(agent)
    local _, err = lash.load_spec_string([[ return lash.acp.agent { command = { "sh" } } ]], "f.lua")
    assert.truthy(tostring(err):find("not available to a spec loaded without --trust", 1, true))
  end)
end)
