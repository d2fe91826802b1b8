-- MCP pieces that need no Node: content conversion, elicitation answers,
-- the JSON-RPC peer over an in-memory transport, a Lua MCP server driven
-- through lash.mcp.stdio (`lash eval` as the server), lash.net.
local lash = require "lash"
local mcp = require "lash.mcp"
local rpc = require "lash.mcp.rpc"
local json = require "lash.json"

local LASH = os.getenv("LASH_BIN") or ((os.getenv("LASH_BUILD") or "build") .. "/bin/lash")

describe("lash.mcp result conversion", function()
  it("turns every content type into text the model sees", function()
    assert.equal("hi", mcp.content_text { type = "text", text = "hi" })
    assert.equal("[image: image/png, 3B]", mcp.content_text { type = "image", mimeType = "image/png", data = "AAAA" })
    assert.equal("[audio: audio/wav, 2B]", mcp.content_text { type = "audio", mimeType = "audio/wav", data = "AAA=" })
    assert.equal("[resource file:///a (text/plain)]\nbody",
      mcp.content_text { type = "resource", resource = { uri = "file:///a", mimeType = "text/plain", text = "body" } })
    assert.equal("[resource link: A <file:///a> (text/plain)] the a file",
      mcp.content_text { type = "resource_link", name = "A", uri = "file:///a", mimeType = "text/plain",
                         description = "the a file" })
  end)
  it("uses structuredContent as canonical JSON when there is no text", function()
    assert.equal('{"a":1,"b":[2]}', mcp.result_text { content = {}, structuredContent = { b = { 2 }, a = 1 } })
    assert.equal("t", mcp.result_text { content = { { type = "text", text = "t" } }, structuredContent = { a = 1 } })
  end)
end)

describe("lash.mcp elicitation through approve", function()
  local params = { message = "Who?", requestedSchema = { type = "object",
    properties = { name = { type = "string", default = "Ann" }, age = { type = "integer" } }, required = { "name" } } }
  it("accepts the defaults on true, merges edited values, declines on false or a message", function()
    local r = mcp.elicit_with(function() return true end, {}, "s", params)
    assert.same({ action = "accept", content = { name = "Ann" } }, r)
    r = mcp.elicit_with(function() return { allow = true, args = { age = 7 } } end, {}, "s", params)
    assert.same({ action = "accept", content = { name = "Ann", age = 7 } }, r)
    assert.same({ action = "decline" }, mcp.elicit_with(function() return false end, {}, "s", params))
    assert.same({ action = "decline" }, mcp.elicit_with(function() return "no" end, {}, "s", params))
    assert.same({ action = "decline" }, mcp.elicit_with(nil, {}, "s", params))
  end)
  it("sends cancel when the answer does not match the schema", function()
    local r = mcp.elicit_with(function() return { allow = true, args = { age = "old" } } end, {}, "s", params)
    assert.same({ action = "cancel" }, r)
  end)
  it("passes the message, schema and defaults to approve", function()
    local seen
    mcp.elicit_with(function(_, call) seen = call return false end, {}, "srv", params)
    assert.equal("elicitation", seen.kind)
    assert.equal("Who?", seen.message)
    assert.equal("srv", seen.server)
    assert.same({ name = "Ann" }, seen.args)
  end)
end)

-- Two peers joined by queues.
local function pair()
  local a2b, b2a = rpc.queue(), rpc.queue()
  local function t(out, inn)
    return { send = function(_, m) out.push(json.decode(json.encode(m))) end,
             receive = function() return inn.pop() end, close = function() out.close() end }
  end
  return t(a2b, b2a), t(b2a, a2b)
end

describe("lash.mcp.rpc peers", function()
  it("match responses to requests, run handlers in tasks, and report errors", function()
    lash.spawn(function()
      local ta, tb = pair()
      local server = rpc.new(tb, { on_request = function(method, params)
        if method == "add" then return { sum = params.a + params.b } end
        if method == "slow" then lash.sleep(10) return {} end
        error(rpc.error(rpc.METHOD_NOT_FOUND, "no " .. method), 0)
      end })
      server:start()
      local client = rpc.new(ta, { name = "t" })
      client:start()
      assert.same({ sum = 5 }, client:request("add", { a = 2, b = 3 }))
      local ok, e = pcall(client.request, client, "nope", {})
      assert.is_false(ok)
      assert.equal("mcp", e.kind)
      assert.equal(rpc.METHOD_NOT_FOUND, e.code)
      local ok2, e2 = pcall(client.request, client, "slow", {}, { timeout = 0.05 })
      assert.is_false(ok2)
      assert.equal("timeout", e2.kind)
      client:close()
      server:close()
    end):join()
  end)
  it("fail pending requests when the other side goes away", function()
    lash.spawn(function()
      local ta, tb = pair()
      local client = rpc.new(ta, { name = "gone" })
      client:start()
      lash.spawn(function() lash.sleep(0.02) tb:close() end)
      local ok, e = pcall(client.request, client, "x", {})
      assert.is_false(ok)
      assert.matches("closed the connection", e.message, 1, true)
      client:close()
    end):join()
  end)
end)

describe("lash.mcp.stdio against a tiny server written here", function()
  -- a server in Lua on lash eval: initialize, tools/list (two pages), tools/call
  local server = [[
    local json = lash.json
    local p = lash.proc.spawn{ argv = {"cat"}, stdin = "inherit", stderr = "null" }
    local buf = ""
    local function send(m) io.stdout:write(json.encode(m), "\n") io.stdout:flush() end
    while true do
      local c = p:read(); if not c then break end
      buf = buf .. c
      while buf:find("\n") do
        local line; line, buf = buf:match("^([^\n]*)\n(.*)$")
        local m = json.decode(line)
        if m.method == "initialize" then
          send{ jsonrpc = "2.0", id = m.id, result = { protocolVersion = "2025-03-26", capabilities = { tools = {} },
                serverInfo = { name = "tiny", version = "1" } } }
        elseif m.method == "tools/list" and not (m.params and m.params.cursor) then
          send{ jsonrpc = "2.0", id = m.id, result = { nextCursor = "p2", tools = { { name = "a.b", inputSchema = { type = "object" } } } } }
        elseif m.method == "tools/list" then
          send{ jsonrpc = "2.0", id = m.id, result = { tools = { { name = "fails", inputSchema = { type = "object" } } } } }
        elseif m.method == "tools/call" and m.params.name == "a.b" then
          send{ jsonrpc = "2.0", id = m.id, result = { content = { { type = "text", text = "ok:" .. m.params.name } } } }
        elseif m.method == "tools/call" then
          send{ jsonrpc = "2.0", id = m.id, result = { isError = true, content = { { type = "text", text = "it broke" } } } }
        end
      end
    end
  ]]
  it("negotiates down to 2025-03-26, follows pagination, renames odd names, turns isError into a retry", function()
    local seen = {}
    local agent = lash.agent {
      model = function(messages, info)
        for i, d in ipairs(info.tools) do seen[i] = d.name end
        if info.step == 1 then return { tool_calls = { { name = "a_b" }, { name = "fails" } } } end
        local parts = messages[#messages].parts
        return { text = parts[1].status .. "=" .. parts[1].content .. "|" .. parts[2].status .. "=" .. parts[2].content }
      end,
      toolsets = { mcp.stdio { command = LASH, args = { "eval", server } } },
    }
    local r = agent:run("go")
    assert.same({ "a_b", "fails" }, seen)
    assert.equal("ok=ok:a.b|retry=it broke\n\nFix the errors and try again.", r.output)
  end)
  it("refuses unknown options and a missing command", function()
    assert.has_error(function() mcp.stdio { command = "x", bogus = 1 } end)
    assert.has_error(function() mcp.stdio { args = {} } end)
    assert.has_error(function() mcp.http { url = "ftp://x" } end)
  end)
end)

describe("lash.mcp tool list changes", function()
  it("list_changed refreshes the tools before the next model request", function()
    local server = [[
      local json = lash.json
      local p = lash.proc.spawn{ argv = {"cat"}, stdin = "inherit", stderr = "null" }
      local buf, grown = "", false
      local function send(m) io.stdout:write(json.encode(m), "\n") io.stdout:flush() end
      while true do
        local c = p:read(); if not c then break end
        buf = buf .. c
        while buf:find("\n") do
          local line; line, buf = buf:match("^([^\n]*)\n(.*)$")
          local m = json.decode(line)
          if m.method == "initialize" then
            send{ jsonrpc = "2.0", id = m.id, result = { protocolVersion = "2025-11-25",
                  capabilities = { tools = { listChanged = true } }, serverInfo = { name = "g", version = "1" } } }
          elseif m.method == "tools/list" then
            local tools = { { name = "grow", inputSchema = { type = "object" } } }
            if grown then tools[2] = { name = "new", inputSchema = { type = "object" } } end
            send{ jsonrpc = "2.0", id = m.id, result = { tools = tools } }
          elseif m.method == "tools/call" then
            grown = true
            send{ jsonrpc = "2.0", method = "notifications/tools/list_changed" }
            send{ jsonrpc = "2.0", id = m.id, result = { content = { { type = "text", text = "grown" } } } }
          end
        end
      end
    ]]
    local offered = {}
    local agent = lash.agent {
      model = function(_, info)
        local names = {}
        for i, d in ipairs(info.tools) do names[i] = d.name end
        offered[info.step] = table.concat(names, ",")
        if info.step == 1 then return { tool_calls = { { name = "grow" } } } end
        return { text = "done" }
      end,
      toolsets = { mcp.stdio { command = LASH, args = { "eval", server } } },
    }
    agent:run("go")
    assert.same({ "grow", "grow,new" }, offered)
  end)
end)

describe("MCP servers in specs", function()
  it("refuse a stdio server (a host command) unless the spec is trusted", function()
    local yaml = "model: test\ncapabilities:\n  - MCPServerStdio: {command: sh, tool_prefix: x}\n"
    local a, err = lash.load_spec_string(yaml, "s.yaml")
    assert.is_nil(a)
    assert.matches("MCPServerStdio starts a host command (sh)", err, 1, true)
    assert.is_truthy(lash.load_spec_string(yaml, "s.yaml", { trust = true }))
    assert.matches("sandbox: true", err, 1, true)
    -- inside the run's sandbox it is one more jailed command: allowed
    local jailed = "model: test\ncapabilities:\n  - Sandbox: {}\n  - MCPServerStdio: {command: node, sandbox: true}\n"
    assert.is_truthy(lash.load_spec_string(jailed, "j.yaml"))
    for _, other in ipairs { "false", "{timeout: 5}", "lb-aaaaaaaaaaaaaaaaaaaa" } do
      local c, cerr = lash.load_spec_string("model: test\ncapabilities:\n  - MCPServerStdio: {command: node, sandbox: "
        .. other .. "}\n", "o.yaml")
      assert.is_nil(c, other)
      assert.matches("starts a host command", cerr, 1, true)
    end
    local b = lash.load_spec_string("model: test\ncapabilities:\n  - MCPServerStreamableHTTP: {url: 'http://127.0.0.1:1/mcp'}\n", "h.yaml")
    assert.is_truthy(b)
    local o = "model: test\ncapabilities:\n  - MCPServerStreamableHTTP: {url: 'http://127.0.0.1:1/mcp', oauth: {token_file: /etc/x}}\n"
    local c, cerr = lash.load_spec_string(o, "o.yaml")
    assert.is_nil(c)
    assert.matches("come from the trusted side", cerr, 1, true)
    assert.is_truthy(lash.load_spec_string(o, "o.yaml", { trust = true }))
  end)
  it("leave host processes and sockets out of an untrusted Lua spec's lash", function()
    for _, expr in ipairs { "lash.proc", "lash.net", "lash.core" } do
      local a, err = lash.load_spec_string("local x = " .. expr .. "; return lash.agent{model='test'}", "u.lua")
      assert.is_nil(a, expr)
      assert.matches("not available to a spec loaded without --trust", err, 1, true)
    end
    assert.is_truthy(lash.load_spec_string("local x = lash.proc; return lash.agent{model='test'}", "t.lua",
                                           { trust = true }))
  end)
  it("let an untrusted Lua spec run a stdio server only inside the run's sandbox", function()
    local a, err = lash.load_spec_string("return lash.agent{model='test', toolsets = {lash.mcp.stdio{command='sh'}}}",
                                         "u.lua")
    assert.is_nil(a)
    assert.matches("inside the run's sandbox only", err, 1, true)
    local _, herr = lash.load_spec_string("return lash.agent{model='test', toolsets = {lash.mcp.http{url='http://x'}}}",
                                          "h.lua")
    assert.matches("not available to a spec loaded without --trust", herr, 1, true)
    -- the spec keeps its table; changing it after the check changes nothing
    local src = "local d = {command = 'sh', sandbox = true}\n"
      .. "local ts = lash.mcp.stdio(d)\nd.sandbox = nil\n"
      .. "return lash.agent{model='test', capabilities = {lash.sandbox_capability{}}, toolsets = {ts}}"
    local b = assert(lash.load_spec_string(src, "j.lua"))
    assert.is_true(b.own_toolsets[1].def.sandbox)
  end)
end)

describe("lash.net", function()
  it("listens, accepts, reads and writes on the loop", function()
    local l = lash.net.listen { host = "127.0.0.1", port = 0 }
    local port = l:port()
    assert.is_true(port > 0)
    local srv = lash.spawn(function()
      local c = l:accept()
      local got = c:read()
      c:write("echo:" .. got)
      c:close()
    end)
    local p = lash.proc.spawn { argv = { "python3", "-c", "import socket,sys\n"
      .. "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      .. "s.sendall(b'hello')\nd = b''\nwhile True:\n  c = s.recv(100)\n  if not c: break\n  d += c\n"
      .. "sys.stdout.write(d.decode())\n", tostring(port) } }
    srv:join()
    local out = {}
    while true do local c = p:read() if not c then break end out[#out + 1] = c end
    p:close()
    l:close()
    assert.equal("echo:hello", table.concat(out))
    assert.has_error(function() l:accept() end, "lash.net: the socket is closed")
  end)
end)
