-- agent_bench.lua: N concurrent lash agent runs of K tool steps each
-- against bench/agent_server.c (instant Chat Completions answers). The
-- tool runs `echo hi` in a local sandbox (isolation "none": a plain
-- process on the host), or with mode "lua" returns the text itself.
-- Prints: wall seconds, resident MiB before, peak resident MiB, private
-- (anonymous) resident MiB at the end.
--
-- arg = { PORT, N, K, MODE ("echo" | "lua"), STATE_ROOT }
local lash = require "lash"

local port, n, k = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
local mode, state_root = arg[4] or "echo", arg[5]

local function status_kib(field)
  local f = io.open("/proc/self/status", "r")
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

local echo_lua = lash.tool { name = "echo", description = "Print text with echo.",
  parameters = { type = "object", properties = { text = { type = "string" } }, required = { "text" } },
  handler = function(_, args) return args.text .. "\n" end }

-- One sandbox per run, made when the run opens its toolsets.
local shell = lash.capability { name = "Shell", for_run = function()
  local sb
  return lash.capability { name = "Shell",
    open = function()
      sb = lash.sandbox.create { backend = "local", isolation = "none", network = "on",
                                 state_root = state_root, timeout = 600 }
    end,
    close = function() if sb then sb:close() end end,
    tools = { { name = "echo", description = "Print text with echo.",
      parameters = { type = "object", properties = { text = { type = "string" } }, required = { "text" } },
      handler = function(_, args)
        local r = sb:exec({ "echo", args.text })
        if r.exit_code ~= 0 then error("echo failed: " .. r.stderr) end
        return r.stdout
      end } } }
end }

local agent = lash.agent {
  model = { "openai:bench", base_url = "http://127.0.0.1:" .. port .. "/v1", api_key = "bench" },
  instructions = "Call echo until told to stop.",
  tools = mode == "lua" and { echo_lua } or nil,
  capabilities = mode ~= "lua" and { shell } or nil,
  limits = { max_steps = k + 1 },
}

collectgarbage()
local rss0 = status_kib("VmRSS")
local t0 = lash.now()
local tasks = {}
for i = 1, n do tasks[i] = agent:start("go") end
for i = 1, n do
  local res = tasks[i]:join()
  assert(res.output == "done" and res.usage.tool_calls == k,
         "run " .. i .. " ended with " .. tostring(res.output) .. " after " .. res.usage.tool_calls .. " tool calls")
end
local wall = lash.now() - t0
print(string.format("%.6f %.2f %.2f %.2f", wall, rss0 / 1024, status_kib("VmHWM") / 1024,
                    status_kib("RssAnon") / 1024))
