-- main.lua: a LÖVE 11 game that embeds lash through LuaJIT's FFI.
--
-- A tile world with a signpost and a hidden chest. Ada, an NPC, is an
-- agent (npc.lua, an offline scripted model) that calls three tools the
-- game registers as C callbacks (ffi.cast): look (answered at once),
-- walk_to (answered when Ada arrives, frames later: she walks a tile every
-- few frames) and open_chest (answered on the next frame, in the update
-- phase), plus run_command in a real local sandbox. The game calls
-- lash_step with a 1 ms budget once per frame, at 60 Hz, and draws the
-- world, the run's events and the frame times; it quits when the run has
-- ended.
--
--   love examples/love                       (from a built tree: build/liblash.so)
--   love examples/love --lib /usr/local/lib/liblash.so.0 --out /tmp/npc
--
-- Options (after the game's directory):
--   --lib PATH     the library (default $LASH_LIB, else ../../build/liblash.so
--                  next to this game, else liblash.so.0 from the linker's path)
--   --out DIR      write DIR/result.json (outcome, events seen, frame times),
--                  DIR/events.jsonl (every event) and DIR/screenshot.png
--   --frames N     run exactly N frames, starting the agent again whenever a
--                  run ends (for the benchmark); default: quit once the run ends
--   --no-agent     the same game and drawing without lash (the benchmark's
--                  baseline; without --frames it runs until the window closes)
-- Exit status: 0 when Ada found the chest, 1 otherwise.
local FRAME = 1 / 60
local BUDGET_MS = 1
local TILE, COLS, ROWS = 40, 16, 10
local FRAMES_PER_TILE = 4           -- Ada's walking speed
local TIMEOUT_S = 120               -- give up (exit 1) after this long

local SIGN = { x = 3, y = 2, text = "The chest lies at x = 3 * 4, y = 2 + 5." }
local CHEST = { x = 12, y = 7, gold = 3 }

-- the thread's CPU time, to tell lash's work from its wait for I/O inside
-- lash_step (it waits up to the budget when no task is ready)
local ffi = require "ffi"
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } lash_npc_timespec;
int clock_gettime(int clk, lash_npc_timespec *ts);
]]
local CLOCK_THREAD_CPUTIME_ID = 3
local cpu_ts = ffi.new("lash_npc_timespec")
local function thread_cpu()
  ffi.C.clock_gettime(CLOCK_THREAD_CPUTIME_ID, cpu_ts)
  return tonumber(cpu_ts.tv_sec) + tonumber(cpu_ts.tv_nsec) * 1e-9
end

local opts = { frames = nil, agent = true }
local lashffi, S, run                   -- the library wrapper, the state, the run
local world, hud                        -- game state, what the screen shows
local stats = { frames = 0, late = 0, late_list = {}, work = {}, step = {}, step_cpu = {}, events = {}, runs = 0, runs_done = 0 }
local out_files = {}
local exit_code = 1

-- ---- small helpers ------------------------------------------------------

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c)
    local esc = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
    return esc[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function percentile(samples, p)
  if #samples == 0 then return 0 end
  local sorted = {}
  for i, v in ipairs(samples) do sorted[i] = v end
  table.sort(sorted)
  return sorted[math.max(1, math.ceil(#sorted * p))]
end

local function parse_args(args)
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "--lib" then opts.lib = args[i + 1]; i = i + 1
    elseif a == "--out" then opts.out = args[i + 1]; i = i + 1
    elseif a == "--frames" then opts.frames = tonumber(args[i + 1]); i = i + 1
    elseif a == "--no-agent" then opts.agent = false
    else io.stderr:write("lash NPC: unknown option ", tostring(a), " (known: --lib, --out, --frames, --no-agent)\n")
    end
    i = i + 1
  end
end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function default_lib()
  local here = love.filesystem.getSource()
  local built = here .. "/../../build/liblash.so"
  if file_exists(built) then return built end
  return nil -- lash_ffi: $LASH_LIB, else liblash.so.0
end

local function hud_line(s)
  table.insert(hud.lines, s)
  if #hud.lines > 11 then table.remove(hud.lines, 1) end
end

-- ---- the world and its tools ------------------------------------------

local function reset_world()
  world = { npc = { x = 1, y = 1 }, walking = nil, opening = {}, chest_open = false, gold = 0 }
end

-- The arguments are tiny flat objects; the schema has validated them.
local function arg_num(args, key) return tonumber(args:match('"' .. key .. '":%s*(%-?[%d%.]+)')) end

local function tool_look(call)
  call:return_(string.format('{"npc":{"x":%d,"y":%d},"sign":%s,"chest":"%s"}', world.npc.x, world.npc.y,
    json_string(SIGN.text), world.chest_open and "open" or "hidden"))
end

local function tool_walk_to(call, args)
  if world.walking then return call:retry("Ada is already walking somewhere.") end
  local x, y = arg_num(args, "x"), arg_num(args, "y")
  -- the schema says so too; the game does not walk off its map on a model's word
  if not (x and y and x % 1 == 0 and y % 1 == 0 and x >= 0 and x < COLS and y >= 0 and y < ROWS) then
    return call:retry(string.format("(%s, %s) is not a tile: x is 0..%d, y is 0..%d", x, y, COLS - 1, ROWS - 1))
  end
  world.walking = { call = call, x = x, y = y, frames = 0 }
end

local function tool_open_chest(call)
  table.insert(world.opening, call) -- applied (and answered) in the next update
end

local WALK_SCHEMA = string.format('{"type":"object","properties":{'
  .. '"x":{"type":"integer","minimum":0,"maximum":%d},"y":{"type":"integer","minimum":0,"maximum":%d}},'
  .. '"required":["x","y"]}', COLS - 1, ROWS - 1)

-- The update phase: walk a tile, open what was asked to be opened.
local function update_world()
  local w = world.walking
  if w then
    w.frames = w.frames + 1
    if not w.call:pending() then
      world.walking = nil                 -- the run stopped waiting: stop
    elseif w.frames % FRAMES_PER_TILE == 0 then
      local n = world.npc
      if n.x ~= w.x then n.x = n.x + (w.x > n.x and 1 or -1)
      elseif n.y ~= w.y then n.y = n.y + (w.y > n.y and 1 or -1) end
      if n.x == w.x and n.y == w.y then
        w.call:return_(string.format("arrived at (%d, %d) after %d frames", n.x, n.y, w.frames))
        world.walking = nil
      end
    end
  end
  for _, call in ipairs(world.opening) do
    if call:pending() then
      if world.npc.x == CHEST.x and world.npc.y == CHEST.y and not world.chest_open then
        world.chest_open, world.gold = true, CHEST.gold
        call:return_(string.format("the chest holds %d gold coins", CHEST.gold))
      elseif world.chest_open then
        call:retry("The chest is open already.")
      else
        call:retry("There is no chest here; the sign says where it is.")
      end
    end
  end
  world.opening = {}
end

-- ---- lash ----------------------------------------------------------------

local function summarize(ev)
  local t = ev:match('"type":"([%w_]+)"') or "?"
  if t == "tool_call" then
    return t .. " " .. (ev:match('"name":"([^"]*)"') or "") .. " " .. (ev:match('"args":(%b{})') or "")
  elseif t == "tool_result" then
    return t .. " " .. (ev:match('"name":"([^"]*)"') or "") .. ": " .. (ev:match('"content":"(.-)","') or "")
  elseif t == "text_delta" then
    return "said: " .. (ev:match('"text":"(.-)","type"') or "")
  elseif t == "run_end" then
    return t .. " " .. (ev:match('"stop_reason":"([^"]*)"') or "")
  end
  return t
end

local function on_event(_, ev)
  local t = ev:match('"type":"([%w_]+)"') or "?"
  stats.events[t] = (stats.events[t] or 0) + 1
  if out_files.events then out_files.events:write(ev, "\n") end
  if t ~= "usage" then hud_line(string.format("[%5d] %s", stats.frames, summarize(ev):gsub("\\n", " "))) end
end

local function start_run()
  reset_world()
  stats.runs = stats.runs + 1
  run = S:run_start("Find the chest and tell me what is in it.")
end

local function open_lash()
  lashffi = require "lash_ffi"
  S = lashffi.open { lib = opts.lib or default_lib() }
  hud.version = lashffi.version(opts.lib or default_lib())
  S:load_spec_file(love.filesystem.getSource() .. "/npc.lua")
  S:set_value("world", COLS .. "x" .. ROWS .. " tiles")
  S:register_tool("look", "Look around: where Ada stands and what the signpost says.", nil, tool_look)
  S:register_tool("walk_to", "Walk to a tile; returns on arrival.", WALK_SCHEMA, tool_walk_to)
  S:register_tool("open_chest", "Open the chest on Ada's tile.", nil, tool_open_chest)
  S:on_event(on_event)
  start_run()
end

-- ---- the result ----------------------------------------------------------

local function write_result()
  if not opts.out then return end
  local output, result = nil, nil
  if run then output, result = run:result() end
  local ev = {}
  for k, v in pairs(stats.events) do ev[#ev + 1] = json_string(k) .. ":" .. v end
  table.sort(ev)
  local f = assert(io.open(opts.out .. "/result.json", "w"))
  f:write("{", table.concat({
    '"agent":' .. tostring(opts.agent),
    '"status":' .. json_string(run and run:status_name() or "none"),
    '"output":' .. (output and json_string(output) or "null"),
    '"result":' .. (result or "null"),
    '"runs":' .. stats.runs,
    '"runs_done":' .. stats.runs_done,
    '"frames":' .. stats.frames,
    '"late_frames":' .. stats.late,
    '"late":[' .. table.concat(stats.late_list, ",") .. "]",
    '"frame_ms_p50":' .. string.format("%.3f", percentile(stats.work, 0.5) * 1e3),
    '"frame_ms_p99":' .. string.format("%.3f", percentile(stats.work, 0.99) * 1e3),
    '"frame_ms_max":' .. string.format("%.3f", percentile(stats.work, 1) * 1e3),
    '"step_ms_p50":' .. string.format("%.3f", percentile(stats.step, 0.5) * 1e3),
    '"step_ms_p99":' .. string.format("%.3f", percentile(stats.step, 0.99) * 1e3),
    '"step_ms_max":' .. string.format("%.3f", percentile(stats.step, 1) * 1e3),
    '"step_cpu_ms_p50":' .. string.format("%.3f", percentile(stats.step_cpu, 0.5) * 1e3),
    '"step_cpu_ms_p99":' .. string.format("%.3f", percentile(stats.step_cpu, 0.99) * 1e3),
    '"events":{' .. table.concat(ev, ",") .. "}",
    string.format('"npc":{"x":%d,"y":%d}', world.npc.x, world.npc.y),
    '"chest_open":' .. tostring(world.chest_open),
    '"gold":' .. world.gold,
    '"screenshot":' .. tostring(hud.screenshot_saved or false),
    '"error":' .. (hud.error and json_string(hud.error) or "null"),
  }, ","), "}\n")
  f:close()
end

local function finish(code)
  exit_code = code
  if code ~= 0 then
    local _, result = nil, nil
    if run and run:done() then _, result = run:result() end
    io.stderr:write("lash NPC: ", hud.error or ("the run ended " .. (run and run:status_name() or "before it began")),
      result and (": " .. (result:match('"error":(%b{})') or "")) or "", "\n")
  end
  love.event.quit(code)
end

-- ---- LÖVE callbacks --------------------------------------------------------

function love.load(args)
  parse_args(args or {})
  hud = { lines = {}, version = "-", ended_at = nil }
  reset_world()
  if opts.out then out_files.events = assert(io.open(opts.out .. "/events.jsonl", "w")) end
  love.graphics.setBackgroundColor(0.10, 0.12, 0.16)
  if opts.agent then
    local ok, err = pcall(open_lash)
    if not ok then
      hud.error = tostring(err)
      write_result()
      return finish(1)
    end
  end
  hud.started = love.timer.getTime()
end

function love.update()
  stats.frames = stats.frames + 1
  update_world()
  if not S then
    -- the baseline draws as many event lines as the agent's run shows
    hud_line(string.format("[%5d] no agent: the same world and drawing, lash not loaded", stats.frames))
    if opts.frames and stats.frames >= opts.frames then finish(0) end
    return
  end
  local t0, c0 = love.timer.getTime(), thread_cpu()
  local ok, err = pcall(S.step, S, BUDGET_MS)
  stats.step[#stats.step + 1] = love.timer.getTime() - t0
  stats.step_cpu[#stats.step_cpu + 1] = thread_cpu() - c0
  if not ok then
    hud.error = tostring(err)
    return finish(1)
  end
  if run:done() and not hud.ended_at then hud.ended_at = stats.frames end
  if opts.frames then
    -- the frames are up: quit, with the run in flight cancelled by S:close
    if stats.frames >= opts.frames and not hud.ended_at then return finish(stats.runs_done > 0 and 0 or 1) end
    if hud.ended_at then
      if run:status() ~= lashffi.RUN_DONE then return finish(1) end
      stats.runs_done = stats.runs_done + 1
      if stats.frames >= opts.frames then return finish(0) end
      run:free()
      hud.ended_at = nil
      start_run()
    end
    return
  end
  if hud.ended_at and stats.frames == hud.ended_at + 3 then
    -- the frame drawn now is the one we keep
    if opts.out then
      love.graphics.captureScreenshot(function(img)
        local f = assert(io.open(opts.out .. "/screenshot.png", "wb"))
        f:write(img:encode("png"):getString())
        f:close()
        hud.screenshot_saved = true
      end)
    end
  elseif hud.ended_at and stats.frames >= hud.ended_at + 6 then
    local found = run:status() == lashffi.RUN_DONE and world.chest_open
    return finish(found and 0 or 1)
  end
  if love.timer.getTime() - hud.started > TIMEOUT_S then
    hud.error = "the run did not end within " .. TIMEOUT_S .. " s"
    run:cancel()
    return finish(1)
  end
end

local function draw_world()
  for y = 0, ROWS - 1 do
    for x = 0, COLS - 1 do
      local shade = ((x + y) % 2 == 0) and 0.36 or 0.32
      love.graphics.setColor(0.18, shade + 0.2, 0.22)
      love.graphics.rectangle("fill", x * TILE, y * TILE, TILE, TILE)
    end
  end
  -- the signpost
  love.graphics.setColor(0.55, 0.35, 0.15)
  love.graphics.rectangle("fill", SIGN.x * TILE + 17, SIGN.y * TILE + 14, 6, 24)
  love.graphics.rectangle("fill", SIGN.x * TILE + 6, SIGN.y * TILE + 6, 28, 14)
  -- the chest (drawn once found or open; Ada knows only the sign)
  if world.chest_open or (world.npc.x == CHEST.x and world.npc.y == CHEST.y) then
    love.graphics.setColor(0.95, 0.75, 0.10)
    love.graphics.rectangle("fill", CHEST.x * TILE + 4, CHEST.y * TILE + 22, 32, 16)
  end
  -- Ada
  love.graphics.setColor(0.20, 0.45, 1.00)
  love.graphics.circle("fill", world.npc.x * TILE + TILE / 2, world.npc.y * TILE + TILE / 2, 13)
  love.graphics.setColor(1, 1, 1)
  love.graphics.print("Ada", world.npc.x * TILE + 8, world.npc.y * TILE - 2)
end

function love.draw()
  draw_world()
  local x0 = COLS * TILE + 10
  love.graphics.setColor(1, 1, 1)
  love.graphics.print("lash " .. hud.version .. " in LÖVE", x0, 10)
  love.graphics.print("frame " .. stats.frames, x0, 34)
  love.graphics.print("late frames " .. stats.late, x0, 52)
  -- the percentile is refreshed twice a second: sorting every frame would cost the frame
  if stats.frames % 30 == 1 then hud.step_p99 = percentile(stats.step, 0.99) * 1e3 end
  love.graphics.print(string.format("step p99 %.2f ms", hud.step_p99 or 0), x0, 70)
  love.graphics.print("gold " .. world.gold, x0, 94)
  love.graphics.print("run " .. (run and run:status_name() or (opts.agent and "-" or "no agent")), x0, 112)
  love.graphics.setColor(0.8, 0.9, 1)
  for i, line in ipairs(hud.lines) do
    love.graphics.print(line:sub(1, 110), 10, ROWS * TILE + 4 + (i - 1) * 17)
  end
  if hud.error then
    love.graphics.setColor(1, 0.3, 0.3)
    love.graphics.printf(hud.error, 10, ROWS * TILE - 40, 780)
  end
end

function love.quit()
  write_result()
  if out_files.events then out_files.events:close(); out_files.events = nil end
  if run then run:free(); run = nil end
  if S then S:close(); S = nil end
  return false
end

-- A fixed 60 Hz loop (LÖVE's default one runs as fast as it can): each
-- frame polls events, updates (lash_step inside), draws and presents, then
-- sleeps to the next tick. A frame is late when that work took longer than
-- one tick.
function love.run()
  love.load(love.arg.parseGameArguments(arg), arg)
  love.timer.step()
  local tick = love.timer.getTime()
  return function()
    local start = love.timer.getTime()
    love.event.pump()
    for name, a, b, c, d, e, f in love.event.poll() do
      if name == "quit" then
        if not love.quit() then return a or exit_code end
      end
      love.handlers[name](a, b, c, d, e, f)
    end
    love.timer.step()
    love.update(FRAME)
    love.graphics.origin()
    love.graphics.clear(love.graphics.getBackgroundColor())
    love.draw()
    love.graphics.present()
    local work = love.timer.getTime() - start
    stats.work[#stats.work + 1] = work
    if work > FRAME then
      stats.late = stats.late + 1
      local step = stats.step[#stats.step]
      if #stats.late_list < 20 then
        stats.late_list[#stats.late_list + 1] = string.format('{"frame":%d,"work_ms":%.3f,"step_ms":%s}',
          stats.frames, work * 1e3, step and string.format("%.3f", step * 1e3) or "null")
      end
    end
    tick = tick + FRAME
    local now = love.timer.getTime()
    if tick > now then love.timer.sleep(tick - now) else tick = now end
  end
end
