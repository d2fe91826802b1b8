-- Start and drive the fake provider servers (tests/servers/fake_*.py)
-- from specs: one process per spec file, scripts switched per test.
local lash = require "lash"
local json = require "lash.json"

local M = {}

local PY = "/usr/bin/python3"

--- Is python3 there to run the fake servers?
function M.available()
  local f = io.open(PY, "r")
  if f then f:close() return true end
  return false
end

local Server = {}
Server.__index = Server

local function call(self, method, path, obj)
  local status, _, body = lash.http.request { method = method, url = self.base .. path,
    headers = { ["content-type"] = "application/json" }, body = obj and json.encode(obj) or nil, timeout = 10 }
  assert(status == 200, "fake server " .. path .. ": HTTP " .. tostring(status) .. " " .. tostring(body))
  return json.decode(body)
end

--- Load a fixture (by name, from tests/fixtures/<kind>/) or a response list.
function Server:script(fixture)
  if type(fixture) == "string" then
    call(self, "POST", "/_script", { fixture = fixture })
  else
    call(self, "POST", "/_script", { responses = fixture })
  end
end

--- The requests the server got since the last script.
function Server:requests()
  return call(self, "GET", "/_requests")
end

function Server:stop()
  if self.proc then
    pcall(call, self, "POST", "/_shutdown", {})
    self.proc:close()
    self.proc = nil
  end
end

--- Start tests/servers/fake_<kind>.py; it exits by itself after `lifetime`.
function M.start(kind, lifetime)
  local proc = assert(io.popen("exec " .. PY .. " tests/servers/fake_" .. kind .. ".py --lifetime "
    .. tostring(lifetime or 300), "r"))
  local port = proc:read("l")
  assert(port and tonumber(port), "fake " .. kind .. " server did not print its port")
  return setmetatable({ proc = proc, port = tonumber(port), base = "http://127.0.0.1:" .. port }, Server)
end

return M
