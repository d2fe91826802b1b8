-- The MCP client's OAuth pieces that need no Node: lash.secret (SHA-256
-- against FIPS 180-4's vectors, owner-only files), challenge and URL
-- parsing, option checks, and token refresh against a small token endpoint
-- written here (the reference servers the integration test uses issue no
-- refresh tokens: the conformance suite's and the SDK example's).
local lash = require "lash"
local oauth = require "lash.mcp.oauth"
local json = require "lash.json"

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p " .. p))
  return p
end

describe("lash.secret", function()
  it("hashes FIPS 180-4's SHA-256 examples", function()
    assert.equal("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", hex(lash.secret.sha256("")))
    assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", hex(lash.secret.sha256("abc")))
    assert.equal("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
      hex(lash.secret.sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")))
    assert.equal("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
      hex(lash.secret.sha256(string.rep("a", 1000000))))
  end)
  it("gives random bytes", function()
    local a, b = lash.secret.random(32), lash.secret.random(32)
    assert.equal(32, #a)
    assert.are_not.equal(a, b)
    assert.has_error(function() lash.secret.random(0) end)
  end)
  it("refuses keys it cannot sign ES256 with", function()
    assert.has_error(function() lash.secret.es256_sign("not a key", "m") end,
      "lash.secret.es256_sign: cannot read the EC private key (PEM or DER, PKCS#8 or SEC1)")
    -- an RSA key's PKCS#8 header: not P-256
    local rsa = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n-----END PRIVATE KEY-----\n"
    assert.has_error(function() lash.secret.es256_sign(rsa, "m") end,
      "lash.secret.es256_sign: the key is not a P-256 (prime256v1) EC key")
  end)
  it("writes files only the owner can read, and refuses to read one others can", function()
    local d = tmpdir()
    local path = d .. "/sub/dir/t.json"
    assert.is_true(lash.secret.write_file(path, "one"))
    assert.is_true(lash.secret.write_file(path, "two"))   -- replaced
    assert.equal("two", lash.secret.read_file(path))
    local p = io.popen("stat -c %a " .. path .. " " .. d .. "/sub")
    assert.equal("600\n700\n", p:read("a"))
    p:close()
    os.execute("chmod 644 " .. path)
    assert.has_error(function() lash.secret.read_file(path) end)
    local v, err = lash.secret.read_file(d .. "/missing")
    assert.is_nil(v)
    assert.matches("No such file", err)
    os.execute("rm -rf " .. d)
  end)
end)

describe("lash.mcp.oauth parsing", function()
  it("reads Bearer challenges", function()
    local c = oauth.parse_challenge('Bearer error="insufficient_scope", scope="a b", '
      .. 'resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", error_description="say \\"no\\""')
    assert.same({ error = "insufficient_scope", scope = "a b", error_description = 'say "no"',
                  resource_metadata = "http://h/.well-known/oauth-protected-resource/mcp" }, c)
    assert.same({ realm = "lash" }, oauth.parse_challenge('bearer realm=lash'))
    assert.is_nil(oauth.parse_challenge('Basic realm="x"'))
    assert.is_nil(oauth.parse_challenge(nil))
  end)
  it("splits URLs and checks a resource covers the server", function()
    local u = oauth.split_url("HTTPS://Example.com:8443/a/mcp?x=1#f")
    assert.same({ scheme = "https", authority = "example.com:8443", path = "/a/mcp", query = "x=1",
                  origin = "https://example.com:8443" }, u)
    assert.is_true(oauth.resource_covers("https://example.com:8443/a/mcp", "https://example.com:8443/a/mcp"))
    assert.is_true(oauth.resource_covers("https://example.com:8443/", "https://example.com:8443/a/mcp"))
    assert.is_true(oauth.resource_covers("https://example.com:8443/a", "https://example.com:8443/a/mcp"))
    assert.is_false(oauth.resource_covers("https://example.com:8443/ab", "https://example.com:8443/a/mcp"))
    assert.is_false(oauth.resource_covers("https://evil.example.com/mcp", "https://example.com:8443/a/mcp"))
  end)
  it("checks its options when the toolset is made", function()
    assert.has_error(function() lash.mcp.http { url = "http://x/mcp", oauth = { client_secret_typo = "s" } } end,
      "lash.mcp.http: unknown oauth option 'client_secret_typo' (known: authorize, client_id, client_metadata_url, "
      .. "client_name, client_secret, grant, idp, interactive, open_browser, private_key, redirect_port, redirect_uri, "
      .. "scope, timeout, token_endpoint_auth_method, token_file)")
    assert.has_error(function() lash.mcp.http { url = "http://x/mcp", oauth = { grant = "client_credentials" } } end,
      "lash.mcp.http: the client_credentials grant needs client_id and client_secret (or private_key)")
    assert.has_error(function() lash.mcp.http { url = "http://x/mcp", oauth = "yes" } end)
  end)
  it("opens and sends credentials only to https, or http on loopback", function()
    for _, u in ipairs { "https://as.example/authorize?x=1", "http://127.0.0.1:8/a", "http://127.9.9.9/a",
                         "http://localhost:3/a", "http://[::1]:3/a" } do
      assert.is_true(oauth.safe_url(u), u)
    end
    for _, u in ipairs { "file:///etc/passwd", "javascript:alert(1)", "http://as.example/authorize",
                         "http://127.0.0.1.evil.example/a", "https://u:p@as.example/a", "https://as.example/\27[2J",
                         "https://as.example/a b", "https://as.example/\194\155", "//as.example/a", 7 } do
      local ok, why = oauth.safe_url(u)
      assert.is_false(ok, tostring(u))
      assert.is_string(why)
    end
  end)
  it("never shows a token in its string form", function()
    local a = oauth.new { url = "http://x/mcp", token_file = false }
    a.state = { access_token = "SECRET" }
    assert.equal("lash.mcp.oauth(http://x/mcp)", tostring(a))
    assert.equal("Bearer SECRET", a:header())
  end)
end)

-- A token endpoint: answers each POST with the next canned reply and
-- records the request bodies.
local function token_server(replies)
  local l = lash.net.listen { host = "127.0.0.1", port = 0 }
  local seen = {}
  local task = lash.spawn(function()
    for _, reply in ipairs(replies) do
      local c = l:accept()
      local buf = ""
      while true do
        local head_end = buf:find("\r\n\r\n", 1, true)
        if head_end then
          local len = tonumber(buf:match("[Cc]ontent%-[Ll]ength:%s*(%d+)") or "0")
          if #buf >= head_end + 3 + len then
            seen[#seen + 1] = { head = buf:sub(1, head_end), body = buf:sub(head_end + 4, head_end + 3 + len) }
            break
          end
        end
        local chunk = c:read()
        if not chunk then break end
        buf = buf .. chunk
      end
      local body = json.encode(reply.body)
      c:write("HTTP/1.1 " .. reply.status .. " X\r\nContent-Type: application/json\r\nContent-Length: " .. #body
        .. "\r\nConnection: close\r\n\r\n" .. body)
      c:close()
    end
  end)
  return "http://127.0.0.1:" .. l:port(), seen, function() task:join(); l:close() end
end

describe("lash.mcp.oauth refresh", function()
  it("refreshes an expired token before using it, keeps the refresh token, and saves both 0600", function()
    local base, seen, done = token_server {
      { status = 200, body = { access_token = "new-token", token_type = "Bearer", expires_in = 60 } },
    }
    local d = tmpdir()
    local file = d .. "/t.json"
    lash.secret.write_file(file, json.encode {
      url = "http://s/mcp", access_token = "old-token", refresh_token = "r1", expires_at = os.time() - 5,
      token_endpoint = base .. "/token", resource = "http://s/mcp", client = { id = "c1" } })
    local a = oauth.new { url = "http://s/mcp", token_file = file }
    assert.equal("Bearer new-token", a:header())
    done()
    assert.matches("^POST /token ", seen[1].head)
    assert.equal("grant_type=refresh_token&refresh_token=r1&resource=http%3A%2F%2Fs%2Fmcp&client_id=c1", seen[1].body)
    local kept = json.decode(lash.secret.read_file(file))
    assert.equal("new-token", kept.access_token)
    assert.equal("r1", kept.refresh_token)
    assert.is_true(kept.expires_at > os.time())
    os.execute("rm -rf " .. d)
  end)
  it("shares one authorization between requests refused at the same time", function()
    local base, seen, done = token_server {
      { status = 200, body = { access_token = "t2", refresh_token = "r2" } },
    }
    local a = oauth.new { url = "http://s/mcp", token_file = false, client_id = "pre" }
    a.state = { access_token = "t1", refresh_token = "r1", token_endpoint = base .. "/token" }
    local results = {}
    local tasks = {}
    for i = 1, 3 do
      tasks[i] = lash.spawn(function() results[i] = a:challenge(401, "Bearer") end)
    end
    for i = 1, 3 do tasks[i]:join() end
    done()
    assert.same({ true, true, true }, results)
    assert.equal(1, #seen)
    assert.equal("Bearer t2", a:header())
  end)
  it("answers a 401 by refreshing once, and a failed refresh drops the refresh token", function()
    local base, seen, done = token_server {
      { status = 200, body = { access_token = "t2", refresh_token = "r2" } },
      { status = 400, body = { error = "invalid_grant" } },
    }
    local a = oauth.new { url = "http://s/mcp", token_file = false, client_id = "pre", client_secret = "sek" }
    a.state = { access_token = "t1", refresh_token = "r1", token_endpoint = base .. "/token" }
    assert.is_true(a:challenge(401, 'Bearer error="invalid_token"'))
    assert.equal("Bearer t2", a:header())
    -- a pre-registered client with a secret authenticates with Basic
    assert.matches("\r\n[Aa]uthorization: Basic cHJlOnNlaw==\r\n", seen[1].head .. "\r\n")
    assert.equal("grant_type=refresh_token&refresh_token=r1", seen[1].body)
    a.refreshed = false
    local ok, why = a:refresh()
    assert.is_nil(ok)
    assert.matches("HTTP 400 invalid_grant", why)
    assert.is_nil(a.state.refresh_token)
    done()
  end)
end)
