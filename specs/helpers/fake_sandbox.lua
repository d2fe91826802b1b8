-- A sandbox backend written in Lua for specs: registered through
-- lash.sandbox.register_backend like any backend, it keeps sandboxes in
-- memory (files, directories, tags), records every call, runs commands
-- through a scriptable responder whose output goes through a real tail
-- ring (lash.output.ring) fed in chunks, and raises the errors a test
-- injects. Each fake.new() registers a fresh backend under its own name.
local lash = require "lash"

local M = {}
local counter = 0

local function sandbox_error(code, msg)
  return lash.error("sandbox", msg, { retryable = true, terminal = false, code = code })
end

local function terminal_error(kind, code, msg)
  return lash.error(kind, msg, { retryable = false, terminal = true, code = code })
end

local function normalize(path)
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      parts[#parts] = nil
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return "/" .. table.concat(parts, "/")
end

local function parent(path)
  local p = path:match("^(.*)/[^/]+$")
  if p == nil or p == "" then return "/" end
  return p
end

local function copy(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

--- Register a fake backend.
-- opts: name, tags (default true: read_tags/write_tags), cas (atomic
-- claims, default false), create_options, config_options,
-- default_workdir ("/work"), chunk_size (ring feed, default 4096).
function M.new(opts)
  opts = opts or {}
  counter = counter + 1
  local f = {
    name = opts.name or ("fake" .. counter), calls = {}, boxes = {}, created = {}, destroyed = {},
    queued = {}, chunk_size = opts.chunk_size or 4096, stat_sizes = {}, next_id = 0,
  }

  local function record(slot, t)
    t.slot = slot
    f.calls[#f.calls + 1] = t
    if f.yield then lash.sleep(0) end
    local q = f.queued[slot]
    if q and #q > 0 then
      local e = table.remove(q, 1)
      if type(e) == "function" then e = e(t) end
      if e ~= nil then error(e, 0) end
    end
  end

  local function box(id)
    local b = f.boxes[id]
    if not b or not b.alive then
      error(terminal_error("unavailable", "gone", "Sandbox '" .. id .. "' is gone: it was destroyed, or it never "
        .. "existed"), 0)
    end
    return b
  end

  local function resolve(b, path)
    if path:sub(1, 1) ~= "/" then path = b.workdir .. "/" .. path end
    return normalize(path)
  end

  local function new_box(spec)
    f.next_id = f.next_id + 1
    local id = "fk-" .. f.name .. "-" .. f.next_id
    local workdir = spec.workdir or opts.default_workdir or "/work"
    local b = { id = id, files = {}, dirs = { ["/"] = true }, tags = copy(spec.tags), workdir = workdir,
                alive = true, expires_at = spec.expires_at, env = copy(spec.env), spec = spec }
    local d = workdir
    while d ~= "/" do
      b.dirs[d] = true
      d = parent(d)
    end
    f.boxes[id] = b
    return id, b
  end

  --- A sandbox created elsewhere (a provisioning step): spec fields
  -- tags, expires_at, workdir. Returns its id.
  function f.add(spec)
    local id = new_box(spec or {})
    return id
  end

  --- Queue errors for a slot: each call to it raises the next one (a
  -- function gets the call record and may return nil to let it pass).
  function f.inject(slot, ...)
    f.queued[slot] = f.queued[slot] or {}
    for _, e in ipairs { ... } do table.insert(f.queued[slot], e) end
  end

  f.sandbox_error = sandbox_error
  f.terminal_error = terminal_error

  function f.calls_of(slot)
    local out = {}
    for _, c in ipairs(f.calls) do
      if c.slot == slot then out[#out + 1] = c end
    end
    return out
  end

  function f.file(id, path)
    local b = f.boxes[id]
    return b and b.files[resolve(b, path)]
  end

  function f.put(id, path, data)
    local b = f.boxes[id]
    local p = resolve(b, path)
    local d = parent(p)
    while d ~= "/" do
      b.dirs[d] = true
      d = parent(d)
    end
    b.files[p] = data
  end

  function f.mkdir(id, path)
    local b = f.boxes[id]
    local d = resolve(b, path)
    while d ~= "/" do
      b.dirs[d] = true
      d = parent(d)
    end
  end

  local function ring_through(s, max)
    local r = lash.output.ring(max)
    local n = f.chunk_size
    for i = 1, #s, n do r:feed(s:sub(i, i + n - 1)) end
    local out, dropped = r:result()
    r:close()
    return out, dropped
  end

  local slots = {
    create_options = opts.create_options, config_options = opts.config_options,
    default_workdir = opts.default_workdir or "/work",
  }

  function slots.create(cfg, spec)
    record("create", { cfg = cfg, spec = spec })
    local id = new_box(spec)
    f.created[#f.created + 1] = id
    return id
  end

  function slots.exec(cfg, id, argv, eopts)
    record("exec", { cfg = cfg, id = id, argv = argv, opts = eopts })
    local b = box(id)
    local r = f.responder and f.responder(argv, eopts, b) or { stdout = (argv[3] or "") .. "\n" }
    local out, out_cut = ring_through(r.stdout or "", eopts.max_output_bytes)
    local err, err_cut = ring_through(r.stderr or "", eopts.max_output_bytes)
    return { stdout = out, stderr = err, stdout_truncated = out_cut, stderr_truncated = err_cut,
             exit_code = r.exit_code or 0, timed_out = r.timed_out or false,
             applied_timeout = r.applied_timeout or eopts.timeout }
  end

  function slots.stat(cfg, id, path)
    record("stat", { cfg = cfg, id = id, path = path })
    local b = box(id)
    local p = resolve(b, path)
    if b.files[p] then
      return { kind = "file", size = f.stat_sizes[p] or #b.files[p], mode = 420, mtime = 0 }
    elseif b.dirs[p] then
      return { kind = "dir", size = 4096, mode = 493, mtime = 0 }
    end
    error(sandbox_error("not_found", "'" .. path .. "': No such file or directory"), 0)
  end

  function slots.read_file(cfg, id, path, max)
    record("read_file", { cfg = cfg, id = id, path = path, max = max })
    local b = box(id)
    local p = resolve(b, path)
    local data = b.files[p]
    if not data then
      if b.dirs[p] then error(sandbox_error("is_dir", "'" .. path .. "' is a directory"), 0) end
      error(sandbox_error("not_found", "'" .. path .. "': No such file or directory"), 0)
    end
    if #data > max then
      local e = sandbox_error("too_large", "'" .. path .. "' is too large")
      e.size, e.max_bytes, e.path = #data, max, path
      error(e, 0)
    end
    return data
  end

  function slots.write_file(cfg, id, path, data)
    record("write_file", { cfg = cfg, id = id, path = path, data = data })
    box(id)
    f.put(id, path, data)
  end

  function slots.list_dir(cfg, id, path)
    record("list_dir", { cfg = cfg, id = id, path = path })
    local b = box(id)
    local p = resolve(b, path)
    if not b.dirs[p] then
      if b.files[p] then error(sandbox_error("not_dir", "'" .. path .. "': Not a directory"), 0) end
      error(sandbox_error("not_found", "'" .. path .. "': No such file or directory"), 0)
    end
    local out, seen = {}, {}
    local prefix = p == "/" and "/" or (p .. "/")
    for fp in pairs(b.files) do
      local rest = fp:sub(1, #prefix) == prefix and fp:sub(#prefix + 1)
      if rest and rest ~= "" and not rest:find("/", 1, true) and not seen[rest] then
        seen[rest] = true
        out[#out + 1] = { name = rest, kind = "file" }
      end
    end
    for dp in pairs(b.dirs) do
      local rest = dp:sub(1, #prefix) == prefix and dp:sub(#prefix + 1)
      if rest and rest ~= "" and not rest:find("/", 1, true) and not seen[rest] then
        seen[rest] = true
        out[#out + 1] = { name = rest, kind = "dir" }
      end
    end
    return out
  end

  function slots.poll(cfg, id)
    record("poll", { cfg = cfg, id = id })
    local b = f.boxes[id]
    if not b then return { running = false, status = "gone" } end
    return { running = b.alive, status = b.alive and "running" or "terminated", expires_at = b.expires_at }
  end

  function slots.destroy(cfg, id, timeout)
    record("destroy", { cfg = cfg, id = id, timeout = timeout })
    local b = f.boxes[id]
    if b then b.alive = false end
    f.destroyed[#f.destroyed + 1] = id
  end

  if opts.tags ~= false then
    function slots.read_tags(cfg, id)
      record("read_tags", { cfg = cfg, id = id })
      return copy(box(id).tags)
    end
    function slots.write_tags(cfg, id, tags)
      record("write_tags", { cfg = cfg, id = id, tags = copy(tags) })
      box(id).tags = copy(tags)
    end
    if opts.cas then
      function slots.cas_tags(cfg, id, expect, tags)
        record("cas_tags", { cfg = cfg, id = id, expect = copy(expect), tags = copy(tags) })
        local b = box(id)
        for k, v in pairs(expect) do
          local cur = b.tags[k]
          if (v == false and cur ~= nil) or (v ~= false and cur ~= v) then return false, copy(b.tags) end
        end
        b.tags = copy(tags)
        return true
      end
    end
  end

  lash.sandbox.register_backend(f.name, slots)
  f.slots = slots
  return f
end

return M
