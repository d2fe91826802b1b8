-- tests/mcp/conformance_client.lua: the client the MCP conformance suite
-- drives (`conformance client --command ...` appends the server's URL).
-- It does what an agent host does: initialize, list the tools, call each
-- one with arguments made from its schema, answer elicitations by
-- accepting the defaults, close.
local url = ...
local mcp = require "lash.mcp"
local function sample(s)
  local t = type(s) == "table" and s.type or nil
  if t == "number" or t == "integer" then return 1 end
  if t == "boolean" then return true end
  if t == "array" then return lash.json.array() end
  if t == "object" then return {} end
  return "test"
end
-- OAuth as a headless host does it: the "browser" is a GET of the
-- authorization URL whose redirect we read; credentials the scenario
-- pre-registered come in MCP_CONFORMANCE_CONTEXT
local scenario = os.getenv("MCP_CONFORMANCE_SCENARIO") or ""
local context = lash.json.try_decode(os.getenv("MCP_CONFORMANCE_CONTEXT") or "") or {}
local oauth = {
  token_file = false,
  client_metadata_url = "https://conformance-test.local/client-metadata.json",
  authorize = function(auth_url)
    local status, headers = lash.http.request { url = auth_url, timeout = 20 }
    assert(status >= 300 and status < 400 and headers.location, "the authorization endpoint did not redirect")
    return headers.location
  end,
}
if context.client_id then
  oauth.client_id, oauth.client_secret, oauth.private_key = context.client_id, context.client_secret,
    context.private_key_pem
end
if scenario:match("^auth/client%-credentials") then oauth.grant = "client_credentials" end
if context.idp_token_endpoint then
  oauth.grant = "jwt_bearer"
  oauth.idp = { token_endpoint = context.idp_token_endpoint, id_token = context.idp_id_token,
                client_id = context.idp_client_id }
end
local transport = mcp.transport { url = url, name = "conformance", timeout = 20, oauth = oauth }
local c = mcp.connect_client(transport, {
  name = "conformance", timeout = 20,
  on_elicit = function(params) return mcp.elicit_with(function() return true end, {}, "conformance", params) end,
})
for _, t in ipairs(c:list_tools()) do
  local args = {}
  local props = type(t.inputSchema) == "table" and t.inputSchema.properties or {}
  for _, k in ipairs(type(t.inputSchema) == "table" and t.inputSchema.required or {}) do
    args[k] = sample(props[k])
  end
  local ok, res = pcall(c.call_tool, c, t.name, args, { timeout = 20, on_progress = function() end })
  print(t.name, ok and mcp.result_text(res) or tostring(res))
end
-- stay a moment for server-initiated traffic on the GET stream (sse-retry)
if os.getenv("MCP_CONFORMANCE_SCENARIO") == "sse-retry" then lash.sleep(3) end
c:close()
