--- The sandbox capability's opt-in tools (`tools = {"edit_file",
-- "apply_patch", "glob", "grep"}`): their names, schemas, descriptions and
-- defaults, and handlers that work through the sandbox's generic
-- operations (stat, read_file, write_file, exec), so every backend gets
-- them. The capability (lash.capabilities.sandbox) checks the list at
-- construction with `check` and adds `build`'s tools to each run's four.
-- @module lash.capabilities.sandbox_tools
local fmt = require "lash.capabilities.sandbox_format"
local background = require "lash.capabilities.sandbox_tools.background"
local edit = require "lash.capabilities.sandbox_tools.edit"
local patch = require "lash.capabilities.sandbox_tools.patch"
local search = require "lash.capabilities.sandbox_tools.search"
local text = require "lash.capabilities.sandbox_tools.text"
local json = require "lash.json"
local runtime = require "lash.runtime"
local tool = require "lash.tool"

local M = {}

--- The defaults of these tools (one owner).
M.DEFAULTS = {
  grep_max_results = 100,    -- matches shown when the model gives no max_results
  max_results_ceiling = 2000, -- the most max_results may ask for
  max_context = 20,          -- grep context lines, at most
  search_timeout = 60,       -- seconds one glob or grep may take (within the command deadline)
  max_background = 4,        -- background commands running at once, unless the capability says
  start_wait = 0.5,          -- seconds start_command waits to catch a command that fails at once
  stop_grace = 2,            -- seconds between SIGTERM and SIGKILL in stop_command
}

--- The opt-in tools, in the order runs list them after the default four.
M.NAMES = { "edit_file", "apply_patch", "glob", "grep", "start_command", "read_output", "write_stdin",
            "stop_command" }
local KNOWN = {}
for _, n in ipairs(M.NAMES) do KNOWN[n] = true end

--- Check a capability's `tools` option.
-- @return[1] the list, deduplicated, in the order given
-- @return[2] nil
-- @return[2] string what is wrong and how to fix it
function M.check(list)
  if list == nil then return {} end
  if type(list) ~= "table" then
    return nil, "tools must be a list of tool names (" .. table.concat(M.NAMES, ", ") .. "), got a " .. type(list)
      .. "."
  end
  local out, seen = {}, {}
  local n = 0
  for k in pairs(list) do
    n = n + 1
    if math.type(k) ~= "integer" or k < 1 then
      return nil, "tools must be a list of tool names, not a table with the key " .. fmt.quote(tostring(k)) .. "."
    end
  end
  if n ~= #list then return nil, "tools must be a list without holes." end
  for _, name in ipairs(list) do
    if type(name) ~= "string" or not KNOWN[name] then
      local known = table.concat(M.NAMES, ", ")
      if name == "run_command" or name == "read_file" or name == "write_file" or name == "list_directory" then
        return nil, "tools: " .. fmt.quote(name) .. " is one of the four default tools, always there; list only the "
          .. "extra tools (" .. known .. ")."
      end
      return nil, "tools: unknown tool " .. (type(name) == "string" and fmt.quote(name) or ("a " .. type(name)))
        .. "; the sandbox's extra tools are " .. known .. "."
    end
    if not seen[name] then
      seen[name] = true
      out[#out + 1] = name
    end
  end
  return out
end

--- The sentence the default instructions gain for the extra tools ("" for
-- none): which to prefer to shell commands.
function M.instructions(names)
  if #names == 0 then return "" end
  local have = {}
  for _, n in ipairs(names) do have[n] = true end
  local function t(name) return "`{{ tools." .. name .. " or \"" .. name .. "\" }}`" end
  local parts = {}
  local edits = {}
  if have.edit_file then edits[#edits + 1] = t("edit_file") end
  if have.apply_patch then edits[#edits + 1] = t("apply_patch") end
  if #edits > 0 then parts[#parts + 1] = "change files with " .. table.concat(edits, " or ") .. " rather than "
    .. "rewriting them whole" end
  local finds = {}
  if have.glob then finds[#finds + 1] = t("glob") end
  if have.grep then finds[#finds + 1] = t("grep") end
  if #finds > 0 then parts[#parts + 1] = "find files and text with " .. table.concat(finds, " and ")
    .. " rather than shell commands" end
  if have.start_command then parts[#parts + 1] = "run servers and other long commands in the background with "
    .. t("start_command") end
  local s = table.concat(parts, ", and ")
  return " " .. s:sub(1, 1):upper() .. s:sub(2) .. "."
end

local null = json.null
local function opt(v)
  if v == null then return nil end
  return v
end

local function optional(jtype, description)
  return { anyOf = { { type = jtype }, { type = "null" } }, default = null, description = description }
end

M.PARAMETERS = {
  edit_file = {
    type = "object",
    properties = {
      path = { type = "string", description = fmt.PATH },
      old_string = { type = "string", description = "The exact text to replace, copied from the file with its "
        .. "indentation and line breaks. It must occur exactly once unless replace_all is true." },
      new_string = { type = "string", description = "The text to put in its place (different from old_string)." },
      replace_all = optional("boolean", "Replace every occurrence of old_string instead of requiring exactly one "
        .. "(default false)."),
    },
    required = { "path", "old_string", "new_string" },
    additionalProperties = false,
  },
  apply_patch = {
    type = "object",
    properties = {
      input = { type = "string", description = "The whole patch: '*** Begin Patch' ... '*** End Patch' in the "
        .. "apply_patch format, or a unified diff ('--- a/file', '+++ b/file', '@@ ... @@' hunks)." },
    },
    required = { "input" },
    additionalProperties = false,
  },
  glob = {
    type = "object",
    properties = {
      pattern = { type = "string", description = "A glob matched against paths under `path`, e.g. '**/*.py', "
        .. "'src/**/*.{ts,tsx}' or '*.md' (this directory only). `*` and `?` stay within one directory, `**` "
        .. "crosses any number." },
      path = optional("string", "The directory to search (default: the working directory)."),
    },
    required = { "pattern" },
    additionalProperties = false,
  },
  grep = {
    type = "object",
    properties = {
      pattern = { type = "string", description = "A regular expression (Perl-compatible: \\d, \\w, \\s, (?i), "
        .. "lookarounds) searched for in each line." },
      path = optional("string", "A directory or file to search (default: the working directory)."),
      glob = optional("string", "Only search files whose names match this glob, e.g. '*.py' or 'src/**/*.ts'."),
      ignore_case = optional("boolean", "Match case-insensitively (default false)."),
      context = optional("integer", "Lines of context to show before and after each match (default 0)."),
      max_results = optional("integer", "The most matching lines to show (default 100)."),
    },
    required = { "pattern" },
    additionalProperties = false,
  },
}

M.PARAMETERS.start_command = {
  type = "object",
  properties = {
    command = { type = "string", description = "The shell command to start, e.g. 'npm run dev' or "
      .. "'python -m http.server 8000'." },
    name = optional("string", "A short name to refer to it by (default: bg1, bg2, ...)."),
  },
  required = { "command" },
  additionalProperties = false,
}
M.PARAMETERS.read_output = {
  type = "object",
  properties = {
    handle = { type = "string", description = "The command's name, as start_command returned it." },
    since = optional("integer", "Byte offset to read from (the `since` the previous read_output gave); "
      .. "default: the latest output."),
  },
  required = { "handle" },
  additionalProperties = false,
}
M.PARAMETERS.write_stdin = {
  type = "object",
  properties = {
    handle = { type = "string", description = "The command's name." },
    text = { type = "string", description = "Text to write to its standard input (add \\n to end a line)." },
  },
  required = { "handle", "text" },
  additionalProperties = false,
}
M.PARAMETERS.stop_command = {
  type = "object",
  properties = { handle = { type = "string", description = "The command's name." } },
  required = { "handle" },
  additionalProperties = false,
}

M.DESCRIPTIONS = {
  start_command = "Start a shell command in the sandbox in the background (a dev server, a watcher, a long "
    .. "build) and return at once with its name. It runs until stop_command, or until this run ends. Read its "
    .. "output with read_output, send it input with write_stdin.",
  read_output = "Read the output (stdout and stderr, interleaved) of a background command: the latest output, "
    .. "or from `since`, the offset the previous read gave. Says whether it is still running.",
  write_stdin = "Write text to the standard input of a background command.",
  stop_command = "Stop a background command (SIGTERM, then SIGKILL, to it and everything it started) and "
    .. "show its last output.",
  edit_file = "Replace exact text in a sandbox file: `old_string` must match the file exactly (indentation "
    .. "included) and occur once, unless `replace_all` is true. Keeps the file's line endings, encoding and "
    .. "permissions; reports the changed lines. Prefer it to write_file for changing part of a file.",
  apply_patch = "Apply a patch to files in the sandbox: add, delete, update and move files. Either the "
    .. "apply_patch format:\n*** Begin Patch\n*** Update File: path/to/file.py\n@@ def example():\n-    pass\n+"
    .. "    return 123\n*** Add File: new.txt\n+first line\n*** Delete File: old.txt\n*** End Patch\n(an update "
    .. "may start with `*** Move to: new/path`; `@@ text` jumps to a line containing that text; context lines start "
    .. "with a space), or a unified diff (git diff). All or nothing: if any part fails, no file changes, and the "
    .. "error names the file and the patch line.",
  glob = "Find files by name pattern under a sandbox directory. Returns matching paths sorted, one per line; skips "
    .. ".git and what .gitignore files ignore.",
  grep = "Search file contents in the sandbox with a regular expression. Prints `path:line:text` for matches "
    .. "(`path-line-text` for context lines), files in sorted order; skips binary files, .git and what .gitignore "
    .. "files ignore.",
}

---------------------------------------------------------------------------
-- Handlers: `run` is the capability's run (sandbox(), opts, deadline(),
-- failure())

local function check_path(path, what)
  if type(path) ~= "string" then return nil, (what or "path") .. " must be a string." end
  if path:find("\0", 1, true) then return nil, (what or "path") .. " must not contain NUL bytes." end
  if path == "" then return "." end
  return path
end

local function bounded(run, s)
  local o = run.opts
  return (runtime.output.truncate(s, { max_lines = o.max_output_lines, max_bytes = o.max_output_bytes,
                                       direction = "head" }))
end

-- The file's bytes, or nil and the retry message (terminal sandbox
-- errors end the run through run:failure).
local function read_text(run, sb, path, given)
  local prefix = "Could not edit " .. fmt.quote(given) .. ": "
  local ok, st = pcall(sb.stat, sb, path)
  if not ok then return nil, select(2, run:failure(st, prefix)) end
  if st.kind == "dir" then return nil, prefix .. "it is a directory." end
  local max = run.opts.max_read_bytes
  if st.size and st.size > max then return nil, prefix .. fmt.too_large(st.size, max) end
  local ok2, data = pcall(sb.read_file, sb, path, max)
  if not ok2 then
    if type(data) == "table" and data.code == "too_large" and not data.terminal then
      return nil, prefix .. fmt.too_large(data.size or (max + 1), max)
    end
    return nil, select(2, run:failure(data, prefix))
  end
  return data
end

local function edit_file(run, args)
  local path, perr = check_path(args.path)
  if not path then return nil, perr end
  local old, new = args.old_string, args.new_string
  local sb = run:sandbox()
  if old == "" then
    -- an empty old_string creates a file that does not exist yet
    local ok = pcall(sb.stat, sb, path)
    if ok then
      return nil, "old_string is empty, but " .. fmt.quote(args.path) .. " exists. Give the text to replace, or "
        .. "use write_file to replace the whole file."
    end
    if not runtime.output.is_utf8(new) then return nil, fmt.NOT_ENCODABLE end
    local okw, e = pcall(sb.write_file, sb, path, new)
    if not okw then return run:failure(e, "Could not write " .. fmt.quote(args.path) .. ": ") end
    local n = select(2, new:gsub("\n", "")) + ((new == "" or new:sub(-1) == "\n") and 0 or 1)
    return "Created " .. fmt.quote(args.path) .. " (" .. n .. " line" .. (n == 1 and "" or "s") .. ")."
  end
  local data, rerr = read_text(run, sb, path, args.path)
  if not data then return nil, rerr end
  local t, enc = text.decode(data)
  if not t then return nil, "Could not edit " .. fmt.quote(args.path) .. ": " .. enc .. "." end
  local nt, info = edit.replace(t, old, new, opt(args.replace_all) == true)
  if not nt then return nil, info end
  local bytes, why = text.encode(nt, enc)
  if not bytes then return nil, "Could not edit " .. fmt.quote(args.path) .. ": " .. why .. "." end
  local ok, e = pcall(sb.write_file, sb, path, bytes)
  if not ok then return run:failure(e, "Could not write " .. fmt.quote(args.path) .. ": ") end
  return bounded(run, edit.report(args.path, nt, info, fmt.quote))
end

-- Read a file for apply_patch: bytes, or nil and "not_found" | "is_dir" |
-- a message. Terminal sandbox errors are raised (they end the run).
local function patch_reader(run, sb)
  return function(path)
    local ok, st = pcall(sb.stat, sb, path)
    if not ok then
      if type(st) == "table" and st.terminal then error(st, 0) end
      if type(st) == "table" and st.code == "not_found" then return nil, "not_found" end
      return nil, tostring(type(st) == "table" and st.message or st)
    end
    if st.kind == "dir" then return nil, "is_dir" end
    local max = run.opts.max_read_bytes
    if st.size and st.size > max then return nil, fmt.too_large(st.size, max) end
    local ok2, data = pcall(sb.read_file, sb, path, max)
    if not ok2 then
      if type(data) == "table" and data.terminal then error(data, 0) end
      return nil, tostring(type(data) == "table" and data.message or data)
    end
    return data
  end
end

-- Remove a file through the sandbox (the file operations have no remove).
local function remove(sb, path, timeout)
  local r = sb:exec({ "rm", "-f", "--", path }, { timeout = timeout })
  if r.exit_code ~= 0 then
    error({ message = (r.stderr ~= "" and r.stderr:gsub("\n$", "") or ("rm exited " .. r.exit_code)) }, 0)
  end
end

local function describe_failure(pe)
  local where = ""
  if pe.path then where = "In " .. fmt.quote(pe.path) .. (pe.line and (" (patch line " .. pe.line .. ")") or "") .. ": "
  elseif pe.line then where = "At patch line " .. pe.line .. ": " end
  return "apply_patch failed and changed nothing. " .. where .. pe.message
end

local function apply_patch(run, args)
  local parsed, perr = patch.parse(args.input)
  if not parsed then return nil, describe_failure(perr) end
  local sb = run:sandbox()
  local ok, plan, pe = pcall(patch.plan, parsed, { read = patch_reader(run, sb) })
  if not ok then return run:failure(plan) end
  if not plan then return nil, describe_failure(pe) end
  -- commit: writes first, then removals; on a failure undo what was done
  local timeout = run:deadline(nil)
  local done = {}
  local function undo()
    for i = #done, 1, -1 do
      local c = done[i]
      if c.orig_exists then pcall(sb.write_file, sb, c.path, c.orig) else pcall(remove, sb, c.path, timeout) end
    end
  end
  local order = {}
  for _, c in ipairs(plan.changes) do if c.exists then order[#order + 1] = c end end
  for _, c in ipairs(plan.changes) do if not c.exists then order[#order + 1] = c end end
  for _, c in ipairs(order) do
    local okc, e
    if c.exists then
      okc, e = pcall(sb.write_file, sb, c.path, c.data)
    else
      okc, e = pcall(remove, sb, c.path, timeout)
    end
    if not okc then
      undo()
      if type(e) == "table" and e.terminal then return run:failure(e) end
      local msg = type(e) == "table" and e.message or tostring(e)
      return nil, "apply_patch failed and changed nothing (what it had written was put back). Writing "
        .. fmt.quote(c.path) .. " failed: " .. tostring(msg)
    end
    done[#done + 1] = c
  end
  local out = { "Success. Updated the following files:" }
  for _, kind in ipairs { "A", "M", "D" } do
    for _, s in ipairs(plan.summary) do
      if s[1] == kind then out[#out + 1] = kind .. " " .. s[2] end
    end
  end
  return bounded(run, table.concat(out, "\n"))
end

local function search_ctx(run, max_results)
  local sb = run:sandbox()
  local o = run.opts
  local wanted = math.min(M.DEFAULTS.search_timeout, o.default_command_timeout or M.DEFAULTS.search_timeout)
  local deadline = run:deadline(wanted)
  return {
    exec = function(argv, eo) return sb:exec(argv, eo) end,
    timeout = deadline,
    max_lines = o.max_output_lines, max_bytes = o.max_output_bytes,
    max_results = max_results,
  }
end

local function int_arg(v, name, lo, hi)
  if v == nil then return nil end
  if math.type(v) ~= "integer" then return nil, name .. " must be an integer, got " .. tostring(v) .. "." end
  if v < lo then return nil, name .. " must be at least " .. lo .. ", got " .. v .. "." end
  return math.min(v, hi)
end

local function glob_tool(run, args)
  local path, perr = check_path(opt(args.path) or ".")
  if not path then return nil, perr end
  if args.pattern == "" then return nil, "pattern must not be empty; use '**/*' for every file." end
  if args.pattern:find("\0", 1, true) then return nil, "pattern must not contain NUL bytes." end
  local ok, res, why = pcall(search.glob, search_ctx(run, run.opts.max_output_lines),
    { pattern = args.pattern, path = path })
  if not ok then return run:failure(res, "Could not search " .. fmt.quote(path) .. ": ") end
  return res, why
end

local function grep_tool(run, args)
  local path, perr = check_path(opt(args.path) or ".")
  if not path then return nil, perr end
  if args.pattern == "" then return nil, "pattern must not be empty." end
  if args.pattern:find("[\0\n]") then return nil, "pattern must be one line without NUL bytes." end
  local D = M.DEFAULTS
  local max, e1 = int_arg(opt(args.max_results), "max_results", 1, D.max_results_ceiling)
  if e1 then return nil, e1 end
  local context, e2 = int_arg(opt(args.context), "context", 0, D.max_context)
  if e2 then return nil, e2 end
  local g = opt(args.glob)
  if g ~= nil and (g == "" or g:find("\0", 1, true)) then return nil, "glob must be a non-empty pattern." end
  local ok, res, why = pcall(search.grep, search_ctx(run, D.grep_max_results), {
    pattern = args.pattern, path = path, glob = g, ignore_case = opt(args.ignore_case) == true,
    context = context, max_results = max,
  })
  if not ok then return run:failure(res, "Could not search " .. fmt.quote(path) .. ": ") end
  return res, why
end

---------------------------------------------------------------------------
-- Background commands

local function bg_set(run)
  if not run.background then
    run.background = background.new(run.opts.max_background or M.DEFAULTS.max_background)
  end
  return run.background
end

local function elapsed(c)
  return string.format("%ds", math.floor((c.ended or runtime.now()) - c.started + 0.5))
end

local function state_line(c)
  if c.exit == nil then return "[" .. c.handle .. ": running for " .. elapsed(c) .. "]" end
  return "[" .. c.handle .. ": exited with code " .. c.exit .. " after " .. elapsed(c) .. "]"
end

local function find(run, handle)
  local set = run.background
  local c = set and set:get(handle)
  if c then return c end
  local known = set and set:handles() or {}
  return nil, "no background command " .. fmt.quote(handle) .. (#known > 0 and ("; the run has "
    .. table.concat(known, ", ")) or "; start one with start_command") .. "."
end

local function show_output(run, c, since)
  local max = run.opts.max_output_bytes
  local text_out, from, to, dropped = background.Set_output(c, since, max)
  local body = runtime.output.utf8_repair(text_out)
  local parts = { state_line(c) }
  if dropped > 0 then
    parts[#parts + 1] = "[" .. dropped .. " bytes before offset " .. from .. " were dropped (only the last "
      .. background.LOG_MAX .. " bytes are kept)]"
  end
  if body ~= "" then
    parts[#parts + 1] = (runtime.output.truncate(body, { max_lines = run.opts.max_output_lines, max_bytes = max,
                                                        direction = "head" }))
  else
    parts[#parts + 1] = "(no new output)"
  end
  local note = "[output bytes " .. from .. "-" .. to .. " of " .. c.total .. "; read_output with since=" .. to
    .. " for what comes next"
  if since == nil and from > 0 then note = note .. ", since=0 for the start" end
  parts[#parts + 1] = note .. "]"
  return table.concat(parts, "\n")
end

local function start_command(run, args)
  local cmd = args.command
  if cmd == "" or cmd:find("\0", 1, true) then return nil, "command must be a non-empty string without NUL bytes." end
  local name = opt(args.name)
  if name ~= nil and (name == "" or not name:match("^[%w._%-]+$") or #name > 64) then
    return nil, "name must be 1 to 64 letters, digits, '.', '_' or '-'."
  end
  local sb = run:sandbox()
  local set = bg_set(run)
  local c, why, e = set:start(sb, cmd, name)
  if not c then
    if e then return run:failure(e, "Could not start the command: ") end
    return nil, why
  end
  -- a command that fails at once says so now rather than at the next read
  local deadline = runtime.now() + M.DEFAULTS.start_wait
  while c.exit == nil and runtime.now() < deadline do runtime.sleep(0.05) end
  if c.exit ~= nil then
    return "Started " .. fmt.quote(c.handle) .. ", but it has already exited.\n" .. show_output(run, c, 0)
  end
  return "Started " .. fmt.quote(c.handle) .. " in the background: " .. cmd .. "\nIt runs until stop_command or "
    .. "the end of this run. Read its output with read_output{handle = " .. fmt.quote(c.handle) .. "}."
end

local function read_output(run, args)
  local c, why = find(run, args.handle)
  if not c then return nil, why end
  local since = opt(args.since)
  if since ~= nil and (math.type(since) ~= "integer" or since < 0) then
    return nil, "since must be a byte offset (an integer >= 0), got " .. tostring(since) .. "."
  end
  return show_output(run, c, since)
end

local function write_stdin(run, args)
  local c, why = find(run, args.handle)
  if not c then return nil, why end
  if c.exit ~= nil or c.stopped then return nil, fmt.quote(c.handle) .. " has exited; its stdin is closed." end
  local ok, err = c.proc:write(args.text)
  if not ok then return nil, "Could not write to " .. fmt.quote(c.handle) .. ": " .. tostring(err) end
  return "Wrote " .. #args.text .. " bytes to the stdin of " .. fmt.quote(c.handle) .. "."
end

local function stop_command(run, args)
  local c, why = find(run, args.handle)
  if not c then return nil, why end
  local was = c.exit
  background.Set_stop(c, M.DEFAULTS.stop_grace)
  local head = was ~= nil and ("Stopped " .. fmt.quote(c.handle) .. ": it had already exited.")
    or ("Stopped " .. fmt.quote(c.handle) .. ".")
  return head .. "\n" .. show_output(run, c, nil)
end

local HANDLERS = { edit_file = edit_file, apply_patch = apply_patch, glob = glob_tool, grep = grep_tool,
                   start_command = start_command, read_output = read_output, write_stdin = write_stdin,
                   stop_command = stop_command }

--- Stop the run's background commands (the run is ending).
function M.close(run)
  if run.background then
    run.background:close()
    run.background = nil
  end
end

--- The tools of `names` for a run.
-- @tparam table run the capability's run
-- @tparam table names from `check`
-- @treturn table tools
function M.build(run, names)
  local list = {}
  for _, name in ipairs(names) do
    local h = HANDLERS[name]
    list[#list + 1] = tool.new { name = name, description = M.DESCRIPTIONS[name], parameters = M.PARAMETERS[name],
                                 handler = function(_, args) return h(run, args) end }
  end
  return list
end

return M
