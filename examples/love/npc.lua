-- npc.lua: the agent of the LÖVE example (main.lua): Ada, an NPC who finds
-- a chest. Its model is offline and scripted, so the game runs anywhere, but
-- it decides from what the tools really return, as a model would: it looks
-- around (the game answers at once), works out the signpost's riddle with a
-- command in a real local sandbox (a bubblewrap jail, from the sandbox
-- capability), walks there (the game answers when Ada arrives, many frames
-- later), opens the chest (answered on the next frame) and reports.
-- look, walk_to and open_chest are not defined here: the game registers
-- them through the FFI (lash_register_tool with ffi.cast callbacks).
--
-- With a real model: replace `model` by e.g. "anthropic:claude-sonnet-4-6".
local function think()
  lash.sleep(0.05)   -- a real model's latency; the frames keep ticking
end

local function results(messages)
  local out = {}
  for _, p in ipairs(messages[#messages].parts or {}) do
    if p.type == "tool_result" then out[p.name] = p.content end
  end
  return out
end

local function scripted(messages, info)
  think()
  local r = results(messages)
  if info.step == 1 then
    return { text = "Let me look around.", tool_calls = { { name = "look" } } }
  end
  if r.look then
    local x, y = r.look:match('"sign":"[^"]-x = ([%d %+%*%-]+), y = ([%d %+%*%-]+)')
    if not x then return "I cannot read the sign: " .. r.look end
    return { text = "The sign is a riddle; I'll work it out.",
             tool_calls = { { name = "run_command", args = { command = "echo $((" .. x .. ")) $((" .. y .. "))" } } } }
  end
  if r.run_command then
    local x, y = r.run_command:match("(%d+) (%d+)")
    if not x then return "The sandbox did not answer: " .. r.run_command end
    return { text = "The chest is at (" .. x .. ", " .. y .. "). Walking there.",
             tool_calls = { { name = "walk_to", args = { x = tonumber(x), y = tonumber(y) } } } }
  end
  if r.walk_to then
    return { tool_calls = { { name = "open_chest" } } }
  end
  if r.open_chest then
    local walked = ""
    for i = #messages, 1, -1 do
      for _, p in ipairs(messages[i].parts or {}) do
        if p.type == "tool_result" and p.name == "walk_to" then walked = p.content end
      end
    end
    return "I worked out the sign in the sandbox, walked to the chest (" .. walked .. ") and opened it: "
      .. r.open_chest
  end
  return "I got lost: " .. lash.json.encode(r)
end

return lash.agent {
  name = "ada",
  model = scripted,
  instructions = "You are Ada, a villager in a small tile world ({{ values.world }}). Look around, work out "
    .. "riddles with the shell, walk where you need to, and say what you found.",
  capabilities = {
    lash.sandbox_capability { sandbox_timeout = 120, default_command_timeout = 30 },
  },
}
