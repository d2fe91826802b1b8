-- tests/acp/spec.lua: the agent `lash acp` serves in the ACP tests. Its
-- model is a Lua function that acts on the turn's prompt:
--   "write ..."   write_file hello.txt, then run_command "cat hello.txt"
--   "slow ..."    run_command that records its pid and sleeps 61.5 s
--   "plan ..."    update_plan with two steps
--   "parts ..."   answers with the kinds of the prompt's parts
--   anything else answers "echo: <prompt>" and the history's length
-- After tool results it answers with each result's status and content.
local function user_text(msg)
  local out = {}
  for _, p in ipairs(msg.parts or {}) do
    if p.type == "text" then out[#out + 1] = p.text end
  end
  return table.concat(out, "\n")
end

local function act(msgs)
  local last = msgs[#msgs]
  local results = {}
  for _, p in ipairs(last.parts or {}) do
    if p.type == "tool_result" then results[#results + 1] = p.name .. "=" .. p.status .. ":" .. p.content end
  end
  if #results > 0 then return "results: " .. table.concat(results, " | ") end
  local text = user_text(last)
  if text:find("^write") then
    return { text = "Writing.", tool_calls = {
      { name = "write_file", args = { path = "hello.txt", content = "hi from lash\n" } },
      { name = "run_command", args = { command = "cat hello.txt" } },
    } }
  elseif text:find("^slow") then
    return { tool_calls = { { name = "run_command",
      args = { command = "echo $$ > /workspace/slow.pid; exec sleep 61.5" } } } }
  elseif text:find("^plan") then
    return { tool_calls = { { name = "update_plan", args = { plan = {
      { step = "Read the code", status = "completed" },
      { step = "Fix the bug", status = "in_progress", priority = "high" },
    } } } } }
  elseif text:find("^parts") then
    local kinds = {}
    for _, p in ipairs(last.parts) do
      kinds[#kinds + 1] = p.type .. (p.media_type and ("(" .. p.media_type .. ")") or "")
        .. (p.type == "text" and ("[" .. #p.text .. "]") or "")
    end
    return "parts: " .. table.concat(kinds, ",") .. "\n" .. text
  end
  return "echo: " .. text:sub(1, 200) .. " (history: " .. #msgs .. " messages)"
end

local script = {}
for i = 1, 20 do script[i] = act end

return lash.agent {
  name = "acp-test",
  model = lash.script_model(script),
  capabilities = { lash.sandbox_capability { sandbox_timeout = 600 } },
}
