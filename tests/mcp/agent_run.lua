-- tests/mcp/agent_run.lua: a real agent run (scripted model) against the
-- reference MCP servers over stdio. Prints one TAP line per check.
-- Usage: lash eval "$(cat tests/mcp/agent_run.lua)" BIN_DIR FS_ROOT
local bin, root = ...
local n, failed = 0, 0
local function check(desc, cond, detail)
  n = n + 1
  if cond then print("ok " .. n .. " - " .. desc)
  else
    failed = failed + 1
    print("not ok " .. n .. " - " .. desc)
    if detail then print("#   " .. tostring(detail):gsub("\n", "\n#   ")) end
  end
end

local everything = lash.mcp.stdio { command = bin .. "/mcp-server-everything", name = "everything", timeout = 30 }
local fs = lash.mcp.stdio { command = bin .. "/mcp-server-filesystem", args = { root }, name = "fs" }

local seen_tools
local agent = lash.agent {
  model = lash.script_model {
    function(_, info)
      seen_tools = {}
      return { tool_calls = {
        { name = "echo", args = { message = "hi there" } },
        { name = "get-sum", args = { a = 2, b = 40 } },
        { name = "get-tiny-image" },
        { name = "get-structured-content", args = { location = "Chicago" } },
        { name = "get-resource-links", args = { count = 2 } },
        { name = "get-resource-reference", args = { resourceType = "Text", resourceId = 1 } },
        { name = "trigger-long-running-operation", args = { duration = 1, steps = 3 } },
        { name = "trigger-elicitation-request" },
        { name = "fs_read_text_file", args = { path = root .. "/hello.txt" } },
        { name = "fs_list_directory", args = { path = root } },
      } }
    end,
    { text = "done" },
  },
  toolsets = {
    everything,
    lash.filter_tools { capability = lash.prefix_tools { capability = fs, prefix = "fs" },
                        keep = { "fs_read_text_file", "fs_list_directory" } },
  },
  tool_timeout = 60,
}

local results, progress, asked, defs = {}, {}, nil, nil
local r = agent:run("go", {
  on_event = function(e)
    if e.type == "tool_result" then results[e.name] = e end
    if e.type == "tool_progress" then progress[#progress + 1] = e end
    if e.type == "model_request" then defs = e.tools end
  end,
  approve = function(_, call)
    if call.kind == "elicitation" then
      asked = call
      return { allow = true, args = { name = "Ada", check = true, email = "ada@example.com",
                                      integer = 7, number = 1.5 } }
    end
    return true
  end,
})
local function content(name) return results[name] and results[name].content or "(no result)" end
check("the run completes", r.output == "done", r.output)
check("echo returns its text", content("echo") == "Echo: hi there", content("echo"))
check("get-sum", content("get-sum"):find("42", 1, true), content("get-sum"))
check("an image becomes a note of its type and size", content("get-tiny-image"):find("[image: image/png,", 1, true),
      content("get-tiny-image"))
check("structuredContent / text", content("get-structured-content"):find("temperature", 1, true),
      content("get-structured-content"))
check("resource links are named", content("get-resource-links"):find("[resource link: ", 1, true),
      content("get-resource-links"))
check("an embedded resource shows its text", content("get-resource-reference"):find("[resource demo://", 1, true),
      content("get-resource-reference"))
check("progress notifications become tool_progress events", #progress >= 2
      and progress[1].name == "trigger-long-running-operation" and progress[1].total ~= nil, #progress)
check("elicitation reaches the approve callback", asked and asked.kind == "elicitation"
      and type(asked.message) == "string", asked and asked.message)
check("the accepted answer reaches the server", content("trigger-elicitation-request"):find("Ada", 1, true),
      content("trigger-elicitation-request"))
check("filesystem server: read through prefix and filter", content("fs_read_text_file"):find("hello from lash", 1, true),
      content("fs_read_text_file"))
check("filesystem server: list", content("fs_list_directory"):find("hello.txt", 1, true), content("fs_list_directory"))
check("filter keeps only the two fs tools (plus everything's)", defs and defs > 10 and results.fs_list_directory ~= nil, defs)

-- isError becomes a retry prompt; an unknown server fails clearly
local a2 = lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "fs_read_text_file", args = { path = "/etc/passwd" } } } },
    function(msgs)
      local last = msgs[#msgs].parts[1]
      return { text = last.status .. ":" .. last.content }
    end,
  },
  toolsets = { lash.prefix_tools { capability = fs, prefix = "fs" } },
}
local r2 = a2:run("go")
check("isError becomes a retry prompt", r2.output:match("^retry:") and r2.output:find("outside allowed", 1, true)
      or r2.output:find("denied", 1, true), r2.output)

local a3 = lash.agent { model = lash.script_model { { text = "x" } },
                        toolsets = { lash.mcp.stdio { command = "/nonexistent/server" } } }
local ok3, e3 = pcall(a3.run, a3, "go")
check("a missing server program is a clear error", not ok3 and tostring(e3):find("cannot start '/nonexistent/server'", 1, true), e3)

local a4 = lash.agent { model = lash.script_model { { text = "x" } },
                        toolsets = { lash.mcp.stdio { command = "sh", args = { "-c", "echo broken >&2; exit 3" } } } }
local ok4, e4 = pcall(a4.run, a4, "go")
check("a server that dies says how, with its stderr", not ok4 and tostring(e4):find("exited with status 3", 1, true)
      and tostring(e4):find("broken", 1, true), e4)

-- a slow call past the per-call timeout is cancelled
local slow = lash.mcp.stdio { command = bin .. "/mcp-server-everything", name = "slow", timeout = 1 }
local a5 = lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "trigger-long-running-operation", args = { duration = 5, steps = 5 } } } },
    function(msgs) local p = msgs[#msgs].parts[1]; return { text = p.status .. ":" .. p.content } end,
  },
  toolsets = { slow }, retries = 2,
}
local ok5, r5 = pcall(a5.run, a5, "go")
check("a call past its timeout is cancelled and reported", ok5 or lash.is_error(r5, "timeout"),
      ok5 and r5.output or r5)
print("1.." .. n)
os.exit(failed == 0 and 0 or 1)
