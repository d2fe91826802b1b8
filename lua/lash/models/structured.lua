--- Structured output: what to ask of a model for an output schema, and
-- checking its answer. Native where the adapter enforces the schema on the
-- wire (`model:native_output(schema)` is true), an instruction otherwise;
-- the answer is decoded and validated either way, since no provider's
-- enforcement covers every keyword lash's validator checks.
-- @module lash.models.structured
local json = require "lash.json"
local schema = require "lash.schema"

local M = {}

--- The request's `output` field and the instructions to send.
-- @param s the output schema (or nil for none)
-- @param model the resolved model
-- @tparam[opt] string instructions the rendered instructions
-- @treturn table|nil `{schema=, name="output"}` when the model enforces it
-- @treturn string|nil the instructions, with the schema appended when not
function M.request(s, model, instructions)
  if not s then return nil, instructions end
  if type(model.native_output) == "function" and model:native_output(s) then
    return { schema = s, name = "output" }, instructions
  end
  local ask = "Answer with only a JSON value (no prose, no code fence) that matches this JSON Schema:\n"
    .. json.encode_canonical(s)
  return nil, instructions and (instructions .. "\n\n" .. ask) or ask
end

--- Decode and validate an answer.
-- @treturn[1] the decoded value
-- @treturn[2] nil
-- @treturn[2] string the problems, as the retry prompt's text
function M.decode(s, text)
  -- models without a native mode often fence their JSON anyway
  local body = text:gsub("^%s*```%w*%s*\n", ""):gsub("\n%s*```%s*$", "")
  local v, derr = json.try_decode(body)
  if v == nil and derr then
    return nil, "The answer is not valid JSON (" .. tostring(derr) .. "). Answer with only a JSON value that "
      .. "matches the output schema."
  end
  local ok, errs = schema.validate(v, s)
  if not ok then
    return nil, "The answer does not match the output schema: " .. schema.format_errors(errs)
  end
  return v
end

return M
