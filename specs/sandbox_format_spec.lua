-- The sandbox capability's texts, string for string: run_command output
-- (with the truncation cases of harness-reference 4.2 and 9.2), the
-- read_file window and its notes, list_directory, the messages, the
-- instructions and the attach note.
local lash = require "lash"
local fmt = require "lash.capabilities.sandbox_format"

local E = "\u{FFFD}"

local function out(r, o)
  o = o or {}
  return fmt.command_output(r, { max_lines = o.max_lines or 2000, max_bytes = o.max_bytes or 51200,
                                 deadline = o.deadline or 60 })
end

-- Feed s through a real tail ring of max bytes in chunks of n bytes, as a
-- backend does, and return the exec-result fields for one stream.
local function ringed(s, max, n)
  local r = lash.output.ring(max)
  for i = 1, #s, n do r:feed(s:sub(i, i + n - 1)) end
  local kept, dropped = r:result()
  r:close()
  return kept, dropped
end

local function window(data, o)
  o = o or {}
  return fmt.file_window(data, { offset = o.offset, limit = o.limit, max_lines = o.max_lines or 2000,
                                 max_bytes = o.max_bytes or 51200 })
end

local function lines(n, fmtstr)
  local t = {}
  for i = 0, n - 1 do t[#t + 1] = string.format(fmtstr or "L%d", i) end
  return table.concat(t, "\n")
end

describe("run_command output", function()
  it("labels stdout and drops its trailing newline", function()
    assert.equal("[stdout]\nhello", out { stdout = "hello\n", stderr = "", exit_code = 0 })
  end)

  it("puts stdout first, then stderr, then the exit code", function()
    assert.equal("[stdout]\nout\n[stderr]\nerr\n[exit code: 2]",
      out { stdout = "out\n", stderr = "err\n", exit_code = 2 })
  end)

  it("says (no output) when both streams are empty", function()
    assert.equal("(no output)", out { stdout = "", stderr = "", exit_code = 0 })
    assert.equal("(no output)\n[exit code: 1]", out { stdout = "", stderr = "", exit_code = 1 })
  end)

  it("leaves an empty stream out", function()
    assert.equal("[stderr]\noops\n[exit code: 3]", out { stdout = "", stderr = "oops\n", exit_code = 3 })
  end)

  it("reports a timeout with the applied deadline and without the exit code", function()
    assert.equal("[stdout]\npartial\n[timed out after 5s]",
      out { stdout = "partial\n", stderr = "", exit_code = -1, timed_out = true, applied_timeout = 5 })
    assert.equal("(no output)\n[timed out after 7s]",
      out({ stdout = "", stderr = "", exit_code = 137, timed_out = true }, { deadline = 7 }))
  end)

  it("shows negative exit codes", function()
    assert.equal("[stdout]\nx\n[exit code: -1]", out { stdout = "x", stderr = "", exit_code = -1 })
  end)

  it("truncates each stream separately, keeping the tail, labels intact", function()
    assert.equal("[stdout]\nok\n[stderr]\n[... output truncated to the last 50B ...]\n" .. ("E"):rep(50)
      .. "\n[exit code: 1]",
      out({ stdout = "ok\n", stderr = ("E"):rep(500), exit_code = 1 }, { max_bytes = 50 }))
  end)

  it("bounds 1000 B of output at a 100 B cap", function()
    local kept, cut = ringed(("x"):rep(999) .. "\n", 100, 4096)
    local text = out({ stdout = kept, stdout_truncated = cut, stderr = "", exit_code = 0 }, { max_bytes = 100 })
    assert.equal("[stdout]\n[... output truncated to the last 100B ...]\n" .. ("x"):rep(99), text)
  end)

  it("keeps output ending in END through 1-byte chunks, marked", function()
    local kept, cut = ringed(("A"):rep(500) .. "END", 50, 1)
    assert.is_true(cut)
    assert.equal("[stdout]\n[... output truncated to the last 50B ...]\n" .. ("A"):rep(47) .. "END",
      out({ stdout = kept, stdout_truncated = cut, stderr = "", exit_code = 0 }, { max_bytes = 50 }))
  end)

  it("is the same when one chunk exceeds the cap", function()
    local kept, cut = ringed(("A"):rep(500) .. "END", 50, 100000)
    assert.equal("[stdout]\n[... output truncated to the last 50B ...]\n" .. ("A"):rep(47) .. "END",
      out({ stdout = kept, stdout_truncated = cut, stderr = "", exit_code = 0 }, { max_bytes = 50 }))
  end)

  it("keeps the last lines under the line cap ('1 lines', as the reference)", function()
    assert.equal("[stdout]\n[... output truncated to the last 1 lines ...]\nthird",
      out({ stdout = "first\nsecond\nthird", stderr = "", exit_code = 0 }, { max_lines = 1 }))
  end)

  it("drops a partial character at a multibyte cut", function()
    assert.equal("[stdout]\n[... output truncated to the last 5B ...]\néé",
      out({ stdout = ("é"):rep(20), stderr = "", exit_code = 0 }, { max_bytes = 5 }))
  end)

  it("keeps both labels and markers when both streams are cut", function()
    local text = out({ stdout = ("o"):rep(80), stderr = ("e"):rep(80), exit_code = 1 }, { max_bytes = 10 })
    assert.equal("[stdout]\n[... output truncated to the last 10B ...]\noooooooooo\n[stderr]\n"
      .. "[... output truncated to the last 10B ...]\neeeeeeeeee\n[exit code: 1]", text)
  end)

  it("marks a cut made only by the ring, even when the rest fits", function()
    assert.equal("[stdout]\n[... output truncated to the last 50.0KB ...]\ntail",
      out { stdout = "tail\n", stdout_truncated = true, stderr = "", exit_code = 0 })
  end)

  it("bounds on the client side, not only in presentation (X*100 + END through the ring)", function()
    local kept, cut = ringed(("X"):rep(100) .. "\nEND", 50, 1)
    assert.equal(("X"):rep(46) .. "\nEND", kept)
    assert.equal("[stdout]\n[... output truncated to the last 50B ...]\n" .. ("X"):rep(46) .. "\nEND",
      out({ stdout = kept, stdout_truncated = cut, stderr = "", exit_code = 0 }, { max_bytes = 50 }))
    -- without the ring the wide line is dropped whole
    assert.equal("[stdout]\n[... output truncated to the last 50B ...]\nEND",
      out({ stdout = ("X"):rep(100) .. "\nEND", stderr = "", exit_code = 0 }, { max_bytes = 50 }))
  end)

  it("decodes invalid UTF-8 with replacement characters and keeps \\r", function()
    assert.equal("[stdout]\n" .. E .. E .. "ok", out { stdout = "\xff\xfeok", stderr = "", exit_code = 0 })
    assert.equal("[stdout]\nok" .. E, out { stdout = "ok\xe2\x82", stderr = "", exit_code = 0 })
    assert.equal("[stdout]\na\rb", out { stdout = "a\rb\n", stderr = "", exit_code = 0 })
  end)

  it("shows a stream that is only a newline as an empty body", function()
    assert.equal("[stdout]\n", out { stdout = "\n", stderr = "", exit_code = 0 })
  end)
end)

describe("timeouts", function()
  it("refuses timeout_seconds <= 0 or not finite, formatting the number as given", function()
    assert.equal("timeout_seconds must be greater than 0, got 0.0.", fmt.check_timeout(0))
    assert.equal("timeout_seconds must be greater than 0, got -5.0.", fmt.check_timeout(-5.0))
    -- the reference reads timeout_seconds as a float, so a JSON integer shows as one
    assert.equal("timeout_seconds must be greater than 0, got -5.0.", fmt.check_timeout(-5))
    assert.equal("timeout_seconds must be greater than 0, got nan.", fmt.check_timeout(0 / 0))
    assert.equal("timeout_seconds must be greater than 0, got inf.", fmt.check_timeout(math.huge))
    assert.is_nil(fmt.check_timeout(0.5))
    assert.is_nil(fmt.check_timeout(nil))
  end)

  it("rounds up before clamping to the ceiling", function()
    assert.equal(12, fmt.deadline(12.0, 300))
    assert.equal(120, fmt.deadline(9999, 120))
    assert.equal(50, fmt.deadline(9999, 50))
    assert.equal(1, fmt.deadline(0.5, 300))
    assert.equal(1, fmt.deadline(0.2, 300))
    assert.equal(46, fmt.deadline(45.5, 300))
    assert.equal(300, fmt.deadline(400, 300))
    assert.equal(math.type(fmt.deadline(12.0, 300)), "integer")
  end)
end)

describe("read_file window", function()
  it("drops the trailing newline", function()
    assert.equal("a\nb", window("a\nb\n"))
  end)

  it("returns a file exactly at the byte cap whole", function()
    assert.equal("0123456789", window("0123456789", { max_bytes = 10 }))
  end)

  it("keeps the head under the byte cap and says where to continue", function()
    assert.equal("line00\n\n[Showing lines 1-1 of 3 (12B limit). Use offset=2 to continue.]",
      window("line00\nline01\nline02", { max_bytes = 12 }))
  end)

  it("keeps the head under the line cap", function()
    assert.equal("L0\nL1\nL2\n\n[Showing lines 1-3 of 20. Use offset=4 to continue.]",
      window(lines(20), { max_lines = 3 }))
  end)

  it("pages with offset and limit", function()
    assert.equal("b\nc\n\n[2 more lines in file. Use offset=4 to continue.]",
      window("a\nb\nc\nd\ne", { offset = 2, limit = 2 }))
    assert.equal("d\ne", window("a\nb\nc\nd\ne", { offset = 4, limit = 10 }))
  end)

  it("lets the safety cap's note win over the limit's", function()
    assert.equal("L4\nL5\nL6\n\n[Showing lines 5-7 of 20. Use offset=8 to continue.]",
      window(lines(20), { offset = 5, limit = 10, max_lines = 3 }))
  end)

  it("omits a first line over the byte cap, pointing past it when there is more", function()
    assert.equal("[Line 1 is 200B, exceeds the 10B limit and was omitted.]",
      window(("x"):rep(200), { max_bytes = 10 }))
    assert.equal("[Line 1 is 200B, exceeds the 10B limit and was omitted. Use offset=2 to continue.]",
      window(("x"):rep(200) .. "\nnext", { max_bytes = 10 }))
    local data = "ok\n" .. ("x"):rep(200) .. "\nz"
    assert.equal("ok\n\n[Showing lines 1-1 of 3 (10B limit). Use offset=2 to continue.]",
      window(data, { max_bytes = 10 }))
    assert.equal("[Line 2 is 200B, exceeds the 10B limit and was omitted. Use offset=3 to continue.]",
      window(data, { max_bytes = 10, offset = 2 }))
  end)

  it("refuses a bad window with the rule and the file's line count", function()
    local data = "a\nb\nc\n"
    assert.same({ nil, "offset must be >= 1 (lines are 1-indexed), got 0" },
      { window(data, { offset = 0 }) })
    assert.same({ nil, "limit must be >= 1, got 0" }, { window(data, { limit = 0 }) })
    assert.same({ nil, "offset 99 is beyond end of file (3 lines total)" }, { window(data, { offset = 99 }) })
    assert.same({ nil, "limit must be >= 1, got -2" }, { window("x", { limit = -2 }) })
  end)

  it("refuses bytes that are not UTF-8", function()
    assert.same({ nil, "file is not valid UTF-8 text (it may be a binary file)." }, { window("ab\xffcd") })
  end)

  it("splits on \\n only, keeping \\r; an empty file is one empty line", function()
    assert.equal("a\r\nb\r", window("a\r\nb\r\n"))
    assert.equal("", window(""))
    assert.equal("\n\n[2 more lines in file. Use offset=2 to continue.]", window("\n\nx", { limit = 1 }))
    assert.equal("x\n\n[1 more lines in file. Use offset=2 to continue.]", window("x\ny", { limit = 1 }))
  end)

  it("counts an empty last line before the trailing newline as a line", function()
    assert.equal("a\n", window("a\n\n"))
    assert.equal("", window("a\n\n", { offset = 2 }))
  end)

  it("formats the size refusals", function()
    assert.equal("File is 3.0MB, over the 5.0MB read limit. Read just the part you need with a shell command "
      .. "instead (e.g. head, tail, sed -n, or grep).", fmt.too_large(3 * 1024 * 1024, 5 * 1024 * 1024))
    assert.matches("over the 1000B read limit", fmt.too_large(5000, 1000), 1, true)
    assert.matches("^File is 4.9KB", fmt.too_large(5000, 1000))
  end)
end)

describe("list_directory", function()
  local function ls(entries, o)
    o = o or {}
    return fmt.listing(entries, { max_lines = o.max_lines or 2000, max_bytes = o.max_bytes or 51200 })
  end

  it("marks directories with a slash", function()
    assert.equal("a\nb/", ls { { name = "b", kind = "dir" }, { name = "a", kind = "file" } })
  end)

  it("sorts names before the slash is added", function()
    assert.equal("a/\na-b\na.txt",
      ls { { name = "a.txt", kind = "file" }, { name = "a-b", kind = "file" }, { name = "a", kind = "dir" } })
  end)

  it("sorts by bytes", function()
    assert.equal("B\na\nz\né", ls { { name = "é" }, { name = "z" }, { name = "a" }, { name = "B" } })
  end)

  it("says (empty)", function()
    assert.equal("(empty)", ls {})
  end)

  it("puts the head-truncation marker after the listing", function()
    assert.equal("a\nb\n[... output truncated to the first 2 lines ...]",
      ls({ { name = "a" }, { name = "b" }, { name = "c" } }, { max_lines = 2 }))
  end)

  it("marks an entry name wider than the byte cap", function()
    assert.equal("[... first line exceeds the 10B limit, output omitted ...]",
      ls({ { name = ("n"):rep(40) } }, { max_bytes = 10 }))
  end)

  it("bounds 5000 entries at 20 lines plus the marker", function()
    local entries = {}
    for i = 1, 5000 do entries[i] = { name = string.format("f%05d", i) } end
    local text = ls(entries, { max_lines = 20 })
    local n = select(2, text:gsub("\n", "")) + 1
    assert.equal(21, n)
    assert.matches("\n%[%.%.%. output truncated to the first 20 lines %.%.%.%]$", text)
  end)
end)

describe("write_file and quoting", function()
  it("counts UTF-8 bytes", function()
    assert.equal("Wrote 9 bytes to '/tmp/pkg/a.py'.", fmt.wrote(#"print(1)\n", "/tmp/pkg/a.py"))
    assert.equal("Wrote 2 bytes to 'é'.", fmt.wrote(#"é", "é"))
    assert.equal("Wrote 0 bytes to 'e'.", fmt.wrote(0, "e"))
  end)

  it("says 1 byte, not the reference's 1 bytes (a documented difference)", function()
    assert.equal("Wrote 1 byte to 'x'.", fmt.wrote(1, "x"))
  end)

  it("quotes as Python's repr does, switching to double quotes for a path with a '", function()
    assert.equal("'/nope'", fmt.quote("/nope"))
    assert.equal('"it\'s"', fmt.quote("it's"))
    assert.equal("'it\\'s \"x\"'", fmt.quote("it's \"x\""))
    assert.equal("'say \"hi\"'", fmt.quote('say "hi"'))
    assert.equal("'a\\nb\\\\c\\x01\\t\\x7f'", fmt.quote("a\nb\\c\1\t\127"))
    assert.equal("'é'", fmt.quote("é"))
  end)

  it("formats numbers as the reference does", function()
    assert.equal("0", fmt.number(0))
    assert.equal("-5.0", fmt.number(-5.0))
    assert.equal("0.5", fmt.number(0.5))
    assert.equal("0.1", fmt.number(0.1))
    assert.equal("nan", fmt.number(0 / 0))
    assert.equal("-inf", fmt.number(-math.huge))
  end)
end)

describe("instructions", function()
  local function render(text, names)
    return lash.render(text, { tools = names or {} })
  end

  it("state the tools, sh, the timeouts and that an owned sandbox is reset", function()
    assert.equal("You have a local sandbox: an isolated, ephemeral container on this machine. Use `run_command` "
      .. "to run shell commands in it, and `read_file` / `write_file` / `list_directory` to manage files. "
      .. "Commands run through `sh`, so pipes and redirection work. A command times out after 60s unless you "
      .. "pass `timeout_seconds` (up to 300s). The sandbox is reset between runs, so persist anything important "
      .. "outside it.",
      render(fmt.instructions { backend = "local", default_timeout = 60, max_timeout = 300 }))
  end)

  it("say a reused sandbox persists across runs", function()
    assert.equal("You have a Modal sandbox: an isolated cloud container. Use `run_command` to run shell commands "
      .. "in it, and `read_file` / `write_file` / `list_directory` to manage files. Commands run through `sh`, so "
      .. "pipes and redirection work. A command times out after 46s unless you pass `timeout_seconds` (up to "
      .. "120s). This sandbox persists across runs, so files from earlier runs can still be present.",
      render(fmt.instructions { backend = "modal", reused = true, default_timeout = 46, max_timeout = 120 }))
  end)

  it("name the tools actually exposed", function()
    local text = render(fmt.instructions { backend = "local", default_timeout = 60, max_timeout = 300 },
      { run_command = "box_run_command", read_file = "box_read_file", write_file = "box_write_file",
        list_directory = "box_list_directory" })
    assert.matches("Use `box_run_command` to run", text, 1, true)
    assert.matches("`box_read_file` / `box_write_file` / `box_list_directory`", text, 1, true)
  end)

  it("name another backend plainly", function()
    assert.matches("^You have a sandbox %(fake backend%): an isolated, ephemeral environment%.",
      render(fmt.instructions { backend = "fake", default_timeout = 1, max_timeout = 2 }))
  end)
end)

describe("the attach note", function()
  it("rounds minutes half to even", function()
    assert.equal(2, fmt.round_half_even(2.5))
    assert.equal(4, fmt.round_half_even(3.5))
    assert.equal(2, fmt.round_half_even(1.5))
    assert.equal(1, fmt.round_half_even(1.25))
    assert.equal(3, fmt.round_half_even(2.51))
  end)

  it("states the clock: 150 s, 75 s, 59 s, expired, unknown", function()
    assert.equal("About 2 minutes of its lifetime remained when this run began.", fmt.clock_text(150))
    assert.equal("About 1 minute of its lifetime remained when this run began.", fmt.clock_text(75))
    assert.equal("Under a minute of its lifetime remained when this run began, so finish up.", fmt.clock_text(59))
    assert.equal("Under a minute of its lifetime remained when this run began, so finish up.", fmt.clock_text(0))
    assert.equal("How long it has left is not known.", fmt.clock_text(nil))
    assert.equal("About 2 minutes of its lifetime remained when this run began.", fmt.clock_text(90))
    assert.equal("About 4 minutes of its lifetime remained when this run began.", fmt.clock_text(210))
    assert.equal("About 30 minutes of its lifetime remained when this run began.", fmt.clock_text(1800))
  end)

  it("states each network policy", function()
    assert.equal("This sandbox has NO network access, including DNS, so installing packages or downloading "
      .. "anything will fail. Work with what the image already has.",
      fmt.network_text { block_network = true, allow_egress_to = {}, allow_egress_to_cidrs = {} })
    assert.equal("This sandbox has outbound network access.",
      fmt.network_text { block_network = false, allow_egress_to = {}, allow_egress_to_cidrs = {} })
    assert.equal("This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org, "
      .. "files.pythonhosted.org. Anything else, and plain HTTP to any host, will fail.",
      fmt.network_text { block_network = true, allow_egress_to = { "pypi.org", "files.pythonhosted.org" },
                         allow_egress_to_cidrs = {} })
    assert.equal("This sandbox reaches only these address ranges, on any port: 10.0.0.0/8, 192.168.1.0/24. "
      .. "Anything else will fail; hostnames still resolve, but only those addresses answer.",
      fmt.network_text { block_network = true, allow_egress_to = {},
                         allow_egress_to_cidrs = { "10.0.0.0/8", "192.168.1.0/24" } })
    assert.equal("This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org; and these "
      .. "address ranges, on any port: 10.0.0.0/8. Anything else will fail. The hosts accept HTTPS only, so plain "
      .. "HTTP to them fails; the address ranges accept any port. Hostnames resolve, but only listed hosts and "
      .. "addresses answer.",
      fmt.network_text { block_network = true, allow_egress_to = { "pypi.org" },
                         allow_egress_to_cidrs = { "10.0.0.0/8" } })
    assert.equal("Its network access is whatever the task that set it up allowed; test before relying on it.",
      fmt.network_text(nil))
  end)

  it("joins the three sentences with single spaces", function()
    assert.equal("This sandbox was set up by an earlier task, and your files stay in it after this run for a "
      .. "later task to collect. This sandbox has outbound network access. About 30 minutes of its lifetime "
      .. "remained when this run began.",
      fmt.attach_note { network = { block_network = false }, remaining = 1800 })
  end)
end)
