--- Files in and out of a sandbox (`sb:download`, `sb:upload`, `lash
-- sandbox cp`): a file as a byte stream, a directory as one tar stream,
-- both through a process in the sandbox (`sb:spawn`) whose pipes are read
-- and written a chunk at a time, so memory stays bounded whatever the size.
-- What comes out of a sandbox is treated as hostile: a file lands under a
-- temporary name and is renamed once whole; a directory's tar stream is
-- extracted by lash's own extractor (lash.core.files.untar), which never
-- follows a symlink and writes nothing outside the destination.
-- @module lash.sandbox_files
local core = require "lash.core"
local runtime = require "lash.runtime"

local M = {}

M.CHUNK = 1024 * 1024   -- bytes read from a host file per write into the sandbox

local function fail(msg)
  error(runtime.error("sandbox", msg, { code = "copy", retryable = false }), 0)
end

local function host_kind(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local ok, _, code = f:read(0)
  f:close()
  if ok == nil and code == 21 then return "dir" end
  -- an empty file reads nil too: tell it from a directory by opening path/.
  local d = io.open(path .. "/.", "rb")
  if d then
    d:close()
    return "dir"
  end
  return "file"
end
M.host_kind = host_kind

local function basename(p)
  return (p:gsub("/+$", "")):match("[^/]*$")
end

local function spawn(sb, argv)
  local ok, p = pcall(sb.spawn, sb, argv)
  if not ok then
    if type(p) == "table" and p.terminal then error(p, 0) end
    local why = type(p) == "table" and p.message or tostring(p)
    if why:find("not supported on this backend", 1, true) then
      fail("copying files needs a process with streams in the sandbox (sandbox:spawn), which the "
        .. tostring(sb.backend) .. " backend does not offer yet; use the local backend")
    end
    fail(why)
  end
  return p
end

local function progress(opts, done, total)
  if opts and opts.progress then opts.progress(done, total) end
end

-- The first line of what a command printed on stderr, run again to learn
-- why it failed (the streaming run discards stderr: it cannot block it).
local function why_failed(sb, argv, fallback)
  local ok, r = pcall(sb.exec, sb, argv, { timeout = 30 })
  if ok and r.stderr and r.stderr ~= "" then return (r.stderr:match("[^\n]+")) end
  return fallback
end

local function qsh(script, ...)
  return { "sh", "-c", script, "sh", ... }
end

--- Copy `path` out of the sandbox to `host_path` (into it, when it is an
-- existing directory).
function M.download(sb, path, host_path, opts)
  if type(path) ~= "string" or path == "" then error("sandbox:download: path must be a non-empty string", 2) end
  if type(host_path) ~= "string" or host_path == "" then
    error("sandbox:download: host_path must be a non-empty string", 2)
  end
  local ok, st = pcall(sb.stat, sb, path)
  if not ok then error(st, 0) end
  if host_kind(host_path) == "dir" then host_path = host_path:gsub("/+$", "") .. "/" .. basename(path) end
  if st.kind == "dir" then
    local p = spawn(sb, qsh('cd -- "$1" && exec tar -cf - . 2>/dev/null', path))
    local x, err = core.files.untar(host_path)
    if not x then
      p:close()
      fail(err)
    end
    local done = 0
    local okr, rerr = pcall(function()
      while true do
        local chunk = p:read()
        if not chunk then break end
        x:write(chunk)
        done = done + #chunk
        progress(opts, done, nil)
      end
    end)
    local code = p:wait()
    p:close()
    if not okr then
      x:close()
      fail("copying " .. path .. " out failed: " .. tostring(rerr))
    end
    if code ~= 0 then
      x:close()
      fail("tar in the sandbox failed: " .. why_failed(sb, qsh('cd -- "$1" && tar -cf /dev/null .', path),
        "exit code " .. tostring(code)))
    end
    local s = x:finish()
    s.kind, s.path = "dir", host_path
    s.stream_bytes = done
    return s
  end
  if st.kind ~= "file" then fail(path .. " is not a file or a directory") end
  local tmp = host_path .. ".lash-part-" .. core.sys.getpid()
  local f, ferr = io.open(tmp, "wb")
  if not f then fail("cannot write " .. tostring(ferr)) end
  local p = spawn(sb, { "cat", "--", path })
  local done = 0
  local okr, rerr = pcall(function()
    while true do
      local chunk = p:read()
      if not chunk then break end
      assert(f:write(chunk))
      done = done + #chunk
      progress(opts, done, st.size)
    end
  end)
  local code = p:wait()
  p:close()
  local closed, cerr = f:close()
  if not okr or code ~= 0 or not closed then
    os.remove(tmp)
    if not okr then fail("copying " .. path .. " out failed: " .. tostring(rerr)) end
    if not closed then fail("cannot write " .. host_path .. ": " .. tostring(cerr)) end
    fail("reading " .. path .. " failed: " .. why_failed(sb, { "cat", "--", path }, "exit code " .. tostring(code)))
  end
  local okm, merr = os.rename(tmp, host_path)
  if not okm then
    os.remove(tmp)
    fail("cannot put the file at " .. host_path .. ": " .. tostring(merr))
  end
  return { kind = "file", bytes = done, path = host_path }
end

-- Pump a reader (function returning chunks, nil at the end) into p's stdin.
local function pump(p, read, opts, total)
  local done = 0
  while true do
    local chunk = read()
    if not chunk then break end
    local ok, err = p:write(chunk)
    if not ok then return nil, err end
    done = done + #chunk
    progress(opts, done, total)
  end
  p:close_stdin()
  return done
end

--- Copy `host_path` (a file or a directory) into the sandbox at `path`
-- (into it, when it is an existing directory there).
function M.upload(sb, host_path, path, opts)
  if type(host_path) ~= "string" or host_path == "" then
    error("sandbox:upload: host_path must be a non-empty string", 2)
  end
  if type(path) ~= "string" or path == "" then error("sandbox:upload: path must be a non-empty string", 2) end
  local kind = host_kind(host_path)
  if not kind then fail("cannot read " .. host_path .. ": no such file or directory") end
  local okst, st = pcall(sb.stat, sb, path)
  if okst and st.kind == "dir" then path = path:gsub("/+$", "") .. "/" .. basename(host_path) end
  if kind == "dir" then
    local src = core.proc.spawn { argv = { "tar", "-C", host_path, "-cf", "-", "." }, stdin = "pipe", stderr = "pipe" }
    src:close_stdin()
    local p = spawn(sb, qsh('mkdir -p -- "$1" && exec tar -C "$1" -xf - 2>/dev/null', path))
    local done, err = pump(p, function() return src:read() end, opts, nil)
    local code = p:wait()
    p:close()
    local serr = src:read("stderr")
    local scode = src:wait()
    src:close()
    if scode ~= 0 then fail("tar on the host failed: " .. tostring(serr and serr:match("[^\n]+") or scode)) end
    if not done or code ~= 0 then
      fail("unpacking into " .. path .. " failed: " .. (err and tostring(err) or ("exit code " .. tostring(code))))
    end
    return { kind = "dir", bytes = done, path = path }
  end
  local f, ferr = io.open(host_path, "rb")
  if not f then fail("cannot read " .. tostring(ferr)) end
  local total = f:seek("end")
  f:seek("set", 0)
  local p = spawn(sb, qsh('d=$(dirname -- "$1") && mkdir -p -- "$d" && exec cat > "$1"', path))
  local done, err = pump(p, function() return f:read(M.CHUNK) end, opts, total)
  f:close()
  local code = p:wait()
  p:close()
  if not done or code ~= 0 then
    fail("writing " .. path .. " in the sandbox failed: "
      .. (err and tostring(err) or why_failed(sb, qsh('d=$(dirname -- "$1") && mkdir -p -- "$d" && : > "$1"', path),
        "exit code " .. tostring(code))))
  end
  return { kind = "file", bytes = done, path = path }
end

return M
