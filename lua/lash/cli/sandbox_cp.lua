--- `lash sandbox cp SRC DST`: copy a file or a directory into or out of a
-- sandbox; one side is `ID:PATH` (a sandbox's path), the other a host
-- path, as `docker cp` has it. The copy streams (lash.sandbox_files): any
-- size in bounded memory, a directory as one tar stream. On a terminal,
-- stderr shows the bytes so far and the rate.
-- @module lash.cli.sandbox_cp
local runtime = require "lash.runtime"
local files = require "lash.sandbox_files"

local M = {}

M.usage = "cp [--backend B] [--state-root DIR] SRC DST    copy a file or a directory; one of them is "
  .. "ID:PATH (in that sandbox), the other a host path"

local function size(n)
  if n < 1024 then return n .. " B" end
  local units = { "KiB", "MiB", "GiB", "TiB" }
  local v, u = n / 1024, 1
  while v >= 1024 and u < #units do v, u = v / 1024, u + 1 end
  return string.format("%.1f %s", v, units[u])
end
M.size = size

-- A progress line on stderr when it is a terminal, redrawn at most 10
-- times a second.
local function progress_printer(cli)
  if not runtime.core.sys.isatty(2) then return nil, function() end end
  local t0, last = runtime.now(), 0
  local function show(done, total)
    local now = runtime.now()
    if now - last < 0.1 and not (total and done >= total) then return end
    last = now
    local rate = done / math.max(now - t0, 1e-3)
    local line = size(done) .. (total and (" / " .. size(total)) or "") .. "  " .. size(math.floor(rate)) .. "/s"
    cli.err_raw("\r\27[K", line)
  end
  return show, function() cli.err_raw("\r\27[K") end
end

local function split(arg)
  local id, path = arg:match("^([%w][%w._%-]*):(.+)$")
  if id and not arg:find("^%.?%.?/") then return id, path end
  return nil, arg
end

--- Run `lash sandbox cp`. `parse`, `open` and `usage` are the sandbox
-- command's own helpers.
function M.run(args, cli, h)
  local opts, pos = h.parse(cli, args, h.with_common {})
  if #pos ~= 2 then h.usage(cli, "cp needs SRC and DST, one of them ID:PATH") end
  local sid, spath = split(pos[1])
  local did, dpath = split(pos[2])
  if (sid and did) or not (sid or did) then
    h.usage(cli, "cp copies between a sandbox and the host: exactly one of SRC and DST is ID:PATH, got '"
      .. pos[1] .. "' and '" .. pos[2] .. "'")
  end
  local sb = h.open({ sid or did }, opts, cli, "cp")
  local show, clear = progress_printer(cli)
  local ok, res = pcall(function()
    if sid then return files.download(sb, spath, dpath, { progress = show }) end
    return files.upload(sb, spath, dpath, { progress = show })
  end)
  clear()
  sb:close()
  if not ok then error(res, 0) end
  local what
  if res.kind == "dir" and res.files then
    what = string.format("%d file%s, %d director%s, %d link%s (%s)", res.files, res.files == 1 and "" or "s",
      res.dirs, res.dirs == 1 and "y" or "ies", res.links, res.links == 1 and "" or "s", size(res.bytes))
  else
    what = (res.kind == "dir" and "a directory" or "a file") .. " (" .. size(res.bytes) .. ")"
  end
  cli.out("copied ", what, " to ", sid and res.path or (did .. ":" .. res.path), "\n")
  if res.skipped and res.skipped > 0 then
    cli.err("lash sandbox cp: skipped ", res.skipped, " member", res.skipped == 1 and "" or "s",
      " that cannot be copied safely (first: ", res.first_skip or "?", ")\n")
  end
  return cli.EXIT.ok
end

return M
