-- Collect and filter the events an agent run emits (on_event), shared by
-- the agent and model specs.
local M = {}

--- A fresh event list and the on_event function that appends to it.
function M.collector()
  local events = {}
  return events, function(e) events[#events + 1] = e end
end

--- The events of type `t`, in order.
function M.of_type(events, t)
  local out = {}
  for _, e in ipairs(events) do if e.type == t then out[#out + 1] = e end end
  return out
end

return M
