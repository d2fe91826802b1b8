-- The ACP pieces that need no Node and no sandbox: content conversion,
-- tool kinds and titles, and lash.acp.server over an in-memory transport
-- (an agent with plain tools, a scripted model, an rpc peer as the
-- editor). The SDK and hostile clients are tests/integration/test_acp.sh.
local lash = require "lash"
local rpc = require "lash.mcp.rpc"
local json = require "lash.json"
local protocol = require "lash.acp.protocol"
local server = require "lash.acp.server"
local parts = require "lash.models.parts"

describe("lash.acp.protocol prompts", function()
  it("turns text, links, embedded resources and images into prompt parts", function()
    local p, size = protocol.prompt_parts {
      { type = "text", text = "hi" },
      { type = "resource_link", name = "a.c", uri = "file:///a.c" },
      { type = "resource", resource = { uri = "file:///n.md", text = "x ``` y" } },
      { type = "image", data = "iVBORw0KGgo=", mimeType = "image/png" },
    }
    assert.same({ type = "text", text = "hi" }, p[1])
    assert.equal("[@a.c](file:///a.c)", p[2].text)
    assert.equal("Context from file:///n.md:\n````\nx ``` y\n````", p[3].text)
    assert.equal("image", p[4].type)
    assert.equal("iVBORw0KGgo=", p[4].data)
    assert.is_true(size > 0)
  end)
  it("refuses what lash cannot take, naming the block", function()
    local function err(blocks)
      local ok, e = pcall(protocol.prompt_parts, blocks)
      assert.is_false(ok)
      assert.equal(rpc.INVALID_PARAMS, e.rpc_code)
      return e.message
    end
    assert.matches("prompt is empty", err {})
    assert.matches("prompt%[1%]%.type: lash takes no audio",
      err { { type = "audio", data = "AA==", mimeType = "audio/wav" } })
    assert.matches("prompt%[2%]%.text must be a string", err { { type = "text", text = "a" }, { type = "text" } })
    assert.matches("not base64", err { { type = "image", data = "%%%", mimeType = "image/png" } })
    assert.matches("unsupported media type 'image/bmp'",
      err { { type = "image", data = "AAAA", mimeType = "image/bmp" } })
    assert.matches("must be text, image, resource_link or resource", err { { type = "video" } })
  end)
  it("checks base64 and sizes without decoding", function()
    assert.is_nil((parts.from_base64("AAA=A", "image/png")))
    assert.is_nil((parts.from_base64("AA===", "image/png")))
    local big = string.rep("A", (parts.IMAGE_MAX // 3 + 2) * 4)
    local p, e = parts.from_base64(big, "image/png", "big.png")
    assert.is_nil(p)
    assert.matches("big.png is 5.0 MiB; images are limited", e)
    assert.equal("document", parts.from_base64("JVBERi0=", "application/pdf").type)
  end)
end)

describe("lash.acp.protocol tool calls", function()
  it("gives kinds and titles, also to prefixed sandbox tools", function()
    assert.equal("execute", protocol.tool_kind("run_command"))
    assert.equal("execute", protocol.tool_kind("box_run_command"))
    assert.equal("edit", protocol.tool_kind("write_file"))
    assert.equal("read", protocol.tool_kind("read_file"))
    assert.equal("other", protocol.tool_kind("fetch_weather"))
    assert.equal("ls -la", protocol.tool_title("run_command", { command = "ls   -la" }))
    assert.equal("Write a.txt", protocol.tool_title("box_write_file", { path = "a.txt" }))
    assert.same({ { path = "/w/a.txt" } }, protocol.tool_locations({ path = "a.txt" }, "/w"))
    assert.equal("[]", json.encode(protocol.tool_locations({}, "/w")))
  end)
end)

-- An editor (an rpc peer) and a lash.acp.server joined by queues.
local function pair()
  local a2b, b2a = rpc.queue(), rpc.queue()
  local function t(out, inn)
    return { send = function(_, m) out.push(json.decode(json.encode(m))) end,
             receive = function() return inn.pop() end, close = function() out.close() end }
  end
  return t(a2b, b2a), t(b2a, a2b)
end

local function agent()
  local wrote = {}
  local a = lash.agent {
    name = "t",
    model = lash.script_model {
      { tool_calls = { { name = "write_file", args = { path = "a.txt", content = "A" } },
                       { name = "read_file", args = { path = "a.txt" } } } },
      "done",
    },
    tools = {
      { name = "write_file", description = "w", parameters = { type = "object", properties = {
        path = { type = "string" }, content = { type = "string" } } },
        handler = function(_, args) wrote[#wrote + 1] = args.path return "ok" end },
      { name = "read_file", description = "r", parameters = { type = "object", properties = {
        path = { type = "string" } } }, handler = function() return "A" end },
    },
  }
  return a, wrote
end

local function editor(answer)
  local te, ts = pair()
  local a, wrote = agent()
  local srv = server.new(ts, { agent = a, plan = false })
  local ed = { updates = {}, asked = {}, wrote = wrote }
  ed.peer = rpc.new(te, { name = "lash", protocol = rpc.ACP,
    on_request = function(method, params)
      assert.equal("session/request_permission", method)
      ed.asked[#ed.asked + 1] = params
      return { outcome = { outcome = "selected", optionId = answer(params) } }
    end,
    on_notification = function(_, params) ed.updates[#ed.updates + 1] = params.update end })
  lash.spawn(function() srv:serve() end)
  ed.peer:start()
  ed.peer:request("initialize", { protocolVersion = 1 })
  ed.sid = ed.peer:request("session/new", { cwd = "/tmp", mcpServers = {} }).sessionId
  function ed.prompt(text)
    ed.updates, ed.asked = {}, {}
    return ed.peer:request("session/prompt", { sessionId = ed.sid, prompt = { { type = "text", text = text } } })
  end
  function ed.close() ed.peer:close() srv:close() end
  ed.srv = srv
  return ed
end

describe("lash.acp.server", function()
  it("shows a running command's output as tool_call_update content, a bounded tail", function()
    lash.spawn(function()
      local ed = editor(function() return "allow_once" end)
      local s = ed.srv.sessions[ed.sid]
      s.calls, s.terminal_of = {}, {}   -- as a turn starts them
      ed.updates = {}
      s:on_event { type = "tool_call", id = "c1", name = "run_command", args = { command = "make" } }
      s:on_event { type = "tool_output_delta", id = "c1", name = "run_command", stream = "stdout", text = "one\n" }
      s:on_event { type = "tool_output_delta", id = "c1", name = "run_command", stream = "stderr", text = "two\n",
                   dropped = 5 }
      s:on_event { type = "tool_output_delta", id = "c1", name = "run_command", stream = "stdout",
                   text = string.rep("é", 6000) }
      s:on_event { type = "tool_result", id = "c1", name = "run_command", status = "ok", content = "done" }
      lash.sleep(0.2)
      local live = {}
      for _, u in ipairs(ed.updates) do
        if u.sessionUpdate == "tool_call_update" and u.status == "in_progress" then live[#live + 1] = u end
      end
      assert.equal(3, #live)
      assert.equal("c1", live[1].toolCallId)
      assert.equal("one\n", live[1].content[1].content.text)
      assert.equal("one\n[… 5 bytes left out …]\ntwo\n", live[2].content[1].content.text)
      local tail = live[3].content[1].content.text
      assert.is_true(#tail <= 8192)
      assert.equal(string.rep("é", 4096), tail)   -- whole characters, the newest
      local last = ed.updates[#ed.updates]
      assert.equal("completed", last.status)
      assert.equal("done", last.content[1].content.text)
      ed.close()
    end):join()
  end)
  it("asks before an edit in ask mode, never before a read, and reports both", function()
    lash.spawn(function()
      local ed = editor(function() return "allow_once" end)
      local r = ed.prompt("go")
      assert.equal("end_turn", r.stopReason)
      assert.equal(1, #ed.asked)
      assert.equal("Write a.txt", ed.asked[1].toolCall.title)
      assert.equal("edit", ed.asked[1].toolCall.kind)
      assert.equal("/workspace/a.txt", ed.asked[1].toolCall.content[1].path)
      assert.same({ "a.txt" }, ed.wrote)
      local kinds = {}
      for _, u in ipairs(ed.updates) do kinds[#kinds + 1] = u.sessionUpdate .. ":" .. tostring(u.status) end
      assert.truthy(table.concat(kinds, " "):find("tool_call_update:completed", 1, true))
      ed.close()
    end):join()
  end)
  it("runs nothing the user rejects, and stops asking after always allow", function()
    lash.spawn(function()
      local answers = { "reject_once", "allow_always" }
      local n = 0
      local ed = editor(function() n = n + 1 return answers[n] end)
      ed.prompt("go")
      assert.same({}, ed.wrote)
      ed.prompt("again")
      assert.same({ "a.txt" }, ed.wrote)
      ed.prompt("third")
      assert.equal(0, #ed.asked)
      assert.same({ "a.txt", "a.txt" }, ed.wrote)
      ed.close()
    end):join()
  end)
  it("runs freely in auto mode and refuses unknown modes and sessions", function()
    lash.spawn(function()
      local ed = editor(function() return "reject_once" end)
      ed.peer:request("session/set_mode", { sessionId = ed.sid, modeId = "auto" })
      ed.prompt("go")
      assert.equal(0, #ed.asked)
      assert.same({ "a.txt" }, ed.wrote)
      local ok, e = pcall(ed.peer.request, ed.peer, "session/set_mode", { sessionId = ed.sid, modeId = "yolo" })
      assert.is_false(ok)
      assert.equal(rpc.INVALID_PARAMS, e.code)
      ok, e = pcall(ed.peer.request, ed.peer, "session/prompt",
                    { sessionId = "x", prompt = { { type = "text", text = "a" } } })
      assert.is_false(ok)
      assert.equal(protocol.RESOURCE_NOT_FOUND, e.code)
      ed.close()
    end):join()
  end)
end)
