--- The Agent Client Protocol's words, shared by both of lash's ends
-- (`lash acp`, the agent; lash.acp.client, the client): the protocol
-- version, error codes, and the conversions between ACP's content blocks,
-- tool calls and plans and lash's prompt parts, tool calls and events.
--
-- The version is ACP v1, the stable schema that the official TypeScript
-- SDK (`@agentclientprotocol/sdk` 2.4.0, `schema/v1/schema.json`) ships
-- and its `PROTOCOL_VERSION` names. Pure functions: no I/O.
-- @module lash.acp.protocol
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"
local parts = require "lash.models.parts"

local M = {}

--- The protocol version lash speaks.
M.VERSION = 1

--- Error codes beyond JSON-RPC's (ACP's ErrorCode).
M.AUTH_REQUIRED = -32000
M.RESOURCE_NOT_FOUND = -32002
M.REQUEST_CANCELLED = -32800

--- An invalid-params error naming where and what.
function M.bad_params(message)
  return rpc.error(rpc.INVALID_PARAMS, "Invalid params: " .. message)
end

--- Check `params[key]` is of type `want` (or absent when `optional`);
-- raises Invalid params naming the field.
function M.field(params, key, want, optional, where)
  local v = params[key]
  if v == nil and optional then return nil end
  local t = type(v)
  if want == "array" then
    if t ~= "table" or (next(v) ~= nil and v[1] == nil) then
      error(M.bad_params((where or "") .. key .. " must be an array, got " .. (v == nil and "nothing" or t)), 0)
    end
  elseif want == "integer" then
    if math.type(v) ~= "integer" then
      error(M.bad_params((where or "") .. key .. " must be an integer, got " .. (v == nil and "nothing" or t)), 0)
    end
  elseif t ~= want then
    error(M.bad_params((where or "") .. key .. " must be a " .. want .. ", got " .. (v == nil and "nothing" or t)), 0)
  end
  return v
end

---------------------------------------------------------------------------
-- Prompts: ACP content blocks -> lash prompt parts

-- The text a model sees for an embedded text resource: its URI and its
-- text, fenced so the text cannot close the fence early.
local function context_text(uri, text)
  local fence = "```"
  while text:find(fence, 1, true) do fence = fence .. "`" end
  return "Context from " .. uri .. ":\n" .. fence .. "\n" .. text .. (text:sub(-1) == "\n" and "" or "\n") .. fence
end

local function block_part(b, i)
  local where = "prompt[" .. i .. "]."
  if type(b) ~= "table" then error(M.bad_params("prompt[" .. i .. "] must be a content block object"), 0) end
  local t = b.type
  if t == "text" then
    return { type = "text", text = M.field(b, "text", "string", false, where) }
  elseif t == "image" then
    local data = M.field(b, "data", "string", false, where)
    local mime = M.field(b, "mimeType", "string", false, where)
    local p, err = parts.from_base64(data, mime, b.uri or ("image " .. i))
    if not p then error(M.bad_params(where .. "data: " .. err), 0) end
    return p
  elseif t == "resource_link" then
    local name = M.field(b, "name", "string", false, where)
    local uri = M.field(b, "uri", "string", false, where)
    return { type = "text", text = "[@" .. name .. "](" .. uri .. ")" }
  elseif t == "resource" then
    local r = M.field(b, "resource", "table", false, where)
    local uri = M.field(r, "uri", "string", false, where .. "resource.")
    if r.text ~= nil then
      return { type = "text", text = context_text(uri, M.field(r, "text", "string", false, where .. "resource.")) }
    end
    local blob = M.field(r, "blob", "string", false, where .. "resource.")
    local p, err = parts.from_base64(blob, r.mimeType, uri)
    if not p then error(M.bad_params(where .. "resource.blob: " .. err), 0) end
    return p
  elseif t == "audio" then
    error(M.bad_params(where .. "type: lash takes no audio (promptCapabilities.audio is false)"), 0)
  end
  error(M.bad_params(where .. "type must be text, image, resource_link or resource, got " .. tostring(t)), 0)
end

--- A session/prompt's `prompt` as lash prompt parts, and its size in
-- bytes (text and data). Raises Invalid params naming a bad block.
function M.prompt_parts(blocks)
  if type(blocks) ~= "table" or (next(blocks) ~= nil and blocks[1] == nil) then
    error(M.bad_params("prompt must be an array of content blocks"), 0)
  end
  if #blocks == 0 then error(M.bad_params("prompt is empty"), 0) end
  local out, size = {}, 0
  for i, b in ipairs(blocks) do
    local p = block_part(b, i)
    size = size + #(p.text or p.data or "")
    out[i] = p
  end
  return out, size
end

--- The ACP content blocks of a lash user message (for replaying a saved
-- session): text, and images as they are.
function M.user_blocks(msg)
  local out = {}
  for _, p in ipairs(msg.parts or {}) do
    if p.type == "text" then
      out[#out + 1] = { type = "text", text = p.text }
    elseif p.type == "image" and p.data then
      out[#out + 1] = { type = "image", data = p.data, mimeType = p.media_type }
    elseif p.type == "document" then
      out[#out + 1] = { type = "text", text = p.text and context_text(p.name or "a document", p.text)
                                              or ("[document " .. tostring(p.name or p.media_type) .. "]") }
    end
  end
  return out
end

---------------------------------------------------------------------------
-- Tool calls: lash's tools as ACP sees them

-- A tool's base name: the sandbox tools may be prefixed (lash.prefix_tools).
local KINDS = {
  read_file = "read", list_directory = "search", glob = "search", grep = "search",
  write_file = "edit", edit_file = "edit", apply_patch = "edit",
  run_command = "execute", update_plan = "think",
}

local function base_name(name)
  if KINDS[name] then return name end
  for base in pairs(KINDS) do
    if #name > #base and name:sub(-#base - 1) == "_" .. base then return base end
  end
  return name
end

--- The ACP kind of a lash tool call (read, edit, search, execute, think,
-- other).
function M.tool_kind(name)
  return KINDS[base_name(name)] or "other"
end

--- Kinds that change nothing: asked about only when the tool says so.
M.READ_ONLY = { read = true, search = true, think = true }

local function one_line(s, max)
  s = tostring(s):gsub("%s+", " ")
  if #s > max then s = s:sub(1, max - 3):gsub("[\128-\191]*$", ""):gsub("[\192-\255]$", "") .. "..." end
  return s
end

--- A short human title for a call, as editors show it.
function M.tool_title(name, args)
  args = type(args) == "table" and args or {}
  local base = base_name(name)
  if base == "run_command" and type(args.command) == "string" then return one_line(args.command, 120) end
  local path = type(args.path) == "string" and args.path or nil
  if base == "read_file" and path then return "Read " .. path end
  if base == "write_file" and path then return "Write " .. path end
  if base == "edit_file" and path then return "Edit " .. path end
  if base == "list_directory" then return "List " .. (path or ".") end
  if (base == "glob" or base == "grep") and type(args.pattern) == "string" then
    return (base == "glob" and "Find " or "Search ") .. one_line(args.pattern, 80)
  end
  if base == "update_plan" then return "Update the plan" end
  return name
end

--- The files a call touches, as ACP locations (absolute where the path is
-- relative to `root`).
function M.tool_locations(args, root)
  if type(args) ~= "table" or type(args.path) ~= "string" or args.path == "" then return json.array() end
  local p = args.path
  if root and p:sub(1, 1) ~= "/" then p = root:gsub("/$", "") .. "/" .. p end
  return json.array { { path = p } }
end

--- A tool call's text as ACP tool call content.
function M.text_content(text)
  return { { type = "content", content = { type = "text", text = text } } }
end

---------------------------------------------------------------------------
-- Plans

local PLAN_STATUS = { pending = true, in_progress = true, completed = true }
local PLAN_PRIORITY = { high = true, medium = true, low = true }
M.PLAN_STATUS, M.PLAN_PRIORITY = PLAN_STATUS, PLAN_PRIORITY

--- ACP plan entries from lash's plan steps ({content, status, priority}).
function M.plan_entries(steps)
  local out = json.array()
  for i, s in ipairs(steps or {}) do
    out[i] = { content = tostring(s.content or s.step or ""),
               status = PLAN_STATUS[s.status] and s.status or "pending",
               priority = PLAN_PRIORITY[s.priority] and s.priority or "medium" }
  end
  return out
end

---------------------------------------------------------------------------
-- Stop reasons

--- The ACP stop reason of a finished lash run.
function M.stop_reason(res)
  local r = res.stop_reason
  if r == "max_tokens" then return "max_tokens" end
  if r == "refusal" or r == "content_filter" then return "refusal" end
  if r == "cancelled" then return "cancelled" end
  return "end_turn"
end

return M
