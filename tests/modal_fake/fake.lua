-- fake.lua: start tests/modal_fake/server.py from Lua specs and benchmarks,
-- write its fault rules, read its call log and sandbox state.
-- local fake = dofile("tests/modal_fake/fake.lua")
-- local srv = assert(fake.start{ tls = true })   -- nil, why when unavailable
-- srv:opts{ sandbox_v2 = false }  -> backend options for lash.sandbox
-- srv:faults{ {...}, ... }; srv:calls() -> list of logged calls; srv:stop()
local json = require "lash.json"

local M = {}

local function sh_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function read_all(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write_atomic(path, text)
  local tmp = path .. ".tmp"
  local f = assert(io.open(tmp, "wb"))
  f:write(text)
  f:close()
  assert(os.rename(tmp, path))
end

local function my_pid()
  local stat = read_all("/proc/self/stat")
  return stat and stat:match("^(%d+)")
end

local function sleep(s)
  os.execute("sleep " .. s)
end

--- Why the fake cannot run here, or nil when it can.
function M.unavailable()
  if not io.open("/usr/bin/python3") then return "/usr/bin/python3 is missing" end
  local ok = os.execute("/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null")
  if not ok then return "python3-grpcio / python3-protobuf are missing" end
  if not os.execute("command -v protoc >/dev/null 2>&1") then return "protoc is missing" end
  return nil
end

local Server = {}
Server.__index = Server

--- Start a fake. opts: tls (bool), args (extra server.py arguments).
function M.start(opts)
  opts = opts or {}
  local why = M.unavailable()
  if why then return nil, why end
  local state = os.tmpname()
  os.remove(state)
  assert(os.execute("mkdir -p " .. sh_quote(state)))
  local args = { "--state", state, "--lifetime", tostring(opts.lifetime or 900),
                 "--watch-pid", my_pid() }
  if opts.tls then args[#args + 1] = "--tls" end
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = sh_quote(a) end
  local cmd = "/usr/bin/python3 tests/modal_fake/server.py " .. table.concat(quoted, " ")
    .. " >" .. sh_quote(state .. "/server.log") .. " 2>&1 &"
  assert(os.execute(cmd))
  local ports
  for _ = 1, 300 do
    local text = read_all(state .. "/ports.json")
    if text then ports = json.decode(text); break end
    sleep(0.1)
  end
  if not ports then
    local log = read_all(state .. "/server.log") or ""
    os.execute("rm -rf " .. sh_quote(state))
    return nil, "the fake Modal server did not start: " .. log
  end
  ports.control = math.tointeger(ports.control)
  ports.router = math.tointeger(ports.router)
  ports.pid = math.tointeger(ports.pid)
  if ports.ca == json.null then ports.ca = nil end
  local self = setmetatable({ state = state, ports = ports, tls = ports.tls,
                              token_id = "ak-fake-id", token_secret = "as-fake-secret" }, Server)
  self.url = (ports.tls and "https" or "http") .. "://127.0.0.1:" .. ports.control
  self.config_path = self:profile("good", self.token_id, self.token_secret)
  return self
end

--- Write a ~/.modal.toml-style file with one active profile; returns its path.
function Server:profile(name, id, secret, extra)
  local path = self.state .. "/" .. name .. ".toml"
  local lines = { "[" .. name .. "]", "active = true" }
  if id then lines[#lines + 1] = string.format('token_id = "%s"', id) end
  if secret then lines[#lines + 1] = string.format('token_secret = "%s"', secret) end
  lines[#lines + 1] = string.format('server_url = "%s"', self.url)
  for _, l in ipairs(extra or {}) do lines[#lines + 1] = l end
  write_atomic(path, table.concat(lines, "\n") .. "\n")
  return path
end

--- Backend options reaching this fake (merged over `more`).
function Server:opts(more)
  local o = { backend = "modal", config_path = self.config_path, ca_file = self.ports.ca }
  for k, v in pairs(more or {}) do o[k] = v end
  return o
end

function Server:faults(rules)
  write_atomic(self.state .. "/faults.json", #rules == 0 and "[]" or json.encode(rules))
end

--- Every logged call (decoded JSON lines), optionally only `method`.
function Server:calls(method)
  local out = {}
  local f = io.open(self.state .. "/calls.jsonl")
  if not f then return out end
  for line in f:lines() do
    local c = json.decode(line)
    if not method or c.method == method then out[#out + 1] = c end
  end
  f:close()
  return out
end

function Server:sandboxes()
  local text = read_all(self.state .. "/state.json")
  return text and json.decode(text).sandboxes or {}
end

--- Ids of sandboxes the fake still runs (hung terminates excluded).
function Server:running()
  local ids = {}
  for id, s in pairs(self:sandboxes()) do
    if s.running and not s.hung then ids[#ids + 1] = id end
  end
  table.sort(ids)
  return ids
end

function Server:stop()
  if self.ports then
    os.execute("kill " .. math.tointeger(self.ports.pid) .. " 2>/dev/null")
    for _ = 1, 50 do
      if not os.execute("kill -0 " .. math.tointeger(self.ports.pid) .. " 2>/dev/null") then break end
      sleep(0.1)
    end
    self.ports = nil
  end
  if not os.getenv("LASH_KEEP_FAKE_STATE") then os.execute("rm -rf " .. sh_quote(self.state)) end
end

return M
