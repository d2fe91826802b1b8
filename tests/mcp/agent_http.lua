-- tests/mcp/agent_http.lua URL: a real agent run (scripted model) against
-- server-everything over Streamable HTTP. TAP lines.
local url = ...
local n, failed = 0, 0
local function check(desc, cond, detail)
  n = n + 1
  if cond then print("ok " .. n .. " - " .. desc)
  else failed = failed + 1; print("not ok " .. n .. " - " .. desc); if detail then print("#   " .. tostring(detail):gsub("\n", "\n#   ")) end end
end
local ts = lash.mcp.http { url = url, name = "evh", timeout = 30, headers = { ["X-Test"] = "1" } }
local agent = lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "ev_echo", args = { message = "over http" } },
                     { name = "ev_trigger-long-running-operation", args = { duration = 1, steps = 2 } },
                     { name = "ev_trigger-elicitation-request" } } },
    { text = "done" },
  },
  toolsets = { lash.prefix_tools { capability = ts, prefix = "ev" } },
}
local results, np, asked = {}, 0, false
local r = agent:run("go", {
  on_event = function(e)
    if e.type == "tool_result" then results[e.name] = e.content end
    if e.type == "tool_progress" then np = np + 1 end
  end,
  approve = function(_, c) asked = c.kind == "elicitation"; return { allow = true, args = { name = "Bob" } } end,
})
check("http: the run completes", r.output == "done", r.output)
check("http: echo through a prefix", results.ev_echo == "Echo: over http", results.ev_echo)
check("http: progress arrives on the call's SSE stream", np >= 1, np)
check("http: elicitation over SSE, answered through approve", asked and
      (results["ev_trigger-elicitation-request"] or ""):find("Bob", 1, true), results["ev_trigger-elicitation-request"])
local a2 = lash.agent { model = lash.script_model { { text = "x" } },
                        toolsets = { lash.mcp.http { url = "http://127.0.0.1:1/mcp" } } }
local ok2, e2 = pcall(a2.run, a2, "go")
check("http: an unreachable server is a clear error", not ok2 and tostring(e2):find("unreachable", 1, true), e2)
print("1.." .. n)
os.exit(failed == 0 and 0 or 1)
