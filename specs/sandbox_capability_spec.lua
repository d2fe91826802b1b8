-- lash.sandbox_capability: construction checks (every message), the four
-- tools and their schemas, instructions, the three modes and their
-- lifecycles, and the error mapping -- against a fake backend that
-- records its calls (specs/helpers/fake_sandbox.lua), then on the real
-- local backend (skipped where bubblewrap or user namespaces are missing).
local lash = require "lash"
local json = require "lash.json"
local fakes = require "helpers.fake_sandbox"
local sbcap = require "lash.capabilities.sandbox"

local SUFFIX = "\n\nFix the errors and try again."

local function refused(opts)
  local ok, err = pcall(lash.sandbox_capability, opts)
  assert.is_false(ok, "expected the options to be refused")
  return (tostring(err):gsub("^lash%.sandbox_capability: ", ""))
end

-- Run an agent whose model makes `calls` at step 1 and answers at step 2;
-- returns the tool results (parts, in call order) and the run's result.
local function run_calls(cap, calls, opts)
  local got
  local agent = lash.agent {
    model = lash.script_model {
      { tool_calls = calls },
      function(messages) got = messages[#messages].parts return "done" end,
    },
    capabilities = { cap },
  }
  local res = agent:run("go", opts)
  return got, res
end

local function one(cap, name, args)
  local parts = run_calls(cap, { { name = name, args = args } })
  return parts[1].content, parts[1].status
end

local function run_failing(cap, calls)
  local agent = lash.agent {
    model = lash.script_model { { tool_calls = calls }, "unreachable" },
    capabilities = { cap },
  }
  local ok, err = pcall(agent.run, agent, "go")
  assert.is_false(ok, "expected the run to fail")
  return err
end

local function render(cap, names)
  local list = cap:get_instructions()
  if #list == 0 then return nil end
  return lash.render(list[1], { tools = names or {} })
end

describe("construction", function()
  local f = fakes.new { create_options = { "image" }, config_options = { "endpoint" } }
  local nofs = fakes.new { tags = false }

  it("has the documented defaults and is owned", function()
    local cap = lash.sandbox_capability {}
    assert.equal("Sandbox", cap.name)
    assert.equal("owned", cap.mode)
    assert.same({ backend = "local", app_name = "lash", create_app_if_missing = true, sandbox_timeout = 300,
                  default_command_timeout = 60, max_output_bytes = 51200, max_output_lines = 2000,
                  max_read_bytes = 5242880 }, cap.opts)
    assert.equal(300, cap.ceiling)
  end)

  it("wants positive integers where integers are meant", function()
    for _, name in ipairs { "sandbox_timeout", "max_output_bytes", "max_output_lines", "max_read_bytes" } do
      assert.equal(name .. " must be a positive integer, got 0.", refused { [name] = 0 })
      assert.equal(name .. " must be a positive integer, got -1.", refused { [name] = -1 })
      assert.equal(name .. " must be a positive integer, got 1.5.", refused { [name] = 1.5 })
      -- an exact integer, as the reference's int check: a whole float is refused too
      assert.equal(name .. " must be a positive integer, got 300.0.", refused { [name] = 300.0 })
      assert.equal(name .. " must be a positive integer, got true.", refused { [name] = true })
      assert.equal(name .. " must be a positive integer, got '10'.", refused { [name] = "10" })
    end
    assert.equal(600, lash.sandbox_capability { sandbox_timeout = 600 }.opts.sandbox_timeout)
  end)

  it("wants a positive finite default_command_timeout", function()
    for _, v in ipairs { 0, -1, 0 / 0, math.huge, true, "60" } do
      assert.matches("^default_command_timeout must be a positive finite number, got ", refused {
        default_command_timeout = v })
    end
    assert.equal("default_command_timeout must be a positive finite number, got nan.",
      refused { default_command_timeout = 0 / 0 })
    assert.equal("default_command_timeout must be a positive finite number, got inf.",
      refused { default_command_timeout = math.huge })
    assert.equal(45.5, lash.sandbox_capability { default_command_timeout = 45.5 }.opts.default_command_timeout)
  end)

  it("wants max_command_timeout a positive integer or nil", function()
    assert.equal("max_command_timeout must be a positive integer or nil, got 0.", refused { max_command_timeout = 0 })
    assert.equal("max_command_timeout must be a positive integer or nil, got 2.5.",
      refused { max_command_timeout = 2.5 })
  end)

  it("wants instructions a string or nil", function()
    assert.equal("instructions must be a string or nil, got 123. Give the text to use instead of the default, or "
      .. "'' for none.", refused { instructions = 123 })
  end)

  it("refuses a ceiling above an owned sandbox's lifetime", function()
    assert.equal("max_command_timeout (600) cannot exceed sandbox_timeout (300) for an owned sandbox: the sandbox "
      .. "is reaped before such a command could finish. Raise sandbox_timeout instead.",
      refused { max_command_timeout = 600 })
    assert.equal(600, lash.sandbox_capability { max_command_timeout = 600, sandbox_timeout = 600 }.ceiling)
  end)

  it("lets a reused sandbox raise the ceiling above 300", function()
    local cap = lash.sandbox_capability { backend = f.name, sandbox_id = "sb-1", max_command_timeout = 900 }
    assert.equal("attached", cap.mode)
    assert.equal(900, cap.ceiling)
    assert.equal(300, lash.sandbox_capability { backend = f.name, sandbox_id = "sb-1" }.ceiling)
  end)

  it("refuses creation-only options with sandbox_id, listing every one", function()
    for _, o in ipairs {
      { image = "python:3.12-slim" }, { sandbox_timeout = 600 }, { workdir = "/w" }, { env = { A = "1" } },
      { network = "on" },
    } do
      o.backend, o.sandbox_id = f.name, "sb-1"
      local k = next(o)
      while k == "backend" or k == "sandbox_id" do k = next(o, k) end
      assert.matches("^" .. k .. " only apply when creating a sandbox, but `sandbox_id` attaches to an existing "
        .. "one%. Remove them, or drop `sandbox_id` to create a sandbox%.", refused(o))
    end
    -- the reference's words for one name or several
    assert.equal("image, sandbox_timeout only apply when creating a sandbox, but `sandbox_id` attaches to an "
      .. "existing one. Remove them, or drop `sandbox_id` to create a sandbox. To raise the per-command timeout "
      .. "ceiling on a reused sandbox, set `max_command_timeout`.",
      refused { backend = f.name, sandbox_id = "sb-1", image = "x", sandbox_timeout = 600 })
    assert.equal("workdir only apply when creating a sandbox, but `sandbox_id` attaches to an existing one. "
      .. "Remove them, or drop `sandbox_id` to create a sandbox.",
      refused { backend = f.name, sandbox_id = "sb-1", workdir = "/w" })
  end)

  it("tracks whether an option was set, not whether it differs from its default", function()
    assert.matches("^sandbox_timeout only apply", refused { backend = f.name, sandbox_id = "sb-1",
                                                            sandbox_timeout = 300 })
    assert.matches("^env only apply", refused { backend = f.name, sandbox_id = "sb-1", env = {} })
    assert.matches("^rootfs only apply", refused { sandbox_id = "lb-x", rootfs = "/" })
  end)

  it("allows sandbox_id with only defaults and the backend's config options", function()
    local cap = lash.sandbox_capability { backend = f.name, sandbox_id = "sb-1", endpoint = "x",
                                          default_command_timeout = 5 }
    assert.equal("attached", cap.mode)
  end)

  it("refuses session together with creation options or sandbox_id", function()
    local s <close> = lash.sandbox.session { backend = f.name }
    assert.equal("sandbox_id cannot be combined with `session`, which already owns the sandbox and its "
      .. "configuration.", refused { session = s, sandbox_id = "sb-1" })
    assert.equal("sandbox_timeout cannot be combined with `session`, which already owns the sandbox and its "
      .. "configuration. To raise the per-command timeout ceiling on a reused sandbox, set `max_command_timeout`.",
      refused { session = s, sandbox_timeout = 600 })
    assert.equal("image, env cannot be combined with `session`, which already owns the sandbox and its "
      .. "configuration.", refused { session = s, image = "x", env = {} })
    local cap = lash.sandbox_capability { session = s, max_command_timeout = 900 }
    assert.equal("shared", cap.mode)
    assert.equal(f.name, cap.backend)
    assert.equal(900, cap.ceiling)
    assert.matches("does not match the session's backend", refused { session = s, backend = "local" })
    assert.equal("session must be a lash.sandbox object (from lash.sandbox.session{...}), got 'sb-1'.",
      refused { session = "sb-1" })
  end)

  it("refuses an option the chosen backend does not have", function()
    assert.equal("the local backend has no option image; remove it, or choose a backend that has it (its own "
      .. "options: isolation, limits, rootfs, bwrap, state_root).", refused { image = "python:3.12-slim" })
    assert.matches("^the " .. f.name .. " backend has no option rootfs", refused { backend = f.name, rootfs = "/" })
    assert.matches("^the " .. f.name .. " backend has no option app_name, create_app_if_missing; remove them",
      refused { backend = f.name, app_name = "x", create_app_if_missing = false })
  end)

  it("refuses unknown options and unknown backends", function()
    assert.matches("^unknown option colour %(the local backend's sandbox capability takes: .*rootfs.*%)%.$",
      refused { colour = "red" })
    assert.matches("^backend: unknown sandbox backend 'nope' %(known: .*local.*%)%.$", refused { backend = "nope" })
    assert.equal("backend must be the name of a sandbox backend (e.g. 'local', 'modal'), got 7.",
      refused { backend = 7 })
  end)

  it("checks workdir, env and network", function()
    assert.equal("workdir must be an absolute path, got 'rel/dir'.", refused { workdir = "rel/dir" })
    assert.equal("env['A'] must be a string, got 1 (convert it with tostring).", refused { env = { A = 1 } })
    assert.equal("env has a bad variable name 'A=B'; names are non-empty strings without '='.",
      refused { env = { ["A=B"] = "x" } })
    assert.matches("^network: ", refused { network = "sometimes" })
    assert.matches("^network: .*allow%-list", refused { network = { block_network = false,
                                                                     allow_egress_to = { "x.org" } } })
  end)

  it("passes the backend's own options through", function()
    local cap = lash.sandbox_capability { backend = f.name, image = "img", endpoint = "e" }
    assert.same({ image = "image", endpoint = "endpoint" }, cap.pass)
  end)

  it("knows which backends cannot hold tags (for attach_to)", function()
    assert.matches("^attach_to needs a backend that can hold tags",
      refused { backend = nofs.name, attach_to = "sb-1", owner = "o" })
  end)
end)

describe("tools", function()
  it("are the four, with the reference's names, schemas and descriptions", function()
    local cap = lash.sandbox_capability {}
    local tools = cap:get_toolsets()[1]:get_tools()
    local names = {}
    for i, t in ipairs(tools) do names[i] = t.name end
    assert.same({ "run_command", "read_file", "write_file", "list_directory" }, names)
    local fmt = require "lash.capabilities.sandbox_format"
    assert.equal(fmt.RUN_COMMAND, tools[1].description)
    -- as pydantic-ai renders the reference's docstring (a Returns: section
    -- makes it XML; griffe finds no type for it)
    assert.equal("<summary>Run a shell command in the sandbox and return its output.\n\nThe command runs through "
      .. "`sh -c`, so pipes, redirection, `&&`, and globs\nwork. A non-zero exit is reported, not raised, so you "
      .. "can react to it.</summary>\n<returns>\n<description>Labelled stdout/stderr output, with an exit code on "
      .. "non-zero exit.</description>\n</returns>", tools[1].description)
    assert.equal("Read a text file from the sandbox and return its contents.\n\nLarge files are truncated to a "
      .. "safety cap; the result ends with the next\n`offset` to use to page through the rest.", tools[2].description)
    assert.equal("Write text to a file in the sandbox, creating parent directories.", tools[3].description)
    assert.equal("List the entries in a sandbox directory (directories shown with a trailing `/`).",
      tools[4].description)
    assert.same({ code_arg_name = "command", code_arg_language = "shell" }, tools[1].metadata)
    local d = tools[1]:definition()
    assert.equal('{"additionalProperties":false,"properties":{"command":{"description":"The shell command to run.",'
      .. '"type":"string"},"timeout_seconds":{"anyOf":[{"type":"number"},{"type":"null"}],"default":null,'
      .. '"description":"Maximum seconds to wait (default: the configured timeout)."}},"required":["command"],'
      .. '"type":"object"}', json.encode_canonical(d.parameters))
    assert.equal('{"additionalProperties":false,"properties":{"limit":{"anyOf":[{"type":"integer"},{"type":"null"}],'
      .. '"default":null,"description":"Maximum number of lines to read"},"offset":{"anyOf":[{"type":"integer"},'
      .. '{"type":"null"}],"default":null,"description":"Line number to start reading from (1-indexed)"},"path":{'
      .. '"description":"Path to the file inside the sandbox. Relative paths are resolved\\nagainst the working '
      .. 'directory used by `run_command`.","type":"string"}},"required":["path"],"type":"object"}',
      json.encode_canonical(tools[2]:definition().parameters))
    assert.same({ "path", "content" }, tools[3].parameters.required)
    assert.equal(".", tools[4].parameters.properties.path.default)
    assert.equal("Directory to list. Relative paths (including the default `.`) are\nresolved against the working "
      .. "directory used by `run_command`.", tools[4].parameters.properties.path.description)
    assert.is_nil(tools[4].parameters.required)
  end)

  it("raise, not retry, when called outside an opened run", function()
    local cap = lash.sandbox_capability {}
    local t = cap:get_toolsets()[1]:get_tools()[1]
    local ok, err = pcall(t.handler, {}, { command = "true" })
    assert.is_false(ok)
    assert.equal("config", err.kind)
    assert.matches("not open for a run", err.message)
  end)
end)

describe("instructions", function()
  local f = fakes.new {}

  it("are on by default, name the tools, and say an owned sandbox is reset", function()
    local text = render(lash.sandbox_capability {})
    assert.matches("local sandbox", text, 1, true)
    assert.matches("Use `run_command` to run shell commands", text, 1, true)
    assert.matches("reset between runs", text, 1, true)
    assert.matches("times out after 60s unless you pass `timeout_seconds` (up to 300s)", text, 1, true)
  end)

  it("say an attached or shared sandbox persists across runs", function()
    assert.matches("persists across runs", render(lash.sandbox_capability { backend = f.name, sandbox_id = "x" }))
    local s <close> = lash.sandbox.session { backend = f.name }
    assert.matches("persists across runs", render(lash.sandbox_capability { session = s }))
  end)

  it("state the timeouts as enforced", function()
    local text = render(lash.sandbox_capability { default_command_timeout = 45.5, sandbox_timeout = 120 })
    assert.matches("times out after 46s", text, 1, true)
    assert.matches("up to 120s", text, 1, true)
    text = render(lash.sandbox_capability { backend = f.name, sandbox_id = "x", max_command_timeout = 900 })
    assert.matches("up to 900s", text, 1, true)
    text = render(lash.sandbox_capability { backend = f.name, sandbox_id = "x", default_command_timeout = 400 })
    assert.matches("times out after 300s unless you pass `timeout_seconds` (up to 300s)", text, 1, true)
  end)

  it("can be replaced or turned off", function()
    assert.equal("Use the box.", render(lash.sandbox_capability { instructions = "Use the box." }))
    assert.same({}, lash.sandbox_capability { instructions = "" }:get_instructions())
  end)

  it("name the prefixed tools an agent actually exposes", function()
    local seen
    local agent = lash.agent {
      model = function(_, info) seen = info return "ok" end,
      capabilities = { lash.prefix_tools { prefix = "box", capability = lash.sandbox_capability { backend = f.name } } },
    }
    agent:run("hi")
    assert.matches("Use `box_run_command` to run shell commands in it, and `box_read_file` / `box_write_file` / "
      .. "`box_list_directory` to manage files.", seen.instructions, 1, true)
    assert.equal("box_run_command", seen.tools[1].name)
  end)
end)

describe("owned mode (fake backend)", function()
  local f

  before_each(function()
    f = fakes.new { create_options = { "image" } }
  end)

  it("creates the sandbox before the first model call and destroys it at run end", function()
    local before_model
    local agent = lash.agent {
      model = function() before_model = #f.created return "no tools needed" end,
      capabilities = { lash.sandbox_capability { backend = f.name } },
    }
    local res = agent:run("hi")
    assert.equal("no tools needed", res.output)
    assert.equal(1, before_model)
    assert.same(f.created, f.destroyed)
  end)

  it("forwards the creation options", function()
    one(lash.sandbox_capability { backend = f.name, sandbox_timeout = 120, workdir = "/w", env = { A = "1" },
                                  image = "python:3.12-slim", network = "on" }, "run_command", { command = "true" })
    local spec = f.calls_of("create")[1].spec
    assert.equal(120, spec.timeout)
    assert.equal("/w", spec.workdir)
    assert.same({ A = "1" }, spec.env)
    assert.equal("python:3.12-slim", spec.image)
    assert.is_false(spec.network.block_network)
  end)

  it("gives each run its own sandbox", function()
    local cap = lash.sandbox_capability { backend = f.name }
    local agent = lash.agent { model = lash.script_model { "a", "b" }, capabilities = { cap } }
    agent:run("1")
    agent:run("2")
    assert.equal(2, #f.created)
    assert.same(f.created, f.destroyed)
  end)

  it("runs sh -c with the default deadline and the output cap", function()
    local out = one(lash.sandbox_capability { backend = f.name, default_command_timeout = 30,
                                              max_output_bytes = 1000 }, "run_command", { command = "echo hello" })
    assert.equal("[stdout]\necho hello", out)
    local call = f.calls_of("exec")[1]
    assert.same({ "sh", "-c", "echo hello" }, call.argv)
    assert.equal(30, call.opts.timeout)
    assert.equal(1000, call.opts.max_output_bytes)
  end)

  it("computes each deadline as min(max(1, ceil(t)), ceiling)", function()
    local function timeout_for(opts, t)
      f = fakes.new {}
      opts.backend = f.name
      one(lash.sandbox_capability(opts), "run_command", { command = "x", timeout_seconds = t })
      return f.calls_of("exec")[1].opts.timeout
    end
    assert.equal(12, timeout_for({}, 12.0))
    assert.equal(120, timeout_for({ sandbox_timeout = 120 }, 9999))
    assert.equal(50, timeout_for({ max_command_timeout = 50 }, 9999))
    assert.equal(1, timeout_for({}, 0.5))
    assert.equal(60, timeout_for({}, json.null))
  end)

  it("sends a bad timeout back to the model without running anything", function()
    local parts = run_calls(lash.sandbox_capability { backend = f.name }, {
      { name = "run_command", args = { command = "x", timeout_seconds = 0 } },
      { name = "run_command", args = { command = "x", timeout_seconds = -5.5 } },
    })
    assert.equal("timeout_seconds must be greater than 0, got 0.0." .. SUFFIX, parts[1].content)
    assert.equal("retry", parts[1].status)
    assert.equal("timeout_seconds must be greater than 0, got -5.5." .. SUFFIX, parts[2].content)
    assert.equal(0, #f.calls_of("exec"))
  end)

  it("formats the command's result (exit code, timeout, truncation)", function()
    f.responder = function(argv)
      if argv[3] == "fail" then return { stdout = "out\n", stderr = "err\n", exit_code = 2 } end
      if argv[3] == "slow" then return { stdout = "partial\n", exit_code = 137, timed_out = true, applied_timeout = 5 } end
      if argv[3] == "big" then return { stdout = ("x"):rep(999) .. "\n" } end
      return { stdout = "" }
    end
    local parts = run_calls(lash.sandbox_capability { backend = f.name, max_output_bytes = 100 }, {
      { name = "run_command", args = { command = "fail" } },
      { name = "run_command", args = { command = "slow", timeout_seconds = 5 } },
      { name = "run_command", args = { command = "big" } },
      { name = "run_command", args = { command = "quiet" } },
    })
    assert.equal("[stdout]\nout\n[stderr]\nerr\n[exit code: 2]", parts[1].content)
    assert.equal("[stdout]\npartial\n[timed out after 5s]", parts[2].content)
    assert.equal("[stdout]\n[... output truncated to the last 100B ...]\n" .. ("x"):rep(99), parts[3].content)
    assert.equal("(no output)", parts[4].content)
    for _, p in ipairs(parts) do assert.equal("ok", p.status) end
  end)

  it("keeps output ending in END when the backend's ring is fed 1 byte at a time", function()
    f = fakes.new { chunk_size = 1 }
    f.responder = function() return { stdout = ("X"):rep(100) .. "\nEND" } end
    local out = one(lash.sandbox_capability { backend = f.name, max_output_bytes = 50 }, "run_command",
      { command = "x" })
    assert.equal("[stdout]\n[... output truncated to the last 50B ...]\n" .. ("X"):rep(46) .. "\nEND", out)
  end)

  it("turns a recoverable exec error into a retry prompt", function()
    f.inject("exec", f.sandbox_error("start_failed", "Command could not run in the sandbox: transient blip"))
    local out, status = one(lash.sandbox_capability { backend = f.name }, "run_command", { command = "x" })
    assert.equal("retry", status)
    assert.equal("Command could not run in the sandbox: transient blip" .. SUFFIX, out)
  end)

  it("ends the run on a terminal error, saying what to do, and still destroys the sandbox", function()
    f.inject("exec", f.terminal_error("unavailable", "expired", "the sandbox expired"))
    local err = run_failing(lash.sandbox_capability { backend = f.name, sandbox_timeout = 120 },
      { { name = "run_command", args = { command = "x" } } })
    assert.equal("unavailable", err.kind)
    assert.is_true(err.terminal)
    assert.equal("The " .. f.name .. " sandbox '" .. f.created[1] .. "' is no longer available: the sandbox "
      .. "expired. It may have reached its sandbox_timeout of 120s, or been destroyed. Start a new run, or raise "
      .. "sandbox_timeout for longer work.", err.message)
    assert.same(f.created, f.destroyed)
  end)

  it("ends the run when the credentials are refused", function()
    f.inject("write_file", f.terminal_error("auth", "auth", "token rejected"))
    local err = run_failing(lash.sandbox_capability { backend = f.name },
      { { name = "write_file", args = { path = "a", content = "b" } } })
    assert.equal("auth", err.kind)
    assert.equal("The " .. f.name .. " backend rejected the credentials: token rejected. Check the credentials it "
      .. "uses, then start a new run.", err.message)
    assert.same(f.created, f.destroyed)
  end)

  it("destroys the sandbox when the run fails for another reason, or is cancelled", function()
    local agent = lash.agent { model = function() error("model broke") end,
                               capabilities = { lash.sandbox_capability { backend = f.name } } }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.matches("model broke", tostring(err), 1, true)
    assert.equal(1, #f.created)
    assert.same(f.created, f.destroyed)
    local started = lash.future()
    agent = lash.agent { model = function() started:set() lash.sleep(30) return "late" end,
                         capabilities = { lash.sandbox_capability { backend = f.name } } }
    local task = agent:start("x")
    started:wait()
    task:cancel()
    ok, err = pcall(task.join, task)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.equal(2, #f.created)
    assert.same(f.created, f.destroyed)
  end)

  it("fails the run before any model call when the sandbox cannot be created", function()
    f.inject("create", f.terminal_error("unavailable", "no_isolation", "no user namespaces here"))
    local called = false
    local agent = lash.agent { model = function() called = true return "x" end,
                               capabilities = { lash.sandbox_capability { backend = f.name } } }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.is_false(called)
    assert.equal("unavailable", err.kind)
    assert.equal("Could not start a " .. f.name .. " sandbox: no user namespaces here", err.message)
  end)

  it("only logs a failed destroy", function()
    f.inject("destroy", f.sandbox_error("busy", "control plane busy"))
    local logged = {}
    local cap = lash.sandbox_capability { backend = f.name, log = function(level, msg)
      logged[#logged + 1] = level .. ": " .. msg
    end }
    local res = lash.agent { model = lash.script_model { "fine" }, capabilities = { cap } }:run("x")
    assert.equal("fine", res.output)
    assert.equal(1, #logged)
    assert.matches("^warning: Failed to destroy sandbox " .. f.created[1]:gsub("%-", "%%-") .. " on backend "
      .. f.name .. "; it may need manual cleanup %(its sandbox_timeout of 300s ends it anyway%)", logged[1])
  end)

  it("reads files: whole, paged, refused when too large or binary, errors as retries", function()
    f.responder = nil
    local cap = lash.sandbox_capability { backend = f.name, max_read_bytes = 1000, max_output_lines = 3 }
    local agent = lash.agent {
      model = lash.script_model {
        function()
          local id = f.created[1]
          f.put(id, "/work/a.txt", "one\ntwo\n")
          f.put(id, "/work/long.txt", "L0\nL1\nL2\nL3\nL4\n")
          f.put(id, "/work/big.txt", ("x"):rep(5000))
          f.put(id, "/work/bin", "\0\1\2\255")
          f.put(id, "/work/grew.txt", ("y"):rep(2000))
          f.stat_sizes["/work/grew.txt"] = 10
          f.mkdir(id, "/work/dir")
          return { tool_calls = {
            { name = "read_file", args = { path = "a.txt" } },
            { name = "read_file", args = { path = "/work/long.txt" } },
            { name = "read_file", args = { path = "long.txt", offset = 2, limit = 2 } },
            { name = "read_file", args = { path = "big.txt" } },
            { name = "read_file", args = { path = "bin" } },
            { name = "read_file", args = { path = "/nope" } },
            { name = "read_file", args = { path = "grew.txt" } },
            { name = "read_file", args = { path = "dir" } },
            { name = "read_file", args = { path = "a.txt", offset = 0 } },
            { name = "read_file", args = { path = "a.txt", offset = 9 } },
          } }
        end,
        function(messages) return { text = "done", parts_seen = messages } end,
      },
      capabilities = { cap },
    }
    local res = agent:run("x")
    local parts = res.messages[#res.messages - 1].parts
    assert.equal("one\ntwo", parts[1].content)
    assert.equal("L0\nL1\nL2\n\n[Showing lines 1-3 of 5. Use offset=4 to continue.]", parts[2].content)
    assert.equal("L1\nL2\n\n[2 more lines in file. Use offset=4 to continue.]", parts[3].content)
    assert.equal("File is 4.9KB, over the 1000B read limit. Read just the part you need with a shell command "
      .. "instead (e.g. head, tail, sed -n, or grep)." .. SUFFIX, parts[4].content)
    assert.equal("file is not valid UTF-8 text (it may be a binary file)." .. SUFFIX, parts[5].content)
    assert.equal("Could not read '/nope': No such file or directory" .. SUFFIX, parts[6].content)
    assert.equal("File is 2.0KB, over the 1000B read limit. Read just the part you need with a shell command "
      .. "instead (e.g. head, tail, sed -n, or grep)." .. SUFFIX, parts[7].content)
    assert.equal("Could not read 'dir': it is a directory. List it with list_directory instead." .. SUFFIX,
      parts[8].content)
    assert.equal("offset must be >= 1 (lines are 1-indexed), got 0" .. SUFFIX,
      parts[9].content)
    assert.equal("offset 9 is beyond end of file (2 lines total)" .. SUFFIX, parts[10].content)
    -- the too-large file was refused from its size, before any read
    for _, c in ipairs(f.calls_of("read_file")) do assert.is_not.equal("big.txt", c.path) end
    -- relative paths reach the backend as given: it resolves them against the workdir
    assert.equal("a.txt", f.calls_of("stat")[1].path)
  end)

  it("writes files and reports UTF-8 bytes", function()
    local parts = run_calls(lash.sandbox_capability { backend = f.name }, {
      { name = "write_file", args = { path = "/tmp/pkg/a.py", content = "print(1)\n" } },
      { name = "write_file", args = { path = "é.txt", content = "héllo" } },
      { name = "write_file", args = { path = "/tmp/bad", content = "\xed\xa0\x80" } },
    })
    assert.equal("Wrote 9 bytes to '/tmp/pkg/a.py'.", parts[1].content)
    assert.equal("Wrote 6 bytes to 'é.txt'.", parts[2].content)
    assert.equal("content contains characters that cannot be encoded as UTF-8 (unpaired surrogates)." .. SUFFIX,
      parts[3].content)
    assert.equal("print(1)\n", f.file(f.created[1], "/tmp/pkg/a.py"))
    assert.equal("héllo", f.file(f.created[1], "/work/é.txt"))
    f.inject("write_file", f.sandbox_error("denied", "Permission denied"))
    local out = one(lash.sandbox_capability { backend = f.name }, "write_file", { path = "/root/x", content = "x" })
    assert.equal("Could not write '/root/x': Permission denied" .. SUFFIX, out)
  end)

  it("lists directories", function()
    local agent = lash.agent {
      model = lash.script_model {
        function()
          local id = f.created[1]
          f.put(id, "/work/src/b.txt", "")
          f.put(id, "/work/src/a.txt", "")
          f.mkdir(id, "/work/src/a")
          f.put(id, "/etc/hosts", "x")
          return { tool_calls = {
            { name = "list_directory", args = {} },
            { name = "list_directory", args = { path = "src" } },
            { name = "list_directory", args = { path = "/etc/hosts" } },
            { name = "list_directory", args = { path = "/work/src/a" } },
          } }
        end,
        "done",
      },
      capabilities = { lash.sandbox_capability { backend = f.name } },
    }
    local res = agent:run("x")
    local parts = res.messages[#res.messages - 1].parts
    assert.equal("src/", parts[1].content)
    assert.equal("a/\na.txt\nb.txt", parts[2].content)
    assert.equal("Could not list '/etc/hosts': Not a directory" .. SUFFIX, parts[3].content)
    assert.equal("(empty)", parts[4].content)
    assert.equal(".", f.calls_of("list_dir")[1].path)
  end)
end)

describe("attached mode (fake backend)", function()
  local f

  before_each(function()
    f = fakes.new {}
  end)

  it("uses the given sandbox, never creates or destroys one", function()
    local id = f.add {}
    local cap = lash.sandbox_capability { backend = f.name, sandbox_id = id }
    local out = one(cap, "run_command", { command = "echo hi" })
    assert.equal("[stdout]\necho hi", out)
    assert.equal(id, f.calls_of("exec")[1].id)
    assert.same({}, f.created)
    assert.same({}, f.destroyed)
    assert.is_true(f.boxes[id].alive)
    assert.equal(1, #f.calls_of("poll"))
  end)

  it("caps commands at 300 s when the lifetime is unknown, or at max_command_timeout", function()
    local id = f.add {}
    one(lash.sandbox_capability { backend = f.name, sandbox_id = id }, "run_command",
      { command = "x", timeout_seconds = 9999 })
    assert.equal(300, f.calls_of("exec")[1].opts.timeout)
    one(lash.sandbox_capability { backend = f.name, sandbox_id = id, max_command_timeout = 900 }, "run_command",
      { command = "x", timeout_seconds = 9999 })
    assert.equal(900, f.calls_of("exec")[2].opts.timeout)
  end)

  it("keeps the stated 300 s ceiling, then cuts to what is left of the lifetime", function()
    local saved = sbcap.clock
    local wall, mono = 1000000, 50
    sbcap.clock = { wall = function() return wall end, mono = function() return mono end }
    local ok, err = pcall(function()
      local id = f.add { expires_at = wall + 1000 }
      local cap = lash.sandbox_capability { backend = f.name, sandbox_id = id }
      local agent = lash.agent {
        model = lash.script_model {
          { tool_calls = { { name = "run_command", args = { command = "a", timeout_seconds = 9999 } } } },
          function() mono = mono + 995.5 return { tool_calls = { { name = "run_command", args = { command = "b" } } } } end,
          function() mono = mono + 10 return { tool_calls = { { name = "run_command", args = { command = "c" } } } } end,
          "done",
        },
        capabilities = { cap },
      }
      agent:run("x")
      local calls = f.calls_of("exec")
      assert.equal(300, calls[1].opts.timeout)   -- the instructions say "up to 300s"
      assert.equal(4, calls[2].opts.timeout)
      assert.equal(1, calls[3].opts.timeout)
    end)
    sbcap.clock = saved
    assert(ok, err)
  end)

  it("fails at run start when the sandbox has ended", function()
    local id = f.add {}
    f.boxes[id].alive = false
    local called = false
    local agent = lash.agent { model = function() called = true return "x" end,
                               capabilities = { lash.sandbox_capability { backend = f.name, sandbox_id = id } } }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.is_false(called)
    assert.equal("unavailable", err.kind)
    assert.equal("Could not attach to sandbox '" .. id .. "' on backend '" .. f.name .. "': it does not exist or "
      .. "has ended (terminated)", err.message)
  end)

  it("ends the run on a terminal error without mentioning sandbox_timeout, and leaves the sandbox", function()
    local id = f.add {}
    f.inject("exec", f.terminal_error("unavailable", "gone", "it was destroyed"))
    local err = run_failing(lash.sandbox_capability { backend = f.name, sandbox_id = id },
      { { name = "run_command", args = { command = "x" } } })
    assert.equal("The attached " .. f.name .. " sandbox '" .. id .. "' is no longer available (destroyed, or "
      .. "expired at its configured lifetime): it was destroyed. Attach to a live sandbox, or create a new one.",
      err.message)
    assert.is_nil(err.message:find("sandbox_timeout", 1, true))
    assert.same({}, f.destroyed)
  end)

  it("is carried to every run", function()
    local id = f.add {}
    local cap = lash.sandbox_capability { backend = f.name, sandbox_id = id }
    one(cap, "write_file", { path = "/work/a", content = "1" })
    assert.equal("1", one(cap, "read_file", { path = "/work/a" }))
    assert.same({}, f.created)
  end)
end)

describe("shared mode (fake backend)", function()
  it("reuses the caller's session across runs and leaves it to the caller", function()
    local f = fakes.new {}
    local s = lash.sandbox.session { backend = f.name }
    local cap = lash.sandbox_capability { session = s }
    one(cap, "write_file", { path = "note.txt", content = "kept" })
    assert.equal("kept", one(cap, "read_file", { path = "note.txt" }))
    assert.equal(1, #f.created)
    assert.same({}, f.destroyed)
    s:close()
    assert.same(f.created, f.destroyed)
    local agent = lash.agent { model = lash.script_model { "x" }, capabilities = { cap } }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.matches("The shared sandbox session is closed", err.message, 1, true)
  end)

  it("ends the run on a terminal error and points at a new session", function()
    local f = fakes.new {}
    local s <close> = lash.sandbox.session { backend = f.name }
    f.inject("exec", f.terminal_error("unavailable", "gone", "gone"))
    local err = run_failing(lash.sandbox_capability { session = s }, { { name = "run_command", args = { command = "x" } } })
    assert.matches("shared through `session` is no longer available: gone. Open a new session", err.message, 1, true)
    assert.same({}, f.destroyed)
  end)
end)

---------------------------------------------------------------------------
-- The real local backend

local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }
local it_local = jail_ok and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end)
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p '" .. p .. "' && chmod 711 '" .. p .. "'"))
  return p
end

describe("the local backend", function()
  local root

  setup(function()
    root = tmpdir()
  end)

  teardown(function()
    os.execute("rm -rf '" .. root .. "'")
  end)

  it_local("owned: writes, runs, reads and lists in a real jail, then destroys it", function()
    local cap = lash.sandbox_capability { state_root = root, sandbox_timeout = 60 }
    local parts = run_calls(cap, {
      { name = "write_file", args = { path = "pkg/hello.py", content = "print('hi from the jail')\n" } },
    })
    assert.equal("Wrote 26 bytes to 'pkg/hello.py'.", parts[1].content)
    assert.same({}, lash.sandbox.list { state_root = root })
    local got = {}
    local agent = lash.agent {
      model = lash.script_model {
        { tool_calls = { { name = "write_file", args = { path = "pkg/hello.sh", content = "echo hi; echo oops >&2; "
          .. "exit 3\n" } } } },
        { tool_calls = { { name = "run_command", args = { command = "sh pkg/hello.sh" } } } },
        { tool_calls = { { name = "read_file", args = { path = "/workspace/pkg/hello.sh" } },
                         { name = "list_directory", args = {} },
                         { name = "run_command", args = { command = "sleep 5", timeout_seconds = 1 } },
                         { name = "read_file", args = { path = "/nope" } } } },
        function(messages)
          for _, m in ipairs(messages) do
            for _, p in ipairs(m.parts) do
              if p.type == "tool_result" then got[#got + 1] = p.content end
            end
          end
          return "done"
        end,
      },
      capabilities = { cap },
    }
    agent:run("x")
    assert.equal("Wrote 31 bytes to 'pkg/hello.sh'.", got[1])
    assert.equal("[stdout]\nhi\n[stderr]\noops\n[exit code: 3]", got[2])
    assert.equal("echo hi; echo oops >&2; exit 3", got[3])
    assert.equal("pkg/", got[4])
    assert.equal("(no output)\n[timed out after 1s]", got[5])
    assert.equal("Could not read '/nope': No such file or directory" .. SUFFIX, got[6])
    assert.same({}, lash.sandbox.list { state_root = root })
  end)

  it_local("owned: a sandbox that vanishes mid-run ends the run, which still cleans up", function()
    local cap = lash.sandbox_capability { state_root = root }
    local agent = lash.agent {
      model = lash.script_model {
        function()
          for _, e in ipairs(lash.sandbox.list { state_root = root }) do
            lash.sandbox.open(e.id, { state_root = root }):destroy()
          end
          return { tool_calls = { { name = "run_command", args = { command = "true" } } } }
        end,
        "unreachable",
      },
      capabilities = { cap },
    }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.equal("unavailable", err.kind)
    assert.matches("sandbox_timeout of 300s", err.message, 1, true)
    assert.same({}, lash.sandbox.list { state_root = root })
  end)

  it_local("attached: works in an existing sandbox and leaves it, files and all", function()
    local sb = lash.sandbox.create { state_root = root, timeout = 120 }
    local cap = lash.sandbox_capability { sandbox_id = sb.id, state_root = root }
    one(cap, "write_file", { path = "/workspace/kept.txt", content = "still here" })
    assert.equal("still here", one(cap, "read_file", { path = "kept.txt" }))
    assert.is_true(sb:poll().running)
    assert.equal("still here", sb:read_file("/workspace/kept.txt"))
    -- the sandbox reports its expiry: commands are cut to what is left
    local out = one(cap, "run_command", { command = "echo ok", timeout_seconds = 9999 })
    assert.equal("[stdout]\nok", out)
    sb:close()
    local agent = lash.agent { model = lash.script_model { "x" }, capabilities = { cap } }
    local ok, err = pcall(agent.run, agent, "x")
    assert.is_false(ok)
    assert.equal("Could not attach to sandbox '" .. sb.id .. "' on backend 'local': it does not exist or has ended "
      .. "(gone)", err.message)
  end)

  it_local("shared: one session for several runs", function()
    local s <close> = lash.sandbox.session { state_root = root }
    local cap = lash.sandbox_capability { session = s }
    one(cap, "run_command", { command = "echo 1 > /workspace/count" })
    assert.equal("[stdout]\n1", one(cap, "run_command", { command = "cat count" }))
    assert.equal(1, #lash.sandbox.list { state_root = root })
  end)
end)

describe("the main job: examples/sandbox_coder.lua", function()
  local cli = require "helpers.lash_cli"

  it_local("writes a program and its test, runs it, fixes it, reads it back and reports, offline", function()
    local root = tmpdir()
    local out, err, code = cli.run({ "run", "examples/sandbox_coder.lua", "Write wordfreq.sh with a test" },
      "LASH_SANDBOX_ROOT=" .. cli.quote(root))
    local left = lash.sandbox.list { state_root = root }
    os.execute("rm -rf '" .. root .. "'")
    assert.equal(0, code, err)
    -- where no disk quota can be made (a container without loop devices)
    -- lash says so once; nothing else may be on stderr
    assert.equal("", (err:gsub("lash: warning: local sandboxes get no disk quota here:[^\n]*\n", "")))
    assert.same({}, left)
    local lines = {}
    for l in (out .. "\n"):gmatch("(.-)\n") do
      -- the preview of a call's arguments is cut at a width; its key order is not fixed
      lines[#lines + 1] = l:match("^▸ write_file ") and "▸ write_file …" or l
    end
    -- results of concurrent calls print as they finish: sort each run of them
    local i = 1
    while i <= #lines do
      local j = i
      while lines[j] and lines[j]:match("^  ✓ ") do j = j + 1 end
      if j - i > 1 then
        local run = { table.unpack(lines, i, j - 1) }
        table.sort(run)
        for k = i, j - 1 do lines[k] = run[k - i + 1] end
      end
      i = math.max(j, i + 1)
    end
    assert.matches("^── 6 requests · [%d,]+ tokens in · %d+ out · 7 tool calls · %d+%.%ds$", lines[#lines - 1])
    assert.same({
      "● sandbox_coder · function",
      "I'll write wordfreq.sh and a test for it, then run the test.",
      "▸ write_file …",
      "▸ write_file …",
      "  ✓ Wrote 282 bytes to 'wordfreq.sh'.",
      "  ✓ Wrote 545 bytes to 'test_wordfreq.sh'.",
      "▸ run_command {\"command\":\"sh test_wordfreq.sh\"}",
      "  ✓ [stdout] (+4 lines)",
      "The test fails:",
      "",
      "[stdout]",
      "ok - ranks the most frequent words",
      "FAIL - ignores case and punctuation: got 'GO 1', want 'go 3'",
      "ok - prints nothing for no words",
      "[exit code: 1]",
      "",
      "Upper- and lower-case words are counted apart. I'll fold case first.",
      "▸ write_file …",
      "  ✓ Wrote 351 bytes to 'wordfreq.sh'.",
      "▸ run_command {\"command\":\"sh test_wordfreq.sh\"}",
      "  ✓ [stdout] (+4 lines)",
      "The tests pass. Let me read the program back and try it on a line of Hamlet.",
      "▸ read_file {\"path\":\"wordfreq.sh\"}",
      "▸ run_command {\"command\":\"printf 'To be, or not to be' | sh wordfreq.sh 2\"}",
      "  ✓ #!/bin/sh (+6 lines)",
      "  ✓ [stdout] (+2 lines)",
      "wordfreq.sh is done: a 7-line POSIX sh pipeline (tr, sort, uniq, awk) that prints the N most frequent "
        .. "words of its input, case-folded. Its test, test_wordfreq.sh, passes:",
      "",
      "[stdout]",
      "ok - ranks the most frequent words",
      "ok - ignores case and punctuation",
      "ok - prints nothing for no words",
      "all 3 passed",
      "",
      "On \"To be, or not to be\" with N=2 it prints:",
      "",
      "[stdout]",
      "be 2",
      "to 2",
    }, { table.unpack(lines, 1, #lines - 2) })
  end)
end)
