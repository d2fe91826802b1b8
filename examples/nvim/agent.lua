-- agent.lua: the default agent of the Neovim plugin (lua/lash_nvim). Its
-- model is offline and scripted, so the plugin runs anywhere, but it works
-- from what the tools really return: it reads the buffer (read_buffer),
-- marks every "TODO" line done by editing the buffer (set_lines, one call
-- per line, all in one turn), reads it back and reports. Both tools are
-- the plugin's, registered through the FFI; the answer streams into the
-- plugin's output buffer.
--
-- With a real model: replace `model` by e.g. "anthropic:claude-sonnet-4-6"
-- (or start the plugin with spec = "your_agent.lua").
local function results(messages)
  local out = {}
  for _, p in ipairs(messages[#messages].parts or {}) do
    if p.type == "tool_result" then out[p.name] = p.content end
  end
  return out
end

local function todos(listing)
  local found = {}
  for n, text in listing:gmatch("(%d+)\t([^\n]*)") do
    local item = text:match("^%s*TODO:?%s*(.*)$")
    if item then found[#found + 1] = { line = tonumber(n), item = item, indent = text:match("^%s*") } end
  end
  return found
end

local function scripted(messages, info)
  lash.sleep(0.02)   -- a real model's latency: the editor stays responsive
  local r = results(messages)
  if info.step == 1 then
    return { text = "Reading the buffer.\n", tool_calls = { { name = "read_buffer" } } }
  end
  if r.read_buffer and info.step == 2 then
    local list = todos(r.read_buffer)
    if #list == 0 then return "There is nothing to do in this buffer." end
    local calls = {}
    for i, t in ipairs(list) do
      calls[i] = { name = "set_lines", args = { first = t.line, last = t.line, lines = { t.indent .. "DONE " .. t.item } } }
    end
    return { text = "Found " .. #list .. " TODO lines; marking them done.\n", tool_calls = calls }
  end
  if r.set_lines then
    return { tool_calls = { { name = "read_buffer" } } }
  end
  if r.read_buffer then
    local done = {}
    for item in r.read_buffer:gmatch("\t%s*DONE ([^\n]*)") do done[#done + 1] = item end
    return "Marked " .. #done .. " items done: " .. table.concat(done, ", ") .. "."
  end
  return "I got lost: " .. lash.json.encode(r)
end

return lash.agent {
  name = "nvim_todo",
  model = scripted,
  instructions = "You edit the user's buffer in Neovim ({{ values.buffer }}). Read it first, change it with "
    .. "set_lines, and say what you changed.",
}
