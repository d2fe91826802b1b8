-- modal_bench.lua: the Modal backend against the fake on loopback (TLS, V2).
-- Rows: RPCs and median time of one command's round trip (start, stdio,
-- stdin, wait) on a warm sandbox; of a sandbox create; and 100 concurrent
-- commands over the router: wall time and connections opened, counted by
-- the server from the client ports that carried the calls.
local lash = require "lash"
local fake = dofile("tests/modal_fake/fake.lua")

local function row(name, value, unit, note)
  print(string.format("| %s | %s | %s | %s |", name, value, unit, note))
end

local why = fake.unavailable()
if why then
  row("modal", "skipped", "", why)
  return
end

local srv = assert(fake.start{ tls = true })
local ok, err = pcall(function()
  local opts = srv:opts{}
  local function median(t)
    table.sort(t)
    return t[(#t + 1) // 2]
  end
  local function rpcs_since(n0) return #srv:calls() - n0 end

  -- create (cold: app, environment, image, token are fetched once)
  local n0 = #srv:calls()
  local t0 = lash.now()
  local sb = lash.sandbox.create(opts)
  row("modal create, cold", string.format("%.1f", (lash.now() - t0) * 1000), "ms",
      rpcs_since(n0) .. " RPCs (app, env, image + build stream, token, create)")
  n0 = #srv:calls()
  t0 = lash.now()
  local sb2 = lash.sandbox.create(opts)
  row("modal create, warm", string.format("%.1f", (lash.now() - t0) * 1000), "ms",
      rpcs_since(n0) .. " RPCs (cached app/image/token)")
  sb2:close()

  -- one command, warm
  sb:exec("true")
  local times, per = {}, nil
  for i = 1, 30 do
    n0 = #srv:calls()
    t0 = lash.now()
    local r = sb:exec({ "echo", tostring(i) })
    times[#times + 1] = lash.now() - t0
    assert(r.stdout == i .. "\n")
    per = rpcs_since(n0)
  end
  row("modal exec round trip", string.format("%.2f", median(times) * 1000), "ms",
      string.format("median of 30; %d RPCs (start, stdout, stderr, wait)", per))

  -- 100 concurrent commands
  local before = {}
  for _, c in ipairs(srv:calls()) do before[c.peer] = true end
  n0 = #srv:calls()
  t0 = lash.now()
  local tasks = {}
  for i = 1, 100 do
    tasks[i] = lash.spawn(function() return sb:exec({ "echo", tostring(i) }).stdout end)
  end
  for i = 1, 100 do assert(tasks[i]:join() == i .. "\n") end
  local wall = lash.now() - t0
  local calls = srv:calls()
  local peers, fresh = {}, 0
  for j = n0 + 1, #calls do
    local p = calls[j].peer
    if calls[j].server == "router" and not peers[p] then
      peers[p] = true
      if not before[p] then fresh = fresh + 1 end
    end
  end
  local n = 0
  for _ in pairs(peers) do n = n + 1 end
  row("modal 100 concurrent execs", string.format("%.0f", wall * 1000), "ms",
      string.format("%d RPCs", #calls - n0))
  row("modal 100 concurrent execs: router connections", n, "connections",
      string.format("%d newly opened (aim: one, reused)", fresh))
  sb:close()
end)
srv:stop()
if not ok then error(err, 0) end
