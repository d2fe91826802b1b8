-- test_model.lua: the deterministic offline `test` model calls every tool
-- once with arguments generated from its schema, then answers with a JSON
-- summary of the results. Useful to check that tools wire up:
--
--   lash run examples/test_model.lua "anything"
local lash = require "lash"

return lash.agent {
  model = "test",
  instructions = "Answer briefly.",
  tools = {
    lash.tool {
      name = "greet",
      description = "Greet someone by name.",
      parameters = { type = "object", properties = { name = { type = "string" } }, required = { "name" } },
      handler = function(_, args) return "hello, " .. args.name end,
    },
    lash.tool {
      name = "pick",
      description = "Pick a colour.",
      parameters = { type = "object", properties = { colour = { enum = { "red", "green" } } }, required = { "colour" } },
      handler = function(_, args) return args.colour end,
    },
  },
}
