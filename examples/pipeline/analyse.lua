-- analyse.lua: the agent of the pipeline's two middle steps. Each step is
-- its own `lash run`, attached to the sandbox an earlier step created:
--
--   lash run examples/pipeline/analyse.lua "Analyse the orders" --attach H --owner O
--   lash run examples/pipeline/analyse.lua "Review the report" --attach H --owner O
--
-- The first step summarises /workspace/input/orders.csv into
-- /workspace/report.md; the second checks the report against the input
-- and signs it off. The files stay in the sandbox between the steps. The
-- scripted model below plays both offline; with a key, `--model
-- anthropic:claude-sonnet-4-6` lets a real model do the same work from the
-- instructions. Without --attach the spec creates (and destroys) its own
-- sandbox, which then has no input.
local lash = require "lash"

local INPUT, REPORT = "/workspace/input/orders.csv", "/workspace/report.md"
local SUMMARY = "awk -F, 'NR > 1 { n++; s += $3; if ($3 > m) { m = $3; who = $2 } } "
  .. "END { printf \"%d orders, %.2f in total; the largest is %.2f from %s\\n\", n, s, m, who }' " .. INPUT

local function prompt_of(messages)
  for _, p in ipairs(messages[1].parts) do
    if p.type == "text" then return p.text end
  end
  return ""
end

local function results(messages)
  local out = {}
  for _, p in ipairs(messages[#messages].parts or {}) do
    if p.type == "tool_result" then out[p.name] = p end
  end
  return out
end

local function summary_of(run_output)
  return run_output and run_output:match("^%[stdout%]\n(.-)$")
end

local function analyse(messages, info)
  local r = results(messages)
  if info.step == 1 then
    return { text = "I'll summarise the orders.",
             tool_calls = { { name = "run_command", args = { command = SUMMARY } } } }
  end
  if r.run_command then
    local summary = summary_of(r.run_command.content)
    if not summary then return "The summary command failed:\n" .. r.run_command.content end
    return { tool_calls = { { name = "write_file", args = { path = REPORT,
      content = "# Orders report\n\n- " .. summary .. "\n" } } } }
  end
  return "Wrote " .. REPORT .. "."
end

local function review(messages, info)
  local r = results(messages)
  if info.step == 1 then
    return { text = "I'll check the report against the input.",
             tool_calls = { { name = "read_file", args = { path = REPORT } },
                            { name = "run_command", args = { command = SUMMARY } } } }
  end
  if r.read_file and r.run_command then
    if r.read_file.status ~= "ok" then return "There is no report to review: " .. r.read_file.content end
    local summary = summary_of(r.run_command.content)
    local verdict = summary and r.read_file.content:find("- " .. summary, 1, true)
      and "the figures match" or "the figures do NOT match"
    return { tool_calls = { { name = "write_file", args = { path = REPORT, content = r.read_file.content
      .. "\n\n## Review\n\n- Checked against " .. INPUT .. ": " .. verdict .. ".\n" } } } }
  end
  return "Reviewed " .. REPORT .. " and signed it off."
end

return lash.agent {
  name = "pipeline",
  model = function(messages, info)
    if prompt_of(messages):lower():find("review", 1, true) then return review(messages, info) end
    return analyse(messages, info)
  end,
  instructions = "You work in a sandbox an earlier step prepared. The orders are in " .. INPUT .. " (CSV: id, "
    .. "customer, amount). When asked to analyse, write " .. REPORT .. " with the number of orders, the total and "
    .. "the largest order. When asked to review, check " .. REPORT .. " against the input and append a Review "
    .. "section saying whether the figures match. Keep every file in the sandbox: a later step collects them.",
  capabilities = { lash.sandbox_capability { default_command_timeout = 30 } },
}
