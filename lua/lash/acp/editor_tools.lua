--- EditorTools: under `lash acp`, the model's files and commands are the
-- editor's instead of lash's sandbox. read_file, write_file and edit_file
-- go through the client's `fs/read_text_file` and `fs/write_text_file`
-- (so an editor sees unsaved buffers and records the edits), run_command
-- through its `terminal/*` (the editor shows the terminal live in the
-- tool call). Paths are relative to the session's cwd.
--
-- The tools reach the editor through the run's host handle, the bridge
-- lash.acp.server gives each turn; anywhere else (lash run, chat) they
-- fail with an error saying so. A client that does not offer fs or
-- terminals gets the same tools, each failing with a message naming what
-- the editor lacks.
-- @module lash.acp.editor_tools
local capability = require "lash.capability"
local tool = require "lash.tool"

local M = {}

local OPTIONS = { fs = "boolean", terminal = "boolean", name = "string", command_timeout = "number" }

-- How long a command may run when the model gives no timeout, and at most.
local DEFAULT_TIMEOUT, MAX_TIMEOUT = 120, 1800

local function bridge_of(ctx)
  local b = ctx.host
  if type(b) ~= "table" or not b.editor_files then
    error("EditorTools works only under `lash acp` (the tools use the editor's files and terminals); "
      .. "use lash.sandbox_capability{} elsewhere", 0)
  end
  return b
end

local PATH = { type = "string", minLength = 1, description = "The file's path, relative to the project's directory "
  .. "(or absolute)" }

local function read_tool()
  return tool.new {
    name = "read_file",
    description = "Read a text file from the editor (its open buffer if it has unsaved changes).",
    parameters = { type = "object", properties = {
      path = PATH,
      line = { type = "integer", minimum = 1, description = "The first line to read (1-based)" },
      limit = { type = "integer", minimum = 1, description = "How many lines to read" },
    }, required = { "path" }, additionalProperties = false },
    handler = function(ctx, args)
      return bridge_of(ctx):read_text_file(args.path, args.line, args.limit)
    end,
  }
end

local function write_tool()
  return tool.new {
    name = "write_file",
    description = "Write a text file in the editor, replacing it whole (or creating it).",
    parameters = { type = "object", properties = {
      path = PATH, content = { type = "string", description = "The file's complete new text" },
    }, required = { "path", "content" }, additionalProperties = false },
    handler = function(ctx, args)
      bridge_of(ctx):write_text_file(args.path, args.content)
      return "Wrote " .. #args.content .. " bytes to " .. args.path .. "."
    end,
  }
end

local function plain_count(s, sub)
  local n, i = 0, 1
  while true do
    local a, b = s:find(sub, i, true)
    if not a then return n end
    n, i = n + 1, b + 1
  end
end

local function edit_tool()
  return tool.new {
    name = "edit_file",
    description = "Replace old_string with new_string in a text file in the editor. old_string must occur "
      .. "exactly once unless replace_all is true; include enough context to make it unique.",
    parameters = { type = "object", properties = {
      path = PATH,
      old_string = { type = "string", minLength = 1, description = "The exact text to replace" },
      new_string = { type = "string", description = "The text to put in its place" },
      replace_all = { type = "boolean", description = "Replace every occurrence (default false)" },
    }, required = { "path", "old_string", "new_string" }, additionalProperties = false },
    handler = function(ctx, args)
      local b = bridge_of(ctx)
      local text = b:read_text_file(args.path)
      local n = plain_count(text, args.old_string)
      if n == 0 then
        tool.retry("old_string does not occur in " .. args.path .. "; read the file and copy it exactly")
      end
      if n > 1 and not args.replace_all then
        tool.retry("old_string occurs " .. n .. " times in " .. args.path
          .. "; add context to make it unique, or set replace_all")
      end
      local out, i = {}, 1
      while true do
        local a, e = text:find(args.old_string, i, true)
        if not a then break end
        out[#out + 1] = text:sub(i, a - 1)
        out[#out + 1] = args.new_string
        i = e + 1
        if not args.replace_all then break end
      end
      out[#out + 1] = text:sub(i)
      b:write_text_file(args.path, table.concat(out))
      return "Replaced " .. (args.replace_all and n or 1) .. " occurrence(s) in " .. args.path .. "."
    end,
  }
end

local function command_tool(default_timeout)
  return tool.new {
    name = "run_command",
    description = "Run a shell command in the editor's terminal, in the project's directory; returns its "
      .. "output and exit status.",
    parameters = { type = "object", properties = {
      command = { type = "string", minLength = 1, description = "The command, run with sh -c" },
      timeout = { type = "integer", minimum = 1, maximum = MAX_TIMEOUT,
                  description = "Seconds before it is killed (default " .. default_timeout .. ")" },
    }, required = { "command" }, additionalProperties = false },
    handler = function(ctx, args)
      local r = bridge_of(ctx):run(ctx.tool_call_id, args.command, args.timeout or default_timeout)
      local head = r.timed_out and ("Killed after " .. (args.timeout or default_timeout) .. " s.\n")
        or (r.signal and ("Killed by signal " .. r.signal .. ".\n"))
        or ("Exit status " .. tostring(r.exit_code) .. ".\n")
      return head .. (r.truncated and "[output truncated to its end]\n" or "") .. r.output
    end,
  }
end

--- The EditorTools capability.
-- @tparam[opt] table opts `fs` (read_file, write_file and edit_file;
--   default true), `terminal` (run_command; default true),
--   `command_timeout` (seconds, default 120), `name`
-- @treturn lash.capability
function M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("lash.acp.editor_tools: expected a table of options, got " .. type(opts), 2) end
  tool.check_fields("lash.acp.editor_tools", opts, OPTIONS, 2)
  local t = opts.command_timeout or DEFAULT_TIMEOUT
  if t < 1 or t > MAX_TIMEOUT then
    error("lash.acp.editor_tools: command_timeout must be 1.." .. MAX_TIMEOUT .. " seconds, got " .. t, 2)
  end
  local tools = {}
  if opts.fs ~= false then
    for _, make in ipairs { read_tool, write_tool, edit_tool } do tools[#tools + 1] = make() end
  end
  if opts.terminal ~= false then tools[#tools + 1] = command_tool(math.floor(t)) end
  if #tools == 0 then error("lash.acp.editor_tools: fs = false and terminal = false leave no tools", 2) end
  local cap = capability.new {
    name = opts.name or "EditorTools",
    description = "The editor's files and terminals (under lash acp)",
    instructions = "You work in the user's editor: file paths are relative to the project's directory, "
      .. "and edits show in the editor as you make them.",
    tools = tools,
  }
  cap.acp_editor = true -- lash.acp.server gives its runs the editor bridge
  return cap
end

return M
