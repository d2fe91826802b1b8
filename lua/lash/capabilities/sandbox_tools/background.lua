--- Background commands of one run: start_command, read_output,
-- write_stdin, stop_command. Each is a process in the sandbox started with
-- `sandbox:spawn` (on the local backend the jail's supervisor runs it in a
-- session of its own and kills what it leaves behind); two tasks of the
-- loop read its stdout and stderr into one log kept in bounded memory
-- (the last LOG_MAX bytes, older ones counted as dropped), with absolute
-- byte offsets so `read_output{since = N}` is exact. The run stops them
-- all when it ends.
-- @module lash.capabilities.sandbox_tools.background
local runtime = require "lash.runtime"

local M = {}

M.LOG_MAX = 1024 * 1024   -- bytes of output kept per command

local Set = {}
Set.__index = Set

--- A run's set of background commands.
-- @tparam number max how many may run at once
function M.new(max)
  return setmetatable({ max = max, list = {}, by_handle = {}, count = 0 }, Set)
end

local function append(c, chunk)
  c.log[#c.log + 1] = chunk
  c.size = c.size + #chunk
  c.total = c.total + #chunk
  if c.size > M.LOG_MAX * 2 then
    -- keep the last LOG_MAX bytes in one string
    local all = table.concat(c.log)
    local cut = #all - M.LOG_MAX
    c.log, c.size = { all:sub(cut + 1) }, M.LOG_MAX
    c.base = c.base + cut
  end
end

local function running(c)
  return c.exit == nil and not c.stopped
end

function Set:running_count()
  local n = 0
  for _, c in ipairs(self.list) do if running(c) then n = n + 1 end end
  return n
end

--- Start `command` (a shell command line). Returns the command record, or
-- nil and a retry message.
function Set:start(sb, command, name)
  if self:running_count() >= self.max then
    local names = {}
    for _, c in ipairs(self.list) do if running(c) then names[#names + 1] = c.handle end end
    return nil, "already " .. self.max .. " background command" .. (self.max == 1 and "" or "s") .. " running ("
      .. table.concat(names, ", ") .. "), the most allowed (max_background). Stop one with stop_command first."
  end
  local handle = name
  if handle and self.by_handle[handle] then
    return nil, "a background command named '" .. handle .. "' exists already; choose another name."
  end
  while not handle or self.by_handle[handle] do
    self.count = self.count + 1
    handle = "bg" .. self.count
  end
  local ok, p = pcall(sb.spawn, sb, { "sh", "-c", command })
  if not ok then return nil, nil, p end
  local c = { handle = handle, command = command, proc = p, log = {}, size = 0, total = 0, base = 0,
              started = runtime.now() }
  self.list[#self.list + 1] = c
  self.by_handle[handle] = c
  local open = 2
  local function reader(stream)
    return function()
      while true do
        local okr, chunk = pcall(p.read, p, stream)
        if not okr or not chunk then break end
        append(c, chunk)
      end
      open = open - 1
      if open == 0 then
        local okw, code, sig = pcall(p.wait, p)
        if okw then c.exit = code or (128 + (sig or 0)) else c.exit = -1 end
        c.ended = runtime.now()
      end
    end
  end
  c.tasks = { runtime.spawn(reader("stdout")), runtime.spawn(reader("stderr")) }
  return c
end

function Set:get(handle)
  return self.by_handle[handle]
end

function Set:handles()
  local out = {}
  for _, c in ipairs(self.list) do out[#out + 1] = c.handle end
  return out
end

--- The log from absolute offset `since` (nil: the last `max` bytes), at
-- most `max` bytes: text, first offset, next offset, dropped bytes.
function Set.output(c, since, max)
  local all = table.concat(c.log)
  c.log, c.size = { all }, #all
  local first = c.base
  local from = since
  local dropped = 0
  if from == nil then
    from = math.max(first, c.total - max)
  elseif from < first then
    dropped = first - from
    from = first
  end
  from = math.min(from, c.total)
  local to = math.min(c.total, from + max)
  return all:sub(from - first + 1, to - first), from, to, dropped
end

--- Stop a command: SIGTERM to its process group, SIGKILL after `grace`
-- seconds; the handle is closed (its jail process and what it started are
-- killed).
function Set.stop(c, grace)
  if c.exit == nil then
    pcall(c.proc.kill, c.proc, 15)
    local deadline = runtime.now() + (grace or 2)
    while c.exit == nil and runtime.now() < deadline do runtime.sleep(0.05) end
  end
  c.stopped = true
  pcall(c.proc.close, c.proc)
  -- the readers end at end of file; wait for them so the log is complete
  for _, t in ipairs(c.tasks or {}) do pcall(t.join, t) end
  if c.exit == nil then c.exit = 137 end
end

--- Stop every command (the run is ending).
function Set:close()
  for _, c in ipairs(self.list) do
    if not c.stopped then pcall(Set.stop, c, 0.5) end
  end
end

M.Set_output, M.Set_stop = Set.output, Set.stop

return M
