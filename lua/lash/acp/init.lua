--- lash.acp: the Agent Client Protocol from Lua.
--
--   lash.acp.agent{command = {...}, ...}   an external ACP agent (Claude Code,
--                                          Codex, ...) run in lash's sandbox:
--                                          agent:run(prompt), agent:as_tool{}
--   lash.acp.editor_tools{fs =, terminal =} the editor's files and terminals
--                                          as the model's tools, under `lash acp`
--   lash.acp.plan_toolset()                the update_plan tool
--
-- `lash acp` (lash.acp.server) is lash as an ACP agent for editors.
-- @module lash.acp
local M = {}

function M.agent(def)
  return require("lash.acp.client").agent(def)
end

function M.editor_tools(opts)
  return require("lash.acp.editor_tools").new(opts)
end

function M.plan_toolset()
  return require("lash.acp.plan").toolset()
end

return M
