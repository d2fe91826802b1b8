-- village.lua: the agent of the embedding example (examples/embed/host.c).
--
-- Its model is offline and scripted, so the example runs anywhere: it looks
-- at the scene, spawns three entities at once, looks again and reports.
-- Each step "thinks" for 50 ms first (a timer on lash's loop, like a real
-- model's HTTP latency), so the host's frames keep ticking while it works.
-- The tools spawn_entity and list_entities are not defined here: the host
-- registers them from C (lash_register_tool), and lash offers them to the
-- model next to any tools a spec defines.
--
-- With a real model: replace `model` by e.g. "anthropic:claude-sonnet-4-6".
local function think()
  lash.sleep(0.05)
end

local function last_result(messages)
  return messages[#messages].parts[1].content
end

return {
  name = "builder",
  instructions = "You build scenes in the level '{{ values.level }}' of a game. "
    .. "Look before you build, then say what you built.",
  model = lash.script_model {
    function()
      think()
      return { tool_calls = { { name = "list_entities" } } }
    end,
    function(messages)
      think()
      return {
        text = "The level holds " .. last_result(messages) .. "; building a small village.",
        tool_calls = {
          { name = "spawn_entity", args = { kind = "house", x = 0, y = 0 } },
          { name = "spawn_entity", args = { kind = "tree", x = 2, y = 1 } },
          { name = "spawn_entity", args = { kind = "rock", x = -1, y = 3 } },
        },
      }
    end,
    function()
      think()
      return { tool_calls = { { name = "list_entities" } } }
    end,
    function(messages, info)
      think()
      local level = info.instructions:match("level '([^']*)'")
      return "Built a small village in " .. level .. ": " .. last_result(messages)
    end,
  },
}
