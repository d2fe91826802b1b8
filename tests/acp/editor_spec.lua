-- tests/acp/editor_spec.lua: an agent whose files and commands are the
-- editor's (EditorTools), for tests/acp/sdk_client.mjs. Its scripted model:
--   "edit ..."  write_file hello.txt, edit_file it, run_command "cat hello.txt"
--   "slow ..."  run_command "sleep 61.5" (cancelled by the client)
-- After tool results it answers with each result's status and content.
local function act(msgs)
  local last = msgs[#msgs]
  local results, text = {}, {}
  for _, p in ipairs(last.parts or {}) do
    if p.type == "tool_result" then results[#results + 1] = p.name .. "=" .. p.status .. ":" .. p.content end
    if p.type == "text" then text[#text + 1] = p.text end
  end
  if #results > 0 then return "results: " .. table.concat(results, " | ") end
  text = table.concat(text, "\n")
  if text:find("^edit") then
    return { text = "Editing.", tool_calls = {
      { name = "write_file", args = { path = "hello.txt", content = "hi from lash\n" } },
    } }
  elseif text:find("^slow") then
    return { tool_calls = { { name = "run_command", args = { command = "exec sleep 61.5" } } } }
  end
  return "echo: " .. text
end

-- after the write: edit it, then show it
local function second(msgs)
  local last = msgs[#msgs]
  for _, p in ipairs(last.parts or {}) do
    if p.type == "tool_result" and p.name == "write_file" then
      return { tool_calls = {
        { name = "edit_file", args = { path = "hello.txt", old_string = "hi", new_string = "hello" } } } }
    elseif p.type == "tool_result" and p.name == "edit_file" then
      return { tool_calls = { { name = "run_command", args = { command = "cat hello.txt; pwd" } } } }
    end
  end
  return act(msgs)
end

local script = { act }
for i = 2, 20 do script[i] = second end

return lash.agent {
  name = "acp-editor-test",
  model = lash.script_model(script),
  capabilities = { lash.acp.editor_tools {} },
}
