--- Prompt parts beyond text: images and documents read from a file or
-- given as bytes, checked (type, size) and stored in the history as plain
-- JSON-serialisable tables the adapters turn into their wire blocks.
--
--   { type = "image", media_type = "image/png", data = "<base64>", name = }
--   { type = "document", media_type = "application/pdf", data = "<base64>", name = }
--   { type = "document", media_type = "text/plain", text = "...", name = }
--
-- Limits follow the providers' documented ones: an image at most 5 MiB,
-- a PDF at most 32 MiB, a text document at most 8 MiB.
-- @module lash.models.parts
local runtime = require "lash.runtime"
local M = {}

M.IMAGE_MAX = 5 * 1024 * 1024
M.PDF_MAX = 32 * 1024 * 1024
M.TEXT_MAX = 8 * 1024 * 1024

local IMAGE_TYPES = { ["image/png"] = true, ["image/jpeg"] = true, ["image/gif"] = true, ["image/webp"] = true }

local function config_error(msg)
  return runtime.error("config", msg)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local ENC = {}
for i = 0, 63 do ENC[i] = B64:sub(i + 1, i + 1) end

--- Standard base64 (RFC 4648, padded).
function M.base64(s)
  local out, n = {}, #s
  for i = 1, n - 2, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + b * 256 + c
    out[#out + 1] = ENC[v >> 18] .. ENC[(v >> 12) & 63] .. ENC[(v >> 6) & 63] .. ENC[v & 63]
  end
  local rest = n % 3
  if rest == 1 then
    local v = s:byte(n) * 65536
    out[#out + 1] = ENC[v >> 18] .. ENC[(v >> 12) & 63] .. "=="
  elseif rest == 2 then
    local a, b = s:byte(n - 1, n)
    local v = a * 65536 + b * 256
    out[#out + 1] = ENC[v >> 18] .. ENC[(v >> 12) & 63] .. ENC[(v >> 6) & 63] .. "="
  end
  return table.concat(out)
end

--- The media type of some bytes, from their magic numbers; "text/plain"
-- for valid UTF-8 without NUL bytes; nil otherwise.
function M.sniff(bytes)
  if bytes:sub(1, 8) == "\137PNG\r\n\26\n" then return "image/png" end
  if bytes:sub(1, 3) == "\255\216\255" then return "image/jpeg" end
  if bytes:sub(1, 6) == "GIF87a" or bytes:sub(1, 6) == "GIF89a" then return "image/gif" end
  if bytes:sub(1, 4) == "RIFF" and bytes:sub(9, 12) == "WEBP" then return "image/webp" end
  if bytes:sub(1, 5) == "%PDF-" then return "application/pdf" end
  if utf8.len(bytes) and not bytes:find("\0", 1, true) then return "text/plain" end
  return nil
end

local function mib(n)
  return string.format("%.1f MiB", n / (1024 * 1024))
end

local function check_size(name, kind, n, max)
  if n > max then
    return nil, string.format("%s is %s; %s are limited to %s by the model APIs (shrink or split it)",
                              name, mib(n), kind, mib(max))
  end
  return true
end

-- Parts this module made (already checked and encoded): a prompt may hold
-- them as they are. Weak keys: the set owns nothing.
local made = setmetatable({}, { __mode = "k" })

local function mark(p)
  made[p] = true
  return p
end

--- Make a part from bytes. Returns the part, or nil and a message.
-- @tparam string bytes
-- @tparam[opt] string media_type (sniffed when absent)
-- @tparam[opt] string name shown in errors and sent as the file name
function M.from_bytes(bytes, media_type, name)
  name = name or "the data"
  media_type = media_type or M.sniff(bytes)
  if not media_type then
    return nil, name .. ": unsupported file type (images: PNG, JPEG, GIF, WebP; documents: PDF, UTF-8 text)"
  end
  if IMAGE_TYPES[media_type] then
    local ok, err = check_size(name, "images", #bytes, M.IMAGE_MAX)
    if not ok then return nil, err end
    return mark { type = "image", media_type = media_type, data = M.base64(bytes), name = name }
  elseif media_type == "application/pdf" then
    local ok, err = check_size(name, "PDF documents", #bytes, M.PDF_MAX)
    if not ok then return nil, err end
    return mark { type = "document", media_type = media_type, data = M.base64(bytes), name = name }
  elseif media_type == "text/plain" then
    local ok, err = check_size(name, "text documents", #bytes, M.TEXT_MAX)
    if not ok then return nil, err end
    if not utf8.len(bytes) then return nil, name .. ": a text document must be UTF-8" end
    return mark { type = "document", media_type = media_type, text = bytes, name = name }
  end
  return nil, name .. ": unsupported media type '" .. tostring(media_type)
    .. "' (image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain)"
end

--- Make a part from base64 text (as ACP and MCP carry images and files),
-- without decoding it: the media type must be given. Returns the part, or
-- nil and a message.
-- @tparam string b64 standard base64 (padded or not; no line breaks)
-- @tparam string media_type
-- @tparam[opt] string name
function M.from_base64(b64, media_type, name)
  name = name or "the data"
  if type(b64) ~= "string" or b64 == "" or b64:find("[^%w+/=]") or b64:find("=[^=]") or #b64 % 4 == 1 then
    return nil, name .. ": the data is not base64"
  end
  local pad = #(b64:match("=*$"))
  if pad > 2 then return nil, name .. ": the data is not base64" end
  local size = (#b64 - pad) * 3 // 4
  if IMAGE_TYPES[media_type] then
    local ok, err = check_size(name, "images", size, M.IMAGE_MAX)
    if not ok then return nil, err end
    return mark { type = "image", media_type = media_type, data = b64, name = name }
  elseif media_type == "application/pdf" then
    local ok, err = check_size(name, "PDF documents", size, M.PDF_MAX)
    if not ok then return nil, err end
    return mark { type = "document", media_type = media_type, data = b64, name = name }
  end
  return nil, name .. ": unsupported media type '" .. tostring(media_type)
    .. "' for base64 data (image/png, image/jpeg, image/gif, image/webp, application/pdf)"
end

--- Make a part from a file. Returns the part, or nil and a message.
function M.from_file(path, media_type)
  local f, err = io.open(path, "rb")
  if not f then return nil, "cannot read " .. tostring(err) end
  -- refuse huge files before reading them whole
  local size = f:seek("end")
  if size and size > M.PDF_MAX then
    f:close()
    return nil, string.format("%s is %s; files are limited to %s by the model APIs", path, mib(size), mib(M.PDF_MAX))
  end
  f:seek("set")
  local bytes = f:read("a")
  f:close()
  if not bytes then return nil, "cannot read " .. path end
  local name = path:match("([^/]+)$") or path
  local part, perr = M.from_bytes(bytes, media_type, name)
  if not part then return nil, (perr:gsub("^" .. name:gsub("%p", "%%%0"), path)) end
  return part
end

local function one(p, i)
  if type(p) == "string" then return { type = "text", text = p } end
  if type(p) ~= "table" then return nil, "prompt[" .. i .. "] must be a string or a part table, got " .. type(p) end
  if made[p] then return p end
  if p.type == "text" then
    if type(p.text) ~= "string" then return nil, "prompt[" .. i .. "].text must be a string" end
    return { type = "text", text = p.text }
  end
  if p.type == "image" or p.type == "document" or p.type == "file" then
    local part, err
    if p.path ~= nil then
      part, err = M.from_file(p.path, p.media_type)
    elseif type(p.data) == "string" then
      part, err = M.from_bytes(p.data, p.media_type, p.name)
    elseif type(p.text) == "string" then
      part, err = M.from_bytes(p.text, "text/plain", p.name)
    else
      return nil, "prompt[" .. i .. "]: a " .. p.type .. " part needs path = ... or data = ... (the bytes)"
    end
    if not part then return nil, "prompt[" .. i .. "]: " .. err end
    if p.type == "image" and part.type ~= "image" then
      return nil, "prompt[" .. i .. "]: " .. part.name .. " is not an image (" .. part.media_type .. ")"
    end
    return part
  end
  return nil, "prompt[" .. i .. "].type must be \"text\", \"image\", \"document\" or \"file\", got " .. tostring(p.type)
end

--- Turn a prompt (a string or a list of strings and parts) into history
-- parts; raises a `config` error naming the bad part.
function M.prompt_parts(prompt)
  if type(prompt) == "string" then return { { type = "text", text = prompt } } end
  local out = {}
  for i, p in ipairs(prompt) do
    local part, err = one(p, i)
    if not part then error(config_error(err), 0) end
    out[#out + 1] = part
  end
  if #out == 0 then error(config_error("the prompt is an empty list of parts"), 0) end
  return out
end

--- The text of a prompt's parts, with a placeholder per file (for events).
function M.summary(parts)
  local out = {}
  for _, p in ipairs(parts) do
    if p.type == "text" then out[#out + 1] = p.text
    else out[#out + 1] = "[" .. p.type .. " " .. tostring(p.name or p.media_type) .. "]" end
  end
  return table.concat(out, "\n")
end

--- A `data:` URL for a part (OpenAI image_url / file_data).
function M.data_url(p)
  return "data:" .. p.media_type .. ";base64," .. (p.data or M.base64(p.text or ""))
end

return M
