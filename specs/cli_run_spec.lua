-- `lash run`: spec loading, terminal and JSON output, options, exit codes.
local json = require "lash.json"
local cli = require "helpers.lash_cli"
local fake = require "helpers.fake_server"

local lash = require "lash"
local render = require "lash.cli.printer"

local function lines(s)
  local out = {}
  for l in s:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

describe("lash run", function()
  it("runs the offline example: tool calls, their results, the answer and a usage line", function()
    local out, err, code = cli.run { "run", "examples/hello_tools.lua", "What is 72F in Celsius?" }
    assert.equal(0, code, err)
    assert.equal("", err)
    assert.is_nil(out:find("\27", 1, true), "no escape codes when stdout is not a terminal")
    assert.same({
      "● hello_tools · function",
      "I'll convert the temperature and count the words.",
      "▸ calculate {\"expr\":\"(72 - 32) * 5 / 9\"}",
      "  ↻ 2 validation errors: missing required property 'expression'; unexpected property 'expr'",
      "Right, the argument is called expression.",
      "▸ calculate {\"expression\":\"(72 - 32) * 5 / 9\"}",
      "▸ word_stats {\"text\":\"The quick brown fox jumps over the lazy dog\"}",
      "  ✓ 22.22",
      "  ✓ {\"distinct_words\":8,\"letters\":35,\"longest\":\"quick\",\"words\":9}",
      "72°F is 22.22°C. The pangram \"The quick brown fox jumps over the lazy dog\" has 9 words (8 distinct), "
        .. "35 letters, and its longest word is \"quick\".",
    }, { table.unpack(lines(out), 1, 10) })
    assert.matches("^── 3 requests · %d+ tokens in · %d+ out · 2 tool calls · %d+%.%ds$", lines(out)[11])
  end)

  it("prints every event as a JSON line with --json", function()
    local out, err, code = cli.run { "run", "examples/test_model.lua", "hi", "--json" }
    assert.equal(0, code, err)
    local types = {}
    for i, l in ipairs(lines(out)) do
      local ev = json.decode(l)
      types[i] = ev.type
    end
    assert.same({ "run_start", "model_request", "usage", "tool_call", "tool_call", "tool_result", "tool_result",
                  "model_request", "text_delta", "text_delta", "usage", "run_end", "exit" }, types)
    local all = lines(out)
    assert.equal('{"greet":"hello, a","pick":"red"}', json.decode(all[#all - 1]).output)
    local last = json.decode(all[#all])
    -- the run was saved (lash.sessions): the exit line names its session
    assert.matches("^%x+$", last.session)
    last.session = nil
    assert.same({ type = "exit", kind = "ok", exit_code = 0, stop_reason = "complete" }, last)
  end)

  it("prints --json events with their keys sorted, so two runs can be diffed", function()
    local out, err, code = cli.run { "run", "examples/test_model.lua", "hi", "--json" }
    assert.equal(0, code, err)
    for _, l in ipairs(lines(out)) do
      assert.equal(json.encode_canonical(json.decode(l)), l)
    end
    local mixed = {}
    for i = 1, 40 do mixed["k" .. i] = i end
    assert.equal(json.encode_canonical(mixed), json.try_encode_canonical(mixed))
    assert.matches('^{"k1":1,"k10":10,"k11":11,', json.encode_canonical(mixed))
  end)

  it("overrides the model with --model", function()
    local out, err, code = cli.run { "run", "examples/test_model.lua", "hi", "--model", "test", "--no-stream" }
    assert.equal(0, code, err)
    assert.matches('{"greet":"hello, a","pick":"red"}', out, 1, true)
  end)

  it("exits 8 (a limit) with the limit named when --max-steps is reached", function()
    local out, err, code = cli.run { "run", "examples/hello_tools.lua", "x", "--max-steps", "1" }
    assert.equal(8, code)  -- a limit
    assert.equal("lash run: limit: max_steps limit of 1 reached: 1 model request made without a final answer\n", err)
  end)

  it("reads the prompt from standard input", function()
    local seen = cli.spec [[return { model = function(m) return "you said: " .. m[1].parts[1].text end }]]
    local out, err, code = cli.run({ "run", seen }, nil, "hello from stdin\n")
    os.remove(seen)
    assert.equal(0, code, err)
    assert.matches("you said: hello from stdin\n", out, 1, true)
  end)

  it("passes --deps to templates", function()
    local spec = cli.spec [[return lash.agent { instructions = "user={{ deps.user }}",
      model = function(_, info) return info.instructions end }]]
    local out, err, code = cli.run { "run", spec, "x", "--deps", '{"user": "ada"}' }
    os.remove(spec)
    assert.equal(0, code, err)
    assert.matches("user=ada", out, 1, true)
  end)

  it("stops for approval without a terminal, and --yes allows", function()
    local spec = cli.spec [[return lash.agent {
      tools = { { name = "rm", requires_approval = true, handler = function() return "removed" end } },
      model = function(m) if #m == 1 then return { tool_calls = { { name = "rm", id = "c1" } } } end
                          return m[#m].parts[1].content end }]]
    local out, err, code = cli.run { "run", spec, "x" }
    assert.equal(9, code)  -- stopped for approval
    assert.matches("^lash run: stopped: 1 tool call%(s%) need approval %(run with %-%-yes to allow them; "
      .. "lash run .* %-%-resume %x+ %-%-yes runs them%)\n$", err)
    assert.matches("c1 rm", out, 1, true)
    out, err, code = cli.run { "run", spec, "x", "--yes" }
    os.remove(spec)
    assert.equal(0, code, err)
    assert.matches("removed\n", out, 1, true)
  end)

  it("prints a failing tool's message once, with only the frames of the user's code", function()
    local spec = cli.spec [[local function inner() error("kaput") end
return lash.agent {
      tools = { { name = "boom", handler = function() inner() end } },
      model = function() return { tool_calls = { { name = "boom" } } } end }]]
    local _, err, code = cli.run { "run", spec, "x", "--trust" }
    assert.equal(1, code)
    assert.matches("^lash run: tool: Tool 'boom' failed: .*kaput\n", err)
    local _, n = err:gsub("kaput", "")
    assert.equal(1, n, err)
    assert.matches("stack traceback (your code):\n\t" .. spec .. ":1: in upvalue 'inner'", err, 1, true)
    assert.is_nil(err:find("lash/agent.lua", 1, true), err)
    assert.is_nil(err:find("[C]", 1, true), err)
    -- LASH_LOG=debug keeps all of it
    _, err = cli.run({ "run", spec, "x", "--trust" }, "LASH_LOG=debug")
    os.remove(spec)
    assert.matches("lash/agent.lua", err, 1, true)
  end)

  it("reports a spec that does not load", function()
    local _, err, code = cli.run { "run", "examples/nope.lua", "x" }
    assert.equal(6, code)
    assert.matches("^lash run: cannot load the spec: cannot open examples/nope.lua", err)
    local bad = cli.spec [[return lash.agent { modle = "test" }]]
    _, err, code = cli.run { "run", bad, "x" }
    os.remove(bad)
    assert.equal(6, code)
    assert.matches("unknown field 'modle'", err, 1, true)
  end)

  it("exits 2 on usage errors", function()
    local _, err, code = cli.run { "run" }
    assert.equal(2, code)
    assert.matches("missing the prompt: lash run \"PROMPT\" asks the built-in agent, lash run SPEC \"PROMPT\" "
      .. "runs a spec", err, 1, true)
    _, err, code = cli.run { "run", "examples/test_model.lua", "x", "--bogus" }
    assert.equal(2, code)
    assert.matches("unknown option '--bogus'", err, 1, true)
    _, err, code = cli.run { "run", "examples/test_model.lua", "x", "--max-steps", "zero" }
    assert.equal(2, code)
  end)

  it("explains a missing API key", function()
    local _, err, code = cli.run({ "run", "examples/test_model.lua", "x", "--model", "anthropic:claude-sonnet-4-6" },
                                 "ANTHROPIC_API_KEY=")
    assert.equal(6, code)
    assert.equal("lash run: config: ANTHROPIC_API_KEY is not set: export it (or pass api_key = ... in the model "
      .. "options) to use anthropic:claude-sonnet-4-6\n", err)
  end)

  local it_fake = fake.available() and it or pending
  it_fake("talks to a provider named by ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY", function()
    local srv = fake.start("anthropic", 60)
    srv:script("text_stream")
    local out, err, code = cli.run({ "run", "examples/test_model.lua", "hi", "--model", "anthropic:claude-sonnet-4-6" },
      "ANTHROPIC_API_KEY=k ANTHROPIC_BASE_URL=" .. srv.base)
    local reqs = srv:requests()
    srv:stop()
    assert.equal(0, code, err)
    assert.matches("Hello! How can I help you today?\n", out, 1, true)
    assert.equal("k", reqs[1].headers["x-api-key"])
  end)
end)

describe("lash.cli.printer", function()
  local function printer(opts)
    local out = {}
    opts.write = function(s) out[#out + 1] = s end
    return render.new(opts), out
  end

  it("colours only when asked, and draws an elapsed-time spinner on a TTY", function()
    local p, out = printer { tty = true, color = true }
    p:event { type = "run_start", agent = "a", model = "m" }
    p:event { type = "model_request", step = 1 }
    lash.sleep(0.25)
    p:event { type = "text_delta", text = "hi" }
    p:event { type = "run_end", stop_reason = "complete", output = "hi",
              usage = { requests = 1, input_tokens = 1200, output_tokens = 3, cache_read_tokens = 0,
                        cache_write_tokens = 0, tool_calls = 0 } }
    p:close()
    local s = table.concat(out)
    assert.matches("\27%[36m", s)                 -- colour
    assert.matches("thinking 0%.%ds", s)          -- the spinner with elapsed time
    assert.matches("\r\27%[2Khi", s)             -- the spinner line is erased before text
    assert.matches("1 request · 1,200 tokens in · 3 out · 0 tool calls", s, 1, true)
  end)

  -- What a terminal shows after `s`: lines of text, with the cursor moves
  -- the printer uses (\r, \27[2K, \27[nF, \27[J; colours ignored).
  local function screen(s)
    local rows, row, col = { "" }, 1, 0
    local i = 1
    while i <= #s do
      local c = s:sub(i, i)
      if c == "\27" then
        local args, cmd = s:match("^%[([%d;]*)(%a)", i + 1)
        i = i + 2 + #args
        if cmd == "K" then rows[row] = ""
        elseif cmd == "F" then row, col = math.max(1, row - (tonumber(args) or 1)), 0
        elseif cmd == "J" then
          rows[row] = rows[row]:sub(1, col)
          for r = #rows, row + 1, -1 do rows[r] = nil end
        end
      elseif c == "\r" then col = 0
      elseif c == "\n" then
        row, col = row + 1, 0
        rows[row] = rows[row] or ""
      else
        rows[row] = rows[row]:sub(1, col) .. c
        col = col + 1
      end
      i = i + 1
    end
    while rows[#rows] == "" do rows[#rows] = nil end
    return rows
  end

  it("shows a running command's last lines live on a terminal, then only its result", function()
    local p, out = printer { tty = true, color = false }
    p:event { type = "tool_call", id = "1", name = "run_command", args = { command = "make" } }
    for i = 1, 8 do
      p:event { type = "tool_output_delta", id = "1", name = "run_command", stream = "stdout", text = "step " .. i .. "\n" }
      lash.sleep(0.06)
    end
    p:event { type = "tool_output_delta", id = "1", name = "run_command", stream = "stderr", text = "warn\27[2J: x" }
    lash.sleep(0.06)
    local live = screen(table.concat(out))
    assert.same({ "▸ run_command {\"command\":\"make\"}", "  │ step 5", "  │ step 6", "  │ step 7", "  │ step 8",
                  "  │ warn^[[2J: x" }, { table.unpack(live, 1, 6) })
    p:event { type = "tool_result", id = "1", name = "run_command", status = "ok", content = "done" }
    p:close()
    assert.same({ "▸ run_command {\"command\":\"make\"}", "  ✓ done" }, screen(table.concat(out)))
  end)

  it("leaves a command's output out of piped text (--json and the result carry it)", function()
    local p, out = printer { tty = false }
    p:event { type = "tool_call", id = "1", name = "run_command", args = { command = "ls" } }
    p:event { type = "tool_output_delta", id = "1", name = "run_command", stream = "stdout", text = "a\nb\n" }
    p:event { type = "tool_result", id = "1", name = "run_command", status = "ok", content = "a\nb" }
    p:close()
    assert.equal("▸ run_command {\"command\":\"ls\"}\n  ✓ a (+1 line)\n", table.concat(out))
    local j, lines = printer { json = true }
    j:event { type = "tool_output_delta", id = "1", name = "run_command", stream = "stderr", text = "oops\n",
              dropped = 10 }
    assert.same({ type = "tool_output_delta", id = "1", name = "run_command", stream = "stderr", text = "oops\n",
                  dropped = 10 }, require("lash.json").decode(lines[1]))
  end)

  it("prints plain text without a TTY", function()
    local p, out = printer { tty = false }
    p:event { type = "model_request", step = 1 }
    lash.sleep(0.15)
    p:event { type = "tool_call", id = "1", name = "t", args = { x = 1 } }
    p:event { type = "tool_result", id = "1", name = "t", status = "ok", content = "line 1\nline 2\nline 3" }
    p:close()
    assert.equal("▸ t {\"x\":1}\n  ✓ line 1 (+2 lines)\n", table.concat(out))
  end)

  it("shows no escape sequence from the model or a tool on a terminal", function()
    local p, out = printer { tty = true, color = false }
    local evil = "a\27]52;c;ZXZpbA==\7b\27[2J\r\194\155c"
    p:event { type = "text_delta", text = evil .. "\n" }
    p:event { type = "tool_call", id = "1", name = "t", args = { x = evil } }
    p:event { type = "tool_result", id = "1", name = "t", status = "ok", content = evil }
    p:close()
    local s = table.concat(out):gsub("\r\27%[2K", "")   -- lash's own spinner erase
    assert.is_nil(s:find("\27", 1, true))
    assert.is_nil(s:find("\7", 1, true))
    assert.is_nil(s:find("\194\155", 1, true))
    assert.matches("a^[]52;c;ZXZpbA==^Gb^[[2J^M\239\191\189c\n", s, 1, true)
    -- piped, the model's text passes unchanged
    local q, piped = printer { tty = false }
    q:event { type = "text_delta", text = evil }
    q:close()
    assert.equal(evil .. "\n", table.concat(piped))
  end)

  it("never colours with NO_COLOR, nor off a TTY", function()
    local function use_color(env)
      -- lash.cli.printer needs lash.json, whose codec is in the C module
      local p = io.popen(env .. " lua5.4 -e 'package.path=\"lua/?.lua;\"..package.path; "
        .. "package.cpath=\"" .. (os.getenv("LASH_BUILD") or "build") .. "/?.so;\"..package.cpath; "
        .. "io.write(tostring(require(\"lash.cli.printer\").use_color(true)))'")
      local s = p:read("a")
      p:close()
      return s
    end
    assert.equal("false", use_color("NO_COLOR=1"))
    assert.equal("true", use_color("env -u NO_COLOR"))
    assert.is_false(render.use_color(false))
  end)

  it("shortens long results without splitting a character", function()
    assert.equal("ééé…", render.one_line(("é"):rep(10), 6))
  end)
end)

describe("cli.parse_options", function()
  local cli_mod = require "lash.cli"
  local OPTS = { ["--model"] = { "model", "value" }, ["--yes"] = { "yes", "flag" },
                 ["--max-steps"] = { "max_steps", "count" }, ["--file"] = { "files", "list" } }
  local function usage(args, opts, how)
    local saved = cli_mod.usage_error
    cli_mod.usage_error = function(msg) error({ usage = msg }, 0) end
    local ok, err = pcall(cli_mod.parse_options, args, opts or OPTS, how)
    cli_mod.usage_error = saved
    assert.is_false(ok)
    return err.usage
  end

  it("reads flags, values (both spellings), counts, lists and positionals", function()
    local o = cli_mod.parse_options({ "spec.lua", "--model", "m", "--max-steps=3", "--yes", "--file", "a",
                                      "--file=b", "--", "--not-an-option" }, OPTS)
    assert.same({ model = "m", max_steps = 3, yes = true, files = { "a", "b" },
                  positional = { "spec.lua", "--not-an-option" } }, o)
  end)

  it("says what is wrong with a bad command line", function()
    assert.equal("unknown option '--bogus'", usage { "--bogus" })
    assert.equal("option --model needs a value", usage { "--model" })
    assert.equal("option --yes takes no value", usage { "--yes=1" })
    assert.equal("--max-steps needs a positive integer, got '0'", usage { "--max-steps", "0" })
    assert.equal("--max-steps needs a positive integer, got '2.5'", usage { "--max-steps=2.5" })
  end)

  -- lash mcp and lash sandbox parse with it too: K=V maps and what follows "--"
  it("reads maps, and keeps what follows -- apart when asked", function()
    local opts = { ["--env"] = { "env", "map", "=", "K=V" }, ["--header"] = { "headers", "map", ":", "'Name: value'" } }
    local o = cli_mod.parse_options({ "--env", "A=1", "--env=B=x=y", "--header", "X-Key:  v", "srv", "--", "cmd",
                                      "--flag" }, opts, { rest = true })
    assert.same({ env = { A = "1", B = "x=y" }, headers = { ["X-Key"] = "v" }, positional = { "srv" },
                  rest = { "cmd", "--flag" } }, o)
    assert.equal("--env needs K=V, got 'A'", usage({ "--env", "A" }, opts))
    assert.equal("--header needs 'Name: value', got 'nocolon'", usage({ "--header=nocolon" }, opts))
    assert.equal("unexpected '--'", usage({ "--" }, opts, { rest = "refuse" }))
  end)
end)

describe("lash.options", function()
  local options = require "lash.options"
  it("names the first unknown key, in sorted order, and the known ones sorted", function()
    assert.is_nil(options.unknown({ a = 1 }, { a = true, b = true }))
    assert.equal("c", options.unknown({ d = 1, c = 1, a = 1 }, { a = true }))
    assert.equal("who: unknown option 'c' (known: a, b)", options.message("who", "option", "c", { b = true, a = true }))
    assert.equal("w: unknown field 'x' (known fields: a)", options.message("w", "field", "x", { "a" }, "fields"))
    local ok, err = pcall(options.check, "lash.x", { zz = 1, yy = 2 }, { a = true })
    assert.is_false(ok)
    assert.equal("lash.x: unknown option 'yy' (known: a)", err)
  end)
end)

describe("lash run --describe", function()
  local function write(ext, text)
    local base = os.tmpname()
    os.remove(base)
    local path = base .. "." .. ext
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
  end

  it("in a pipe: JSON with the tools, the instructions and the spec's own sandbox_timeout", function()
    local out, err, code = cli.run { "run", "examples/sandbox_agent.yaml", "--describe" }
    assert.equal(0, code, err)
    local d = json.decode(out)
    assert.equal("sandbox_agent", d.name)
    assert.matches("^You write small, portable POSIX shell programs", d.instructions[1])
    local names = {}
    for _, t in ipairs(d.tools) do names[#names + 1] = t.name end
    assert.same({ "run_command", "read_file", "write_file", "list_directory" }, { table.unpack(names, 1, 4) })
    assert.equal("capabilities[1] (LocalSandbox)", d.tools[1].source)
    assert.equal(600, d.capabilities[1].effective.sandbox_timeout)
    assert.equal(600, d.capabilities[1].set.sandbox_timeout)
    assert.same({}, d.conflicts)
  end)

  it("on a terminal: a summary to read, not a line of JSON", function()
    local script = io.popen("command -v script"):read("l")
    if not script then pending("no script(1) to give lash a terminal") return end
    local p = io.popen("script -qec '" .. cli.binary() .. " run examples/sandbox_agent.yaml --describe' /dev/null")
    local out = p:read("a")
    p:close()
    assert.matches("agent         sandbox_agent", out, 1, true)
    assert.matches("sandbox_timeout 600", out, 1, true)
    assert.matches("  run_command          Run a shell command in the sandbox", out, 1, true)
    assert.is_nil(out:find('{"', 1, true))
  end)

  it("reports tools that conflict and exits 6", function()
    local path = write("yaml", "model: test\ncapabilities:\n  - Sandbox: {}\n  - LocalSandbox: {}\n")
    local out, err, code = cli.run { "run", path, "--describe" }
    os.remove(path)
    assert.equal(6, code)
    local d = json.decode(out)
    assert.matches("capabilities[2] (LocalSandbox) defines tools that capabilities[1] (Sandbox)", d.conflicts[1], 1, true)
    assert.matches("lash run: cannot run the spec: tool names conflict", err, 1, true)
  end)
end)

describe("--help after a subcommand", function()
  it("is the command's help, not an unknown option", function()
    for _, args in ipairs { { "mcp", "serve", "--help" }, { "sandbox", "create", "-h" }, { "config", "show", "--help" } } do
      local out, err, code = cli.run(args)
      assert.equal(0, code, table.concat(args, " ") .. ": " .. err)
      assert.matches("^usage: lash " .. args[1], out)
    end
    -- after --, it belongs to the command being run
    local _, err = cli.run { "sandbox", "exec", "lb-x", "--", "ls", "--help" }
    assert.is_nil(err:find("usage:", 1, true))
  end)
end)

describe("the built-in agent and the first argument", function()
  local state
  setup(function()
    state = os.tmpname()
    os.remove(state)
  end)
  teardown(function() os.execute("rm -rf '" .. state .. "'") end)
  local function env(extra)
    return "XDG_STATE_HOME=" .. state .. " XDG_CONFIG_HOME=" .. state .. "/cfg LASH_CONFIG= LASH_MODEL= "
      .. (extra or "")
  end

  it("lash run PROMPT runs the sandbox coder with the given model", function()
    local out, err, code = cli.run({ "run", "what is 2+2", "--model", "test" }, env())
    assert.equal(0, code, err)
    assert.matches("^● lash · test\n", out)
    assert.matches("  ✓ Wrote 1 byte to 'a'.", out, 1, true)
    out, err, code = cli.run({ "run", "--model", "test" }, env(), "a prompt on stdin")
    assert.equal(0, code, err)
    assert.matches("^● lash · test\n", out)
  end)

  it("says where a model comes from when none is set", function()
    local _, err, code = cli.run({ "run", "what is 2+2" }, env())
    assert.equal(6, code)
    assert.equal("lash run: the built-in agent uses the configured model, and none is set: pass --model M (e.g. "
      .. "--model anthropic:claude-sonnet-4-6, or --model test to try it offline), set LASH_MODEL, or write model "
      .. "= \"...\" in the config file (lash config path shows where)\n", err)
    local _, err2 = cli.run({ "run", "what is 2+2" }, env("LASH_MODEL=test"))
    assert.equal("", err2)
  end)

  it("an unquoted prompt or a mistyped spec says the first argument is a spec", function()
    local _, err, code = cli.run({ "run", "what", "is", "2+2" }, env())
    assert.equal(2, code)
    assert.matches("lash run: the first argument is a spec file (.lua, .yaml, .yml or .json), and 'what' is not "
      .. "one; to ask the built-in agent, quote the whole prompt: lash run \"what is 2+2\"", err, 1, true)
    _, err, code = cli.run({ "run", "agent.ymal" }, env())
    assert.equal(2, code)
    assert.matches("'agent.ymal' is not one; to ask the built-in agent about it, write a prompt", err, 1, true)
    _, err, code = cli.run({ "run", "examples/nope.lua", "hi" }, env())
    assert.equal(6, code)
    assert.matches("cannot open examples/nope.lua", err, 1, true)
  end)

  it("--continue goes on with this spec's latest session, and the header names it", function()
    local _, err, code = cli.run({ "run", "examples/test_model.lua", "first" }, env())
    assert.equal(0, code, err)
    local sessions = require "lash.sessions"
    local store = sessions.open(state .. "/lash/sessions.db")
    local mine = store:latest()
    store:close()
    -- another spec's session, more recent
    _, err, code = cli.run({ "run", "examples/hello_tools.lua", "What is 72F in Celsius?" }, env())
    assert.equal(0, code, err)
    local out
    out, err, code = cli.run({ "run", "examples/test_model.lua", "again", "-c" }, env())
    assert.equal(0, code, err)
    assert.matches("^● agent · test · continuing session " .. mine .. " %(%d+ messages%)\n", out)
    -- the built-in agent's sessions are a directory's
    _, err, code = cli.run({ "run", "-c", "go on", "--model", "test" }, env("PWD=" .. state .. "/elsewhere"))
    assert.equal(2, code)
    assert.matches("no saved session of the built-in agent in this directory to continue", err, 1, true)
    _, err, code = cli.run({ "run", "hello", "--model", "test" }, env("PWD=" .. state .. "/elsewhere"))
    assert.equal(0, code, err)
    out, err, code = cli.run({ "run", "-c", "go on", "--model", "test" }, env("PWD=" .. state .. "/elsewhere"))
    assert.equal(0, code, err)
    assert.matches("^● lash · test · continuing session %x+ %(6 messages%)\n", out)
  end)
end)
