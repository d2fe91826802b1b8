-- The sandbox capability's opt-in tools (lash.capabilities.sandbox_tools):
-- the `tools` option in Lua and YAML, the default four left exactly as they
-- are, and edit_file, apply_patch, glob and grep against hostile input, in
-- a real local jail (skipped where bubblewrap or user namespaces are
-- missing). apply_patch's format is also checked against Codex's binary and
-- git apply (tests/integration/test_patch_*.sh).
local lash = require "lash"
local sbcap = require "lash.capabilities.sandbox"
local tools = require "lash.capabilities.sandbox_tools"
local edit = require "lash.capabilities.sandbox_tools.edit"
local text = require "lash.capabilities.sandbox_tools.text"
local globber = require "lash.capabilities.sandbox_tools.globber"
local patch = require "lash.capabilities.sandbox_tools.patch"
local cases = dofile("tests/patch/cases.lua")

local function refused(opts)
  local ok, err = pcall(lash.sandbox_capability, opts)
  assert.is_false(ok, "expected the options to be refused")
  return (tostring(err):gsub("^lash%.sandbox_capability: ", ""))
end

local function names(cap)
  local out = {}
  for _, ts in ipairs(cap:get_toolsets()) do
    for _, t in ipairs(ts:for_run({}):get_tools()) do out[#out + 1] = t.name end
  end
  return out
end

describe("the tools option", function()
  it("leaves exactly the default four without it", function()
    assert.same({ "run_command", "read_file", "write_file", "list_directory" }, names(lash.sandbox_capability {}))
  end)

  it("adds the listed tools after the four, once each", function()
    local cap = lash.sandbox_capability { tools = { "grep", "edit_file", "grep" } }
    assert.same({ "run_command", "read_file", "write_file", "list_directory", "grep", "edit_file" }, names(cap))
  end)

  it("refuses unknown names, the default four and non-lists, saying what exists", function()
    assert.matches("unknown tool 'grepp'; the sandbox's extra tools are edit_file, apply_patch, glob, grep, "
      .. "start_command, read_output, write_stdin, stop_command",
      refused { tools = { "grepp" } })
    assert.matches("'read_file' is one of the four default tools", refused { tools = { "read_file" } })
    assert.matches("tools must be a list of tool names", refused { tools = "grep" })
    assert.matches("not a table with the key 'x'", refused { tools = { x = "grep" } })
  end)

  it("is read from a YAML spec", function()
    local spec = require "lash.spec"
    local agent, err = spec.load_string("name: a\nmodel: test\ncapabilities:\n"
      .. "  - LocalSandbox: {tools: [edit_file, apply_patch, glob, grep]}\n", "a.yaml")
    assert.truthy(agent, err)
    local cap
    for _, c in ipairs(agent.capabilities or {}) do if sbcap.is_capability(c) then cap = c end end
    assert.truthy(cap, "the spec's sandbox capability")
    assert.same({ "edit_file", "apply_patch", "glob", "grep" }, cap.opts.tools)
  end)

  it("adds one sentence to the default instructions, naming the tools as exposed", function()
    local plain = lash.render(lash.sandbox_capability {}:get_instructions()[1], { tools = {} })
    local cap = lash.sandbox_capability { tools = { "grep", "edit_file" } }
    local got = lash.render(cap:get_instructions()[1], { tools = { edit_file = "sb_edit_file" } })
    assert.equal(plain .. " Change files with `sb_edit_file` rather than rewriting them whole, and find files and "
      .. "text with `grep` rather than shell commands.", got)
  end)

  it("gives each tool a closed schema", function()
    for _, n in ipairs(tools.NAMES) do
      assert.is_false(tools.PARAMETERS[n].additionalProperties, n)
      assert.truthy(tools.DESCRIPTIONS[n], n)
    end
  end)
end)

describe("edit_file's text work", function()
  it("refuses a missing or repeated old_string with where it is", function()
    local t = "a = 1\nb = 1\n    c = 1\n"
    local _, e = edit.replace(t, "= 1", "= 2")
    assert.equal("old_string occurs 3 times (at lines 1, 2, 3). Include more surrounding lines in old_string so it "
      .. "matches exactly once, or set replace_all to true to change every occurrence.", e)
    _, e = edit.replace(t, "c = 1\nd", "x")
    assert.matches("was not found", e)
    _, e = edit.replace(t, "c = 1", "c = 1")
    assert.matches("the same", e)
    _, e = edit.replace("x\n  if a:\n    b()\n", "if a:\n  b()", "if a:\n  c()")
    assert.matches("start at line 2: copy old_string from the file exactly", e)
  end)

  it("replaces all when asked, reporting the lines", function()
    local nt, info = edit.replace("x\nx\ny\nx\n", "x", "z", true)
    assert.equal("z\nz\ny\nz\n", nt)
    assert.same({ 1, 2, 4 }, info.lines)
  end)

  it("edits a CRLF file with LF strings and keeps its CRLFs", function()
    local nt = edit.replace("a\r\nb\r\nc\r\n", "a\nb", "A\nB\nB2")
    assert.equal("A\r\nB\r\nB2\r\nc\r\n", nt)
  end)

  it("round-trips encodings byte for byte", function()
    for _, data in ipairs {
      "plain\n", "\239\187\191bom\n", "caf\233 latin-1\n",
      "\255\254h\0i\0\n\0", "\254\255\0h\0i\0\n",
    } do
      local t, enc = text.decode(data)
      assert.equal(data, text.encode(t, enc))
    end
    local t, enc = text.decode("\255\254h\0i\0")
    assert.equal("hi", t)
    assert.equal("UTF-16LE", enc.name)
    assert.is_nil(text.decode("bin\0ary"))
    local _, why = text.encode("\u{4e2d}", select(2, text.decode("caf\233")))
    assert.matches("Latin%-1 cannot hold", why)
  end)
end)

describe("globs and .gitignore rules", function()
  it("match as documented", function()
    local m = globber.compile("src/**/*.{ts,tsx}")
    assert.is_true(m("src/a.ts"))
    assert.is_true(m("src/x/y/b.tsx"))
    assert.is_false(m("src/a.js"))
    assert.is_false(m("lib/a.ts"))
    assert.is_true(globber.compile("*.md")("README.md"))
    assert.is_false(globber.compile("*.md")("docs/a.md"))
    assert.is_true(globber.compile("**/*.md")("docs/a.md"))
    assert.is_true(globber.compile("f?[0-9].[!c]")("fa1.h"))
    assert.is_false(globber.compile("f?[0-9].[!c]")("fa1.c"))
  end)

  it("reads .gitignore rules the way git does", function()
    local r = globber.gitignore_rules("# c\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/gen\n\\#hash\n")
    local function v(p, dir) return globber.gitignore_verdict(r, p, dir) end
    assert.is_true(v("a/b.log"))
    assert.is_false(v("a/keep.log"))
    assert.is_true(v("x/build", true))
    assert.is_nil(v("x/build", false))
    assert.is_true(v("top.txt"))
    assert.is_nil(v("a/top.txt"))
    assert.is_true(v("docs/a/b/gen"))
    assert.is_true(v("#hash"))
  end)
end)

describe("apply_patch's planner", function()
  -- the cases the differential test runs against Codex, here against the
  -- verdicts they were written with
  for _, c in ipairs(cases) do
    it(c.name, function()
      local parsed = patch.parse(c.patch)
      local ok = parsed ~= nil
      if parsed then
        ok = patch.plan(parsed, { read = function(p)
          if c.files[p] then return c.files[p] end
          for k in pairs(c.files) do if k:sub(1, #p + 1) == p .. "/" then return nil, "is_dir" end end
          return nil, "not_found"
        end }) ~= nil
      end
      assert.equal(c.ok, ok)
    end)
  end

  it("names the file and the patch line it could not anchor", function()
    local parsed = patch.parse("*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-  x\n+  y\n*** End Patch")
    local _, e = patch.plan(parsed, { read = function() return "def g():\n  x\n" end })
    assert.same({ path = "a.py", line = 3, message = "could not find the context line '@@ def f():'" }, e)
  end)
end)

---------------------------------------------------------------------------
-- In a real jail

local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }
local it_local = jail_ok and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end)
end

-- Runs the calls one model turn each, returns each call's {content, status}.
local function session(cap, turns)
  local outs = {}
  local script = {}
  for i, calls in ipairs(turns) do
    script[i] = function(messages)
      if i > 1 then outs[#outs + 1] = messages[#messages].parts end
      return { tool_calls = calls }
    end
  end
  script[#script + 1] = function(messages)
    outs[#outs + 1] = messages[#messages].parts
    return "done"
  end
  local agent = lash.agent { model = lash.script_model(script), capabilities = { cap } }
  agent:run("go")
  return outs
end

describe("the tools in a local jail", function()
  local root, cap, sb

  setup(function()
    if not jail_ok then return end
    root = os.tmpname()
    os.remove(root)
    os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'")
    sb = lash.sandbox.session { backend = "local", state_root = root, timeout = 300 }
    cap = lash.sandbox_capability { session = sb, tools = tools.NAMES, max_output_lines = 50, max_background = 2 }
  end)

  teardown(function()
    if sb then sb:close() end
    if root then os.execute("rm -rf '" .. root .. "'") end
  end)

  local function call(name, args)
    local outs = session(cap, { { { name = name, args = args } } })
    return outs[1][1].content, outs[1][1].status
  end

  it_local("edit_file keeps the mode, CRLFs and a UTF-16 encoding, and reports the lines", function()
    sb:write_file("run.sh", "#!/bin/sh\r\necho one\r\necho two\r\n")
    sb:exec { "chmod", "755", "run.sh" }
    local out, st = call("edit_file", { path = "run.sh", old_string = "echo one\necho two", new_string = "echo 1" })
    assert.equal("ok", st)
    assert.equal("Edited 'run.sh': 1 replacement, now line 2.\n     1\t#!/bin/sh\n     2\techo 1", out)
    assert.equal("#!/bin/sh\r\necho 1\r\n", sb:read_file("run.sh"))
    assert.equal("755", sb:exec({ "stat", "-c", "%a", "run.sh" }).stdout:match("%d+"))
    sb:write_file("w16.txt", "\255\254a\0=\0\49\0\n\0")
    out, st = call("edit_file", { path = "w16.txt", old_string = "a=1", new_string = "a=2" })
    assert.equal("ok", st, out)
    assert.equal("\255\254a\0=\0\50\0\n\0", sb:read_file("w16.txt"))
  end)

  it_local("edit_file refuses binary, missing and oversized files with a retry prompt", function()
    sb:write_file("bin.dat", "ab\0cd")
    local out, st = call("edit_file", { path = "bin.dat", old_string = "ab", new_string = "x" })
    assert.equal("retry", st)
    assert.matches("it is a binary file", out)
    out, st = call("edit_file", { path = "nope.txt", old_string = "a", new_string = "b" })
    assert.equal("retry", st)
    assert.matches("Could not edit 'nope.txt'", out)
    sb:exec("head -c 6000000 /dev/zero | tr '\\0' a > big.txt")
    out, st = call("edit_file", { path = "big.txt", old_string = "a", new_string = "b" })
    assert.equal("retry", st)
    assert.matches("over the 5%.0MB read limit", out)
    out = call("edit_file", { path = "new/made.txt", old_string = "", new_string = "hello\n" })
    assert.equal("Created 'new/made.txt' (1 line).", out)
  end)

  it_local("apply_patch changes nothing when one part fails, and names the file and line", function()
    sb:write_file("p/one.txt", "1\n2\n")
    sb:write_file("p/two.txt", "a\nb\n")
    local out, st = call("apply_patch", { input = "*** Begin Patch\n*** Update File: p/one.txt\n@@\n-1\n+ONE\n"
      .. "*** Delete File: p/two.txt\n*** Add File: p/three.txt\n+3\n*** Update File: p/two.txt\n@@\n-a\n+A\n"
      .. "*** End Patch" })
    assert.equal("retry", st)
    assert.matches("^apply_patch failed and changed nothing%. In 'p/two%.txt' %(patch line 9%): cannot update it: "
      .. "no such file", out)
    assert.equal("1\n2\n", sb:read_file("p/one.txt"))
    assert.equal("a\nb\n", sb:read_file("p/two.txt"))
    assert.is_false(pcall(sb.stat, sb, "p/three.txt"))
    out, st = call("apply_patch", { input = "*** Begin Patch\n*** Update File: p/one.txt\n*** Move to: q/uno.txt\n"
      .. "@@\n-1\n+ONE\n*** Delete File: p/two.txt\n*** End Patch" })
    assert.equal("ok", st, out)
    assert.equal("Success. Updated the following files:\nM q/uno.txt\nD p/two.txt", out)
    assert.equal("ONE\n2\n", sb:read_file("q/uno.txt"))
    assert.is_false(pcall(sb.stat, sb, "p/one.txt"))
  end)

  it_local("apply_patch puts back what it wrote when a later write fails", function()
    sb:write_file("ro/keep.txt", "k\n")
    sb:write_file("rw.txt", "r\n")
    -- a read-only directory makes the second write fail after the first
    local out, st = call("apply_patch", { input = "*** Begin Patch\n*** Update File: rw.txt\n@@\n-r\n+R\n"
      .. "*** Add File: /usr/lash-cannot-write-here.txt\n+x\n*** End Patch" })
    assert.equal("retry", st)
    assert.matches("what it had written was put back", out)
    assert.equal("r\n", sb:read_file("rw.txt"))
  end)

  it_local("glob and grep list sorted, skip .git, .gitignore'd and binary files", function()
    sb:exec("mkdir -p t/.git t/src/z t/build t/node && cd t && printf 'build/\\n*.log\\n' > .gitignore && "
      .. "echo 'needle 1' > src/b.py && echo 'needle 2' > src/a.py && echo 'needle z' > src/z/c.py && "
      .. "echo needle > build/out.py && echo needle > x.log && echo needle > .git/config && "
      .. "printf 'needle\\0bin' > src/blob.bin && echo 'nothing' > node/n.py && printf 'sub/\\n' > src/.gitignore && "
      .. "mkdir -p src/sub && echo needle > src/sub/s.py")
    local out = call("glob", { pattern = "**/*.py", path = "t" })
    assert.equal("t/node/n.py\nt/src/a.py\nt/src/b.py\nt/src/z/c.py", out)
    out = call("grep", { pattern = "needle \\d", path = "t" })
    assert.equal("t/src/a.py:1:needle 2\nt/src/b.py:1:needle 1", out)
    out = call("grep", { pattern = "NEEDLE", path = "t", ignore_case = true, glob = "*.py", max_results = 2 })
    assert.equal("t/src/a.py:1:needle 2\nt/src/b.py:1:needle 1\n\n[Showing the first 2 matches; there are more. "
      .. "Narrow the pattern, the path or the glob, or raise max_results.]", out)
    out = call("grep", { pattern = "absent", path = "t" })
    assert.equal("No matches for 'absent' in 7 files under 't'.", out)
    local _, st = call("grep", { pattern = "(", path = "t" })
    assert.equal("retry", st)
    out, st = call("glob", { pattern = "*", path = "does/not/exist" })
    assert.equal("retry", st)
    assert.equal("Could not search 'does/not/exist': no such file or directory\n\nFix the errors and try again.", out)
  end)

  it_local("grep bounds a pathological pattern and long lines", function()
    sb:exec("mkdir -p patho && head -c 30000 /dev/zero | tr '\\0' a > patho/a.txt && echo b >> patho/a.txt")
    local t0 = lash.now()
    local out, st = call("grep", { pattern = "(a|aa)+$", path = "patho" })
    assert.equal("ok", st)
    assert.truthy(lash.now() - t0 < 60)
    assert.truthy(#out < 60000)
    sb:exec("head -c 100000 /dev/zero | tr '\\0' q > patho/long.txt")
    out = call("grep", { pattern = "q", path = "patho/long.txt" })
    assert.truthy(#out <= 2100, #out)
  end)

  -- processes on the host whose command line starts with `sleep 10NN`
  local function sleepers()
    local p = io.popen("ps -eo args | grep -c '^sleep 10[0-9][0-9]'")
    local n = tonumber(p:read("a"))
    p:close()
    return n
  end

  it_local("background commands start, take input, print, and stop with everything they started", function()
    local outs = {}
    local turns = {
      { { name = "start_command", args = { command = "echo hello; while read l; do echo got:$l; done", name = "echo" } } },
      { { name = "write_stdin", args = { handle = "echo", text = "abc\n" } } },
      { { name = "start_command", args = { command = "sleep 1001 & setsid sh -c 'sleep 1002' & (sleep 1003 &); "
        .. "nohup sleep 1004 >/dev/null 2>&1 & wait" } } },
      { { name = "start_command", args = { command = "sleep 1005" } } },
      { { name = "stop_command", args = { handle = "bg1" } } },
      { { name = "read_output", args = { handle = "echo", since = 6 } } },
      { { name = "read_output", args = { handle = "nope" } } },
      { { name = "start_command", args = { command = "exit 3", name = "quick" } } },
    }
    local counts = {}
    local script = {}
    for i, calls in ipairs(turns) do
      script[i] = function(m)
        if i > 1 then outs[#outs + 1] = m[#m].parts[1] end
        if i == 2 then lash.sleep(0.3) end
        if i == 5 then counts.running = sleepers() end
        if i == 6 then counts.stopped = sleepers() end
        return { tool_calls = calls }
      end
    end
    script[#script + 1] = function(m)
      outs[#outs + 1] = m[#m].parts[1]
      return "done"
    end
    lash.agent { model = lash.script_model(script), capabilities = { cap } }:run("go")
    assert.matches("^Started 'echo' in the background", outs[1].content)
    assert.equal("Wrote 4 bytes to the stdin of 'echo'.", outs[2].content)
    assert.equal("retry", outs[4].status)
    assert.matches("already 2 background commands running %(echo, bg1%)", outs[4].content)
    assert.equal(4, counts.running)
    assert.equal(0, counts.stopped, "a daemonising command is stopped with everything it started")
    assert.matches("^Stopped 'bg1'.\n%[bg1: exited with code 143", outs[5].content)
    assert.matches("^%[echo: running for %d+s%]\ngot:abc\n%[output bytes 6%-14 of 14; read_output with since=14",
      outs[6].content)
    assert.matches("no background command 'nope'; the run has echo, bg1", outs[7].content)
    assert.matches("^Started 'quick', but it has already exited.\n%[quick: exited with code 3", outs[8].content)
    lash.sleep(0.3)
    assert.equal(0, sleepers(), "the run's end stops the rest")
  end)
end)
