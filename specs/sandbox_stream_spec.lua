-- run_command's output streamed as tool_output_delta events while the
-- command runs (lash.capabilities.sandbox_stream), in a real local jail
-- (skipped where there is none), and what the model gets left unchanged.
local lash = require "lash"
local stream = require "lash.capabilities.sandbox_stream"

describe("complete_prefix", function()
  it("holds back a UTF-8 character cut at the end, and only that", function()
    local e = "\195\169"          -- é
    local euro = "\226\130\172"   -- €
    assert.equal(3, stream.complete_prefix("abc"))
    assert.equal(2, stream.complete_prefix("ab\195"))
    assert.equal(3, stream.complete_prefix("a" .. e))
    assert.equal(1, stream.complete_prefix("a\226\130"))
    assert.equal(4, stream.complete_prefix("a" .. euro))
    assert.equal(1, stream.complete_prefix("a\240\159\152"))
    assert.equal(2, stream.complete_prefix("a\128"))   -- a stray continuation byte: not held
    assert.equal(0, stream.complete_prefix(""))
  end)
end)

local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }
local it_local = jail_ok and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end)
end

describe("streamed command output in a local jail", function()
  local root, sb

  setup(function()
    if not jail_ok then return end
    root = os.tmpname()
    os.remove(root)
    os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'")
    sb = lash.sandbox.session { backend = "local", state_root = root, timeout = 300 }
  end)

  teardown(function()
    if sb then sb:close() end
    if root then os.execute("rm -rf '" .. root .. "'") end
  end)

  -- One run: the model calls run_command(command) then answers; returns the
  -- events and what the model got back.
  local function run(command, on_event)
    local events, result = {}, nil
    local agent = lash.agent {
      model = lash.script_model {
        function() return { tool_calls = { { name = "run_command", args = { command = command } } } } end,
        function(messages)
          result = messages[#messages].parts[1].content
          return "done"
        end,
      },
      capabilities = { lash.sandbox_capability { session = sb } },
    }
    agent:run("go", { on_event = function(ev)
      events[#events + 1] = ev
      if on_event then on_event(ev) end
    end })
    return events, result
  end

  local function joined(events, which)
    local out = {}
    for _, ev in ipairs(events) do
      if ev.type == "tool_output_delta" and ev.stream == which then out[#out + 1] = ev.text end
    end
    return table.concat(out)
  end

  it_local("delivers output while the command still runs (it waits for what the reader does)", function()
    sb:exec("rm -f go")
    -- the command can only finish if its first line reached on_event while it ran
    local events, result = run("echo ready; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
      .. "[ -e go ] && echo released", function(ev)
        if ev.type == "tool_output_delta" and ev.text:find("ready", 1, true) then sb:write_file("go", "") end
      end)
    assert.equal("ready\nreleased\n", joined(events, "stdout"))
    assert.equal("[stdout]\nready\nreleased", (result:gsub("\n%[exit code: 0%]$", "")))
    -- every delta sits between the call and its result, and carries the call's id
    local call_at, result_at
    for i, ev in ipairs(events) do
      if ev.type == "tool_call" then call_at = i end
      if ev.type == "tool_result" then result_at = i end
    end
    for i, ev in ipairs(events) do
      if ev.type == "tool_output_delta" then
        assert.is_true(i > call_at and i < result_at)
        assert.equal(events[call_at].id, ev.id)
        assert.equal("run_command", ev.name)
      end
    end
  end)

  it_local("keeps the streams apart, and leaves the model's result as it is without streaming", function()
    local cmd = "printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2'; printf '\\303'; printf '\\251\\n'; exit 3"
    local events, streamed = run(cmd)
    assert.equal("out1\nout2é\n", joined(events, "stdout"))
    assert.equal("err1\n", joined(events, "stderr"))
    local plain
    local agent = lash.agent {
      model = lash.script_model {
        function() return { tool_calls = { { name = "run_command", args = { command = cmd } } } } end,
        function(messages) plain = messages[#messages].parts[1].content return "done" end,
      },
      capabilities = { lash.sandbox_capability { session = sb } },
    }
    agent:run("go")   -- no on_event: nothing streams
    assert.equal(plain, streamed)
  end)

  it_local("bounds what waits for a slow reader and says how much it left out", function()
    local old = stream.QUEUE_BYTES
    stream.QUEUE_BYTES = 4096
    local total, dropped = 0, 0
    local ok, err = pcall(run, "head -c 1000000 /dev/zero | tr '\\0' x", function(ev)
      if ev.type == "tool_output_delta" then
        total = total + #ev.text
        dropped = dropped + (ev.dropped or 0)
        lash.sleep(0.01)   -- a slow terminal
      end
    end)
    stream.QUEUE_BYTES = old
    assert.is_true(ok, err)
    assert.equal(1000000, total + dropped)
    assert.is_true(dropped > 0)
  end)

  it_local("loses the stream, never the command, when on_event fails", function()
    local events, result = run("echo one; echo two", function(ev)
      if ev.type == "tool_output_delta" then error("printer broke") end
    end)
    assert.matches("one\ntwo", result)
    assert.equal("one\n", joined(events, "stdout"):sub(1, 4))
  end)
end)

describe("published ports of a run", function()
  it("refuses a publish list that is not ports", function()
    for _, bad in ipairs { "8000", { 0 }, { 70000 }, { 80.5 }, { x = 1 } } do
      local ok, err = pcall(lash.sandbox_capability, { publish = bad })
      assert.is_false(ok)
      assert.matches("publish must be a", tostring(err))
    end
  end)

  it_local("relays a port of the run's sandbox to the host while the run lasts, and says where", function()
    local addr, body
    local root = os.tmpname()
    os.remove(root)
    os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'")
    local function host(argv)
      local p = lash.proc.spawn { argv = argv }
      local out = {}
      for c in function() return p:read() end do out[#out + 1] = c end
      p:wait()
      p:close()
      return table.concat(out)
    end
    local agent = lash.agent {
      model = lash.script_model {
        function() return { tool_calls = { { name = "start_command", args = {
          command = "mkdir -p w && echo hi > w/x.txt && exec python3 -m http.server 8123 --bind 127.0.0.1 -d w" } } } }
        end,
        function()
          for _ = 1, 50 do
            body = host { "curl", "-sf", "http://" .. addr .. "/x.txt" }
            if body ~= "" then break end
            lash.sleep(0.2)
          end
          return "done"
        end,
      },
      capabilities = { lash.sandbox_capability { backend = "local", state_root = root, publish = { 8123 },
                                                 tools = { "start_command" } } },
    }
    agent:run("go", { on_event = function(ev) if ev.type == "port_published" then addr = ev.address end end })
    os.execute("rm -rf '" .. root .. "'")
    assert.matches("^127%.0%.0%.1:%d+$", addr)
    assert.equal("hi\n", body)
    -- the run is over: nothing listens there any more
    assert.equal("000", host { "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://" .. addr .. "/" })
  end)
end)
