--- OAuth 2.1 for Streamable HTTP MCP servers, as the MCP authorization
-- spec (2025-11-25, and the 2025-03-26 fallbacks) has a client do it.
--
-- When the server answers 401 (or 403 `insufficient_scope`), the client:
--   1. finds the protected-resource metadata (RFC 9728): the URL in the
--      challenge's `resource_metadata`, else the path-based well-known URL,
--      else the root one; checks that its `resource` is this server;
--   2. finds the authorization server's metadata (RFC 8414, then OpenID
--      discovery, path-aware), else (2025-03-26) the server root's
--      /authorize, /token and /register;
--   3. gets a client: a pre-registered `client_id` (and secret), one it
--      registered before (kept with the tokens), a client ID metadata
--      document URL where the server supports them, or dynamic client
--      registration (RFC 7591);
--   4. runs the authorization code flow with PKCE (S256), `state` and the
--      `resource` indicator (RFC 8707), the scope from the challenge, else
--      the metadata's `scopes_supported`, else none; the user opens the URL
--      and the browser comes back to a loopback listener on 127.0.0.1
--      (or `authorize`, a function, does that part) -- or, with
--      `grant = "client_credentials"`, asks for a token directly, or with
--      `grant = "jwt_bearer"` trades an identity provider's ID token for
--      one (enterprise-managed authorization, SEP-990);
--   5. uses the token as a bearer, refreshes it when it expires or is
--      refused, and asks again for more scope on `insufficient_scope`
--      (at most 3 authorizations for one request).
--
-- Tokens and registered clients are kept in one file per server URL,
-- mode 0600 (`token_file`, default under $XDG_STATE_HOME/lash/mcp-oauth/),
-- so later runs, interactive or not, reuse and refresh them. Neither a
-- token nor a secret is ever printed or logged.
-- @module lash.mcp.oauth
local json = require "lash.json"

local M = {}

local runtime = require "lash.runtime"

-- Authorizations one request may trigger before we give up (a server that
-- keeps asking for scope it never grants).
M.MAX_AUTHORIZATIONS = 3

local OPTIONS = {
  client_id = "string", client_secret = "string", client_metadata_url = "string", client_name = "string",
  scope = "string", grant = "string", authorize = "function", redirect_uri = "string",
  redirect_port = "number", token_file = true, token_endpoint_auth_method = "string",
  interactive = "boolean", timeout = "number", open_browser = "boolean", idp = "table", private_key = "string",
}

local IDP_OPTIONS = { token_endpoint = "string", id_token = "string", client_id = "string", client_secret = "string" }

---------------------------------------------------------------------------
-- Encodings

local function b64url(s)
  return (require("lash.models.parts").base64(s):gsub("+", "-"):gsub("/", "_"):gsub("=+$", ""))
end
M.b64url = b64url

local function pct(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function unpct(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function form(t, order)
  local parts = {}
  for _, k in ipairs(order) do
    if t[k] ~= nil then parts[#parts + 1] = pct(k) .. "=" .. pct(t[k]) end
  end
  return table.concat(parts, "&")
end

local function parse_query(q)
  local out = {}
  for pair in (q or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    out[unpct(k)] = unpct(v)
  end
  return out
end

--- Split an http(s) URL: scheme, authority ("host:port"), path ("/..."),
-- query (or nil). nil for anything else.
function M.split_url(url)
  local scheme, auth, rest = tostring(url):match("^([Hh][Tt][Tt][Pp][Ss]?)://([^/?#]+)(.*)$")
  if not scheme then return nil end
  rest = rest:gsub("#.*$", "")
  local path, query = rest:match("^([^?]*)%??(.*)$")
  if path == "" then path = "/" end
  return { scheme = scheme:lower(), authority = auth:lower(), path = path, query = query ~= "" and query or nil,
           origin = scheme:lower() .. "://" .. auth:lower() }
end

local function loopback(host)
  return host == "localhost" or host == "[::1]" or host:match("^127%.%d+%.%d+%.%d+$") ~= nil
end

--- Whether url may be opened in the user's browser or sent credentials:
-- https, or http to this machine (127.0.0.0/8, ::1, localhost), with no
-- user name or password and nothing but printable ASCII (an authorization
-- server's metadata is the server's to write: a `file:` URL, a `javascript:`
-- one or one carrying escape sequences is refused). Returns true, or false
-- and why.
function M.safe_url(url)
  if type(url) ~= "string" then return false, "it is not a string" end
  if url:find("[^\33-\126]") then return false, "it holds spaces, control characters or non-ASCII bytes" end
  local u = M.split_url(url)
  if not u then return false, "it is not an http(s) URL" end
  if u.authority:find("@", 1, true) then return false, "it carries a user name or password" end
  local host = u.authority:match("^(%[[^%]]*%])") or u.authority:match("^([^:]*)")
  if u.scheme == "https" or loopback(host) then return true end
  return false, "it is plain http to another machine (OAuth needs https; http only on loopback)"
end

--- The parameters of a `WWW-Authenticate: Bearer ...` challenge (lower-
-- case names), or nil when there is no Bearer challenge.
function M.parse_challenge(h)
  if type(h) ~= "string" then return nil end
  local s = h:match("[Bb][Ee][Aa][Rr][Ee][Rr]%s*(.*)$")
  if not s then return nil end
  local out, pos = {}, 1
  while pos <= #s do
    local k, e = s:match("^[%s,]*([%w_%-]+)%s*=%s*()", pos)
    if not k then break end
    local v
    if s:sub(e, e) == '"' then
      local buf, i = {}, e + 1
      while i <= #s do
        local c = s:sub(i, i)
        if c == "\\" then
          buf[#buf + 1] = s:sub(i + 1, i + 1)
          i = i + 2
        elseif c == '"' then
          break
        else
          buf[#buf + 1] = c
          i = i + 1
        end
      end
      v, pos = table.concat(buf), i + 1
    else
      v = s:match("^[^,%s]*", e)
      pos = e + #v
    end
    out[k:lower()] = v
  end
  return out
end

---------------------------------------------------------------------------
-- The store: one 0600 JSON file per server URL

local function default_token_file(url)
  local base = require("lash.paths").user_dir("state")
  if not base then return nil end
  local digest = runtime.secret.sha256(url)
  local hex = digest:sub(1, 12):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  return base .. "/mcp-oauth/" .. hex .. ".json"
end
M.default_token_file = default_token_file

local Auth = {}
Auth.__index = Auth
Auth.__name = "lash.mcp.oauth"
-- never show a token by accident
Auth.__tostring = function(self) return "lash.mcp.oauth(" .. self.url .. ")" end

local function fail(self, msg, code)
  error(runtime.error("auth", "MCP server '" .. self.name .. "': " .. msg, { code = code or "oauth",
                                                                          terminal = true, retryable = false }), 0)
end

--- A new authorization state for the server at url.
-- @tparam table o `url`, `name`, and the options of `lash.mcp.http`'s
--   `oauth` table: `client_id`, `client_secret`, `client_metadata_url`,
--   `client_name`, `scope`, `grant` ("authorization_code" or
--   "client_credentials"), `authorize` (function(url, redirect_uri)
--   returning the URL the browser was sent back to), `redirect_uri`,
--   `redirect_port`, `token_file` (false: keep nothing on disk),
--   `token_endpoint_auth_method`, `interactive`, `open_browser`, `timeout`,
--   `untrusted_spec` (true: the server was named by a spec loaded without
--   --trust, which may use kept tokens but never start a login)
function M.new(o)
  for k, v in pairs(o) do
    -- untrusted_spec: lash's own mark (lash.spec), not an option to give
    if k ~= "url" and k ~= "name" and k ~= "untrusted_spec" then
      local want = OPTIONS[k]
      if want == nil then
        local names = {}
        for n in pairs(OPTIONS) do names[#names + 1] = n end
        table.sort(names)
        error("lash.mcp.http: unknown oauth option '" .. tostring(k) .. "' (known: " .. table.concat(names, ", ") .. ")", 0)
      end
      if want ~= true and type(v) ~= want then
        error("lash.mcp.http: oauth option '" .. k .. "' must be a " .. want .. ", got " .. type(v), 0)
      end
    end
  end
  if o.token_file ~= nil and o.token_file ~= false and type(o.token_file) ~= "string" then
    error("lash.mcp.http: oauth option 'token_file' must be a path or false, got " .. type(o.token_file), 0)
  end
  if o.grant ~= nil and o.grant ~= "authorization_code" and o.grant ~= "client_credentials" and o.grant ~= "jwt_bearer" then
    error("lash.mcp.http: oauth option 'grant' must be \"authorization_code\", \"client_credentials\" or "
      .. "\"jwt_bearer\", got " .. o.grant, 0)
  end
  if o.grant == "client_credentials" and not (o.client_id and (o.client_secret or o.private_key)) then
    error("lash.mcp.http: the client_credentials grant needs client_id and client_secret (or private_key)", 0)
  end
  if o.grant == "jwt_bearer" and not (o.client_id and o.client_secret) then
    error("lash.mcp.http: the jwt_bearer grant needs client_id and client_secret", 0)
  end
  if o.private_key and not o.client_id then
    error("lash.mcp.http: oauth option 'private_key' (private_key_jwt) needs client_id", 0)
  end
  if o.grant == "jwt_bearer" then
    local idp = o.idp or {}
    for k, v in pairs(idp) do
      if IDP_OPTIONS[k] == nil or type(v) ~= IDP_OPTIONS[k] then
        error("lash.mcp.http: oauth.idp." .. tostring(k) .. " is unknown or not a string (idp takes token_endpoint, "
          .. "id_token, client_id, client_secret)", 0)
      end
    end
    if not (idp.token_endpoint and idp.id_token and idp.client_id) then
      error("lash.mcp.http: the jwt_bearer grant needs oauth.idp = {token_endpoint =, id_token =, client_id =} "
        .. "(the identity provider that exchanges the user's ID token for an authorization grant)", 0)
    end
  end
  local self = setmetatable({ url = o.url, name = o.name or o.url, o = o, state = nil }, Auth)
  if o.token_file ~= false then self.file = o.token_file or default_token_file(o.url) end
  return self
end

function Auth:load()
  if self.state then return self.state end
  self.state = {}
  if self.file then
    local text = runtime.secret.read_file(self.file)
    if text then
      local v = json.try_decode(text)
      if type(v) == "table" and v.url == self.url then self.state = v end
    end
  end
  return self.state
end

function Auth:save()
  if not self.file then return end
  local st = self.state or {}
  st.url = self.url
  local ok, err = runtime.secret.write_file(self.file, json.encode_canonical(st))
  if not ok then runtime.log("warn", "mcp " .. self.name .. ": cannot keep the OAuth tokens: " .. tostring(err)) end
end

--- Forget the tokens and the registered client (the file goes too).
function Auth:forget()
  self.state = {}
  if self.file then os.remove(self.file) end
end

---------------------------------------------------------------------------
-- HTTP

local function http(self, req)
  local safe, why = M.safe_url(req.url)
  if not safe then
    fail(self, "refusing to send an OAuth request to " .. runtime.output.visible(tostring(req.url)) .. ": " .. why,
      "unsafe_url")
  end
  req.timeout = req.timeout or self.o.timeout or 30
  local ok, status, headers, body = pcall(runtime.http.request, req)
  if not ok then
    if runtime.is_error(status, "cancelled") then error(status, 0) end
    fail(self, "cannot reach " .. req.url:gsub("%?.*$", "") .. ": " .. tostring(type(status) == "table"
      and status.message or status), "unreachable")
  end
  return status, headers, body
end

local function get_json(self, url)
  local status, _, body = http(self, { url = url, headers = { Accept = "application/json",
                                                                ["MCP-Protocol-Version"] = "2025-11-25" } })
  if status ~= 200 then return nil, status end
  local v = json.try_decode(body or "")
  if type(v) ~= "table" then return nil, "not JSON" end
  return v
end

---------------------------------------------------------------------------
-- Discovery

-- Whether the metadata's resource may stand for our server URL: the same
-- origin, and our path at or below its path.
local function resource_covers(resource, url)
  local r, u = M.split_url(resource), M.split_url(url)
  if not r or not u or r.origin ~= u.origin then return false end
  local rp = r.path:gsub("/$", "")
  return rp == "" or u.path == rp or u.path:sub(1, #rp + 1) == rp .. "/"
end
M.resource_covers = resource_covers

function Auth:discover_resource(challenge)
  local u = M.split_url(self.url)
  local tries = {}
  if challenge and challenge.resource_metadata then tries[#tries + 1] = challenge.resource_metadata end
  if u.path ~= "/" then tries[#tries + 1] = u.origin .. "/.well-known/oauth-protected-resource" .. u.path:gsub("/$", "") end
  tries[#tries + 1] = u.origin .. "/.well-known/oauth-protected-resource"
  for _, t in ipairs(tries) do
    local prm = get_json(self, t)
    if prm then
      if prm.resource ~= nil and not resource_covers(prm.resource, self.url) then
        fail(self, "its protected-resource metadata (" .. t .. ") names the resource " .. tostring(prm.resource)
          .. ", not this server (" .. self.url .. "); refusing to authorize for it", "resource_mismatch")
      end
      return prm
    end
  end
  return nil
end

function Auth:discover_server(issuer)
  local u = M.split_url(issuer)
  if not u then fail(self, "its authorization server is not an http(s) URL: " .. tostring(issuer)) end
  local path = u.path:gsub("/$", "")
  local tries
  if path ~= "" then
    tries = { u.origin .. "/.well-known/oauth-authorization-server" .. path,
              u.origin .. "/.well-known/openid-configuration" .. path,
              u.origin .. path .. "/.well-known/openid-configuration" }
  else
    tries = { u.origin .. "/.well-known/oauth-authorization-server", u.origin .. "/.well-known/openid-configuration" }
  end
  for _, t in ipairs(tries) do
    local md = get_json(self, t)
    if md and type(md.authorization_endpoint) == "string" or md and type(md.token_endpoint) == "string" then
      return md
    end
  end
  return nil
end

-- Everything discovery finds: {resource =, scopes =, server = metadata}.
function Auth:discover(challenge)
  local prm = self:discover_resource(challenge)
  local issuer
  if prm and type(prm.authorization_servers) == "table" and type(prm.authorization_servers[1]) == "string" then
    issuer = prm.authorization_servers[1]
  else
    issuer = M.split_url(self.url).origin   -- 2025-03-26: the server is its own
  end
  local md = self:discover_server(issuer)
  if not md then
    -- 2025-03-26: the default endpoints at the authorization base URL
    local base = M.split_url(issuer).origin
    md = { issuer = issuer, authorization_endpoint = base .. "/authorize", token_endpoint = base .. "/token",
           registration_endpoint = base .. "/register", fallback = true }
  end
  local d = { prm = prm, server = md, issuer = issuer }
  d.resource = prm and (prm.resource or self.url) or nil
  return d
end

---------------------------------------------------------------------------
-- Clients

local function supports(list, v)
  if type(list) ~= "table" then return nil end
  for _, x in ipairs(list) do if x == v then return true end end
  return false
end

-- How to authenticate at the token endpoint with this client.
local function auth_method(self, client, md)
  if client.auth_method then return client.auth_method end
  if self.o.token_endpoint_auth_method then return self.o.token_endpoint_auth_method end
  if client.private_key then return "private_key_jwt" end
  if not client.secret then return "none" end
  local list = md.token_endpoint_auth_methods_supported
  if list == nil or supports(list, "client_secret_basic") then return "client_secret_basic" end
  if supports(list, "client_secret_post") then return "client_secret_post" end
  return "client_secret_basic"
end

function Auth:register(d, redirect_uri, scope)
  local md, o = d.server, self.o
  if md.registration_endpoint == nil then
    fail(self, "its authorization server (" .. tostring(md.issuer or d.issuer) .. ") offers no dynamic client "
      .. "registration; register lash there and give oauth = {client_id = ..., client_secret = ...}",
      "no_registration")
  end
  local methods = md.token_endpoint_auth_methods_supported
  local method = o.token_endpoint_auth_method
  if not method then
    if methods == nil or supports(methods, "none") then method = "none"
    elseif supports(methods, "client_secret_basic") then method = "client_secret_basic"
    elseif supports(methods, "client_secret_post") then method = "client_secret_post"
    else method = "none" end
  end
  local grants = { "authorization_code", "refresh_token" }
  local body = { client_name = o.client_name or "lash", redirect_uris = { redirect_uri }, grant_types = grants,
                 response_types = { "code" }, token_endpoint_auth_method = method, scope = scope }
  local status, _, text = http(self, { url = md.registration_endpoint, method = "POST", body = json.encode(body),
                                       headers = { ["Content-Type"] = "application/json", Accept = "application/json" } })
  local v = json.try_decode(text or "")
  if (status ~= 200 and status ~= 201) or type(v) ~= "table" or type(v.client_id) ~= "string" then
    fail(self, "dynamic client registration at " .. md.registration_endpoint .. " failed (HTTP " .. tostring(status)
      .. (type(v) == "table" and v.error and (": " .. tostring(v.error)) or "") .. ")"
      .. (md.fallback and "; it publishes no OAuth metadata either: if it expects a fixed token, give it "
        .. "(bearer_token, --bearer-token, $LASH_MCP_TOKEN)" or ""), "registration_failed")
  end
  return { id = v.client_id, secret = v.client_secret, auth_method = v.token_endpoint_auth_method or method,
           redirect_uri = redirect_uri, issuer = d.issuer, registered = true }
end

-- The client to use with this authorization server.
function Auth:client_for(d, redirect_uri, scope)
  local o, st = self.o, self:load()
  if o.client_id then
    return { id = o.client_id, secret = o.client_secret, private_key = o.private_key, redirect_uri = redirect_uri }
  end
  local c = st.client
  if type(c) == "table" and c.issuer == d.issuer and c.id and (c.redirect_uri == redirect_uri or not redirect_uri) then
    return c
  end
  if o.client_metadata_url and d.server.client_id_metadata_document_supported == true then
    return { id = o.client_metadata_url, redirect_uri = redirect_uri, auth_method = "none", issuer = d.issuer }
  end
  c = self:register(d, redirect_uri, scope)
  st.client = c
  self:save()
  return c
end

---------------------------------------------------------------------------
-- Tokens

-- A client assertion (RFC 7523, private_key_jwt): a JWT our key signs
-- (ES256), naming us as issuer and subject and the authorization server as
-- audience, valid for 5 minutes.
local function client_assertion(self, client, md)
  local L = runtime
  local now = os.time()
  local header = b64url(json.encode_canonical { alg = "ES256", typ = "JWT" })
  local claims = b64url(json.encode_canonical {
    iss = client.id, sub = client.id, aud = md.issuer or (self.state and self.state.issuer) or md.token_endpoint,
    iat = now, exp = now + 300, jti = b64url(L.secret.random(16)) })
  local ok, sig = pcall(L.secret.es256_sign, client.private_key, header .. "." .. claims)
  if not ok then fail(self, "cannot sign the client assertion: " .. tostring(sig), "bad_key") end
  return header .. "." .. claims .. "." .. b64url(sig)
end

local function token_auth(self, client, md, fields, headers)
  local method = auth_method(self, client, md)
  if method == "private_key_jwt" and client.private_key then
    fields.client_id = client.id
    fields.client_assertion_type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    fields.client_assertion = client_assertion(self, client, md)
  elseif method == "client_secret_basic" and client.secret then
    headers.Authorization = "Basic " .. require("lash.models.parts").base64(pct(client.id) .. ":" .. pct(client.secret))
  elseif method == "client_secret_post" and client.secret then
    fields.client_id = client.id
    fields.client_secret = client.secret
  else
    fields.client_id = client.id
  end
end

local TOKEN_FIELDS = { "grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "assertion", "scope",
                       "resource", "client_id", "client_secret", "client_assertion_type", "client_assertion" }

function Auth:token_request(d, client, fields)
  local headers = { ["Content-Type"] = "application/x-www-form-urlencoded", Accept = "application/json" }
  token_auth(self, client, d.server, fields, headers)
  local status, _, text = http(self, { url = d.server.token_endpoint, method = "POST", headers = headers,
                                       body = form(fields, TOKEN_FIELDS) })
  local v = json.try_decode(text or "")
  if status ~= 200 or type(v) ~= "table" or type(v.access_token) ~= "string" then
    return nil, "the token endpoint answered HTTP " .. tostring(status)
      .. (type(v) == "table" and v.error and (" " .. tostring(v.error)) or "")
  end
  local st = self:load()
  st.access_token = v.access_token
  st.refresh_token = v.refresh_token or (fields.grant_type == "refresh_token" and st.refresh_token or nil)
  st.expires_at = tonumber(v.expires_in) and (os.time() + tonumber(v.expires_in)) or nil
  st.scope = v.scope or fields.scope
  st.token_endpoint = d.server.token_endpoint
  st.resource = d.resource
  st.issuer = d.issuer
  if client.registered or not self.o.client_id then st.client = st.client or client end
  self:save()
  return true
end

--- Trade the refresh token for a new access token. true, or nil and why.
function Auth:refresh()
  local st = self:load()
  if not st.refresh_token or not st.token_endpoint then return nil, "no refresh token" end
  local client = self.o.client_id and { id = self.o.client_id, secret = self.o.client_secret,
                                        private_key = self.o.private_key } or st.client
  if type(client) ~= "table" or not client.id then return nil, "no client" end
  local d = { server = { token_endpoint = st.token_endpoint }, resource = st.resource, issuer = st.issuer }
  local ok, why = self:token_request(d, client, { grant_type = "refresh_token", refresh_token = st.refresh_token,
                                                   resource = st.resource })
  if not ok then
    st.refresh_token = nil
    self:save()
  end
  return ok, why
end

--- The Authorization header value, or nil before any authorization. An
-- expired token is refreshed first when a refresh token is kept.
function Auth:header()
  local st = self:load()
  if st.access_token and st.expires_at and os.time() >= st.expires_at - 30 and st.refresh_token then
    self:refresh()
  end
  if st.access_token then return "Bearer " .. st.access_token end
  return nil
end

---------------------------------------------------------------------------
-- The authorization code flow

local function interactive_default()
  local sys = runtime.sys
  return sys and sys.isatty and sys.isatty(2) or false
end

-- Wait on a loopback listener for the browser's redirect; returns the
-- request's query table. A request without our state (another local
-- process guessing the port) is answered 400 and waited past.
local function await_redirect(self, listener, path, seconds, state)
  local L = runtime
  local result, timed_out, current = nil, false, nil
  local timer = L.spawn(function()
    L.sleep(seconds)
    timed_out = true
    listener:close()
    if current then current:close() end   -- a client that never sends
  end)
  while not result and not timed_out do
    local ok, conn = pcall(listener.accept, listener)
    if not ok or not conn then break end
    current = conn
    local buf = ""
    while not buf:find("\r\n\r\n", 1, true) and #buf < 65536 do
      local rok, chunk = pcall(conn.read, conn)
      if not rok or not chunk then break end
      buf = buf .. chunk
    end
    local target = buf:match("^GET ([^ ]+) HTTP/1%.[01]\r\n")
    local tpath, query = (target or ""):match("^([^?]*)%??(.*)$")
    local q = tpath == path and parse_query(query) or nil
    if q and q.state ~= state then
      pcall(conn.write, conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elseif q then
      result = q
      local page = "<!doctype html><title>lash</title><p>" .. (result.error and "Authorization failed; "
        or "lash is authorized; ") .. "you can close this tab and return to the terminal.</p>"
      pcall(conn.write, conn, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: "
        .. #page .. "\r\nConnection: close\r\n\r\n" .. page)
    else
      pcall(conn.write, conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    end
    current = nil
    conn:close()
  end
  timer:cancel()
  listener:close()
  if not result then
    fail(self, timed_out and ("nobody completed the authorization in the browser within " .. seconds .. " s")
      or "the loopback listener for the authorization redirect failed", "authorization_timeout")
  end
  return result
end

function Auth:authorize_code(d, scope)
  local o, L = self.o, runtime
  local md = d.server
  if not md.fallback and not supports(md.code_challenge_methods_supported, "S256") then
    fail(self, "its authorization server does not offer PKCE with S256 (code_challenge_methods_supported), "
      .. "which MCP requires; refusing to authorize", "no_pkce")
  end
  if o.untrusted_spec then
    -- the server picks the URL a browser would open (CVE-2025-6514's class)
    fail(self, "it needs an OAuth login, and a spec loaded without --trust cannot start one (its server "
      .. "chooses the page your browser would open): run `lash mcp login " .. self.url .. "` once yourself "
      .. "(the spec then uses the kept tokens), give a token from the trusted side ($LASH_MCP_TOKEN), or "
      .. "load the spec with --trust", "needs_login")
  end
  local interactive = o.interactive
  if interactive == nil then interactive = o.authorize ~= nil or interactive_default() end
  if not interactive then
    fail(self, "it needs an OAuth authorization and this is not an interactive terminal: run `lash mcp login "
      .. self.url .. "` once in a terminal (the tokens are kept and refreshed), or give a token "
      .. "(bearer_token, $LASH_MCP_TOKEN) or client credentials (oauth = {grant = \"client_credentials\", ...})",
      "needs_login")
  end
  -- the redirect URI must be known before registering the client
  local listener, redirect_uri = nil, o.redirect_uri
  local st = self:load()
  if not redirect_uri then
    local port = o.redirect_port
    local prev = type(st.client) == "table" and st.client.issuer == d.issuer and st.client.redirect_uri
    if not port and prev and not o.client_id then port = tonumber(prev:match("^http://127%.0%.0%.1:(%d+)/")) end
    if not o.authorize then
      local ok, l = pcall(L.net.listen, { host = "127.0.0.1", port = port or 0 })
      if not ok and port then ok, l = pcall(L.net.listen, { host = "127.0.0.1", port = 0 }) end
      if not ok then fail(self, "cannot listen on 127.0.0.1 for the authorization redirect: " .. tostring(l)) end
      listener = l
      port = l:port()
    end
    redirect_uri = "http://127.0.0.1:" .. tostring(port or 8976) .. "/callback"
  end
  local ok, client = pcall(self.client_for, self, d, redirect_uri, scope)
  if not ok then
    if listener then listener:close() end
    error(client, 0)
  end
  local verifier = b64url(L.secret.random(32))
  local challenge = b64url(L.secret.sha256(verifier))
  local state = b64url(L.secret.random(16))
  local q = { response_type = "code", client_id = client.id, redirect_uri = redirect_uri, code_challenge = challenge,
              code_challenge_method = "S256", state = state, scope = scope, resource = d.resource }
  local safe, why = M.safe_url(md.authorization_endpoint)
  if not safe then
    fail(self, "its authorization server's authorization_endpoint ("
      .. runtime.output.visible(tostring(md.authorization_endpoint)) .. ") is refused: " .. why
      .. "; nothing was opened", "unsafe_url")
  end
  local sep = md.authorization_endpoint:find("?", 1, true) and "&" or "?"
  local url = md.authorization_endpoint .. sep .. form(q, { "response_type", "client_id", "redirect_uri", "code_challenge",
                                                           "code_challenge_method", "state", "scope", "resource" })
  local back
  if o.authorize then
    local r = o.authorize(url, redirect_uri)
    if type(r) ~= "string" then
      fail(self, "the authorize function returned " .. type(r) .. " instead of the URL the browser came back to")
    end
    back = parse_query(r:match("%?(.*)$") or r)
  else
    local shown = runtime.output.visible
    io.stderr:write("lash: MCP server '" .. shown(self.name) .. "' needs authorization. Open this URL in a "
      .. "browser:\n\n  " .. shown(url) .. "\n\n(waiting for the redirect to " .. shown(redirect_uri) .. ")\n")
    io.stderr:flush()
    -- $BROWSER (a command given the URL), else xdg-open on a desktop
    local browser = os.getenv("BROWSER")
    local argv
    if browser and browser ~= "" then argv = { "sh", "-c", browser .. ' "$1"', "sh", url }
    elseif os.getenv("DISPLAY") or os.getenv("WAYLAND_DISPLAY") then argv = { "xdg-open", url } end
    if o.open_browser ~= false and argv then
      pcall(function()
        local p = L.proc.spawn { argv = argv, stderr = "null" }
        p:close_stdin()
        L.spawn(function() p:wait(); p:close() end)
      end)
    end
    back = await_redirect(self, listener, "/callback", o.timeout and math.max(o.timeout, 60) or 300, state)
  end
  if back.error then
    fail(self, "the authorization server refused: " .. tostring(back.error)
      .. (back.error_description and (" (" .. back.error_description .. ")") or ""), "access_denied")
  end
  if back.state ~= state then fail(self, "the authorization redirect carried the wrong state; refusing it", "bad_state") end
  if not back.code then fail(self, "the authorization redirect carried no code", "no_code") end
  local tok, why = self:token_request(d, client, { grant_type = "authorization_code", code = back.code,
                                                    redirect_uri = redirect_uri, code_verifier = verifier,
                                                    resource = d.resource })
  if not tok then fail(self, "exchanging the authorization code failed: " .. why, "token_failed") end
  return true
end

function Auth:client_credentials(d, scope)
  local o = self.o
  local client = { id = o.client_id, secret = o.client_secret, private_key = o.private_key }
  local tok, why = self:token_request(d, client, { grant_type = "client_credentials", scope = scope,
                                                    resource = d.resource })
  if not tok then fail(self, "the client_credentials grant failed: " .. why, "token_failed") end
  return true
end

-- Enterprise-managed authorization (SEP-990): the identity provider
-- exchanges the user's ID token for an identity assertion grant (RFC 8693)
-- for this authorization server and resource, which the authorization
-- server takes as a JWT bearer grant (RFC 7523) from our client.
local TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
local JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"

function Auth:jwt_bearer(d, scope)
  local o, idp = self.o, self.o.idp
  local fields = { grant_type = TOKEN_EXCHANGE, requested_token_type = "urn:ietf:params:oauth:token-type:id-jag",
                   audience = d.server.issuer or d.issuer, resource = d.resource or self.url, scope = scope,
                   subject_token = idp.id_token, subject_token_type = "urn:ietf:params:oauth:token-type:id_token" }
  local headers = { ["Content-Type"] = "application/x-www-form-urlencoded", Accept = "application/json" }
  token_auth(self, { id = idp.client_id, secret = idp.client_secret }, {}, fields, headers)
  local status, _, text = http(self, { url = idp.token_endpoint, method = "POST", headers = headers, body = form(fields,
    { "grant_type", "requested_token_type", "audience", "resource", "scope", "subject_token", "subject_token_type",
      "client_id", "client_secret" }) })
  local v = json.try_decode(text or "")
  if status ~= 200 or type(v) ~= "table" or type(v.access_token) ~= "string" then
    fail(self, "the identity provider's token exchange failed (HTTP " .. tostring(status)
      .. (type(v) == "table" and v.error and (" " .. tostring(v.error)) or "") .. ")", "token_exchange_failed")
  end
  local tok, why = self:token_request(d, { id = o.client_id, secret = o.client_secret },
    { grant_type = JWT_BEARER, assertion = v.access_token, scope = scope, resource = d.resource })
  if not tok then fail(self, "the JWT bearer grant failed: " .. why, "token_failed") end
  return true
end

-- The scope to ask for: ours, the challenge's, else all the resource
-- metadata offers; offline_access added where the server offers it (so a
-- refresh token comes back).
local function pick_scope(self, d, challenge)
  local scope = self.o.scope or (challenge and challenge.scope)
  if not scope and d.prm and type(d.prm.scopes_supported) == "table" and #d.prm.scopes_supported > 0 then
    scope = table.concat(d.prm.scopes_supported, " ")
  end
  if scope and supports(d.server.scopes_supported, "offline_access") and not (" " .. scope .. " "):find(" offline_access ", 1, true) then
    scope = scope .. " offline_access"
  end
  return scope
end

-- Union of two space-separated scope lists, in order.
local function union(a, b)
  local seen, out = {}, {}
  for s in ((a or "") .. " " .. (b or "")):gmatch("%S+") do
    if not seen[s] then seen[s] = true; out[#out + 1] = s end
  end
  return #out > 0 and table.concat(out, " ") or nil
end

--- Get a (new) token after the server refused a request. status: 401 or
-- 403; www: its WWW-Authenticate header. Returns true when the request
-- should be sent again; raises an "auth" error saying why not.
function Auth:challenge(status, www)
  -- requests refused at the same time (parallel tool calls) share one
  -- authorization: the others wait for it and send again with its token
  if self.pending then
    local ok = pcall(self.pending.wait, self.pending)
    return ok
  end
  local f = runtime.future()
  self.pending = f
  local ok, res = pcall(self.challenge_now, self, status, www)
  self.pending = nil
  if ok then f:set(true) else f:fail(res) end
  if not ok then error(res, 0) end
  return res
end

function Auth:challenge_now(status, www)
  local c = M.parse_challenge(www) or {}
  local st = self:load()
  if status == 403 and c.error ~= "insufficient_scope" then return false end
  if status == 401 and st.access_token and st.refresh_token and not self.refreshed then
    self.refreshed = true
    if self:refresh() then return true end
  end
  self.refreshed = false
  local d = self:discover(c)
  local scope = pick_scope(self, d, c)
  if status == 403 then scope = union(st.scope, scope) end
  if self.o.grant == "client_credentials" then
    self:client_credentials(d, scope)
  elseif self.o.grant == "jwt_bearer" then
    self:jwt_bearer(d, scope)
  else
    self:authorize_code(d, scope)
  end
  return true
end

--- Run the whole flow now (for `lash mcp login`): discovery from the
-- server's own challenge, then authorization.
function Auth:login()
  local status, headers = http(self, {
    url = self.url, method = "POST",
    body = json.encode { jsonrpc = "2.0", id = 0, method = "initialize", params = {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "lash", version = runtime.version } } },
    headers = { ["Content-Type"] = "application/json", Accept = "application/json, text/event-stream" },
  })
  if status ~= 401 then
    -- some servers let initialize through and refuse later: authorize anyway
    runtime.log("info", "mcp " .. self.name .. ": initialize answered HTTP " .. tostring(status) .. " without a token")
  end
  return self:challenge(401, headers and headers["www-authenticate"])
end

return M
