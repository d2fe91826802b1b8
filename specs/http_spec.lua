-- lash.http.request against the loopback server in tests/servers: status
-- codes, headers, bodies, streaming, SSE split at every byte, timeouts,
-- dropped connections, cancellation, HTTP/2 cleartext and over TLS, inside
-- tasks and outside them, and the errors, which never show a header value.
local lash = require "lash"
local cjson = require "lash.json"

local http = lash.http
local PY = "/usr/bin/python3"
local SERVER = "tests/servers/http_server.py"

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function sh_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A scratch directory with a self-signed certificate for 127.0.0.1, or nil
-- when openssl is missing.
local function make_cert()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. sh_quote(dir)))
  local ok = os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -days 2 " ..
    "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost " ..
    "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1"):format(dir, dir))
  return dir, ok == true
end

-- Start the server; returns its info {port, tls_port, pid, h2} and a stop
-- function.
local function start_server(certdir)
  local cmd = "exec " .. PY .. " " .. SERVER .. " --lifetime 600"
  if certdir then
    cmd = cmd .. (" --cert %s/cert.pem --key %s/key.pem"):format(certdir, certdir)
  end
  local proc = assert(io.popen(cmd, "r"))
  local line = assert(proc:read("l"), "test server did not start")
  local info = cjson.decode(line)
  return info, function()
    os.execute("kill " .. math.tointeger(info.pid) .. " 2>/dev/null")
    proc:close()
  end
end

local function catch(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return err
end

local function echo_of(body)
  return cjson.decode(body)
end

-- The request header named name (case-insensitive) the echo route saw.
local function sent_header(e, name)
  for _, kv in ipairs(e.headers) do
    if kv[1]:lower() == name:lower() then return kv[2] end
  end
end

-- An SSE stream with a BOM, comments, CRLF, CR and LF line ends, multi-line
-- data, an id that persists, and an unfinished event at the end.
local SSE_DOC = "\239\187\191: comment\r\n" ..
  "event: start\r\ndata: one\r\n\r\n" ..
  "data: multi\ndata: line\n\n" ..
  "id: 7\nevent: delta\ndata: {\"t\":\"\195\169\"}\r\r" ..
  "data: after\n\n" ..
  "data: unfinished"
local SSE_WANT = {
  { event = "start", data = "one" },
  { event = "message", data = "multi\nline" },
  { event = "delta", data = "{\"t\":\"\195\169\"}", id = "7" },
  { event = "message", data = "after", id = "7" },
}

local function parse_sse(chunks)
  local p <close> = http.sse_parser()
  local all = {}
  for _, c in ipairs(chunks) do
    for _, ev in ipairs(p:feed(c)) do all[#all + 1] = ev end
  end
  return all
end

describe("lash.http.request", function()
  if not file_exists(PY) then
    pending("needs " .. PY .. " for the loopback test server")
    return
  end

  local certdir, have_cert = make_cert()
  local info, stop = start_server(have_cert and certdir or nil)
  local base = "http://127.0.0.1:" .. math.tointeger(info.port)
  local tls_base = info.tls_port and
    ("https://127.0.0.1:" .. math.tointeger(info.tls_port))

  teardown(function()
    stop()
    os.execute("rm -rf " .. sh_quote(certdir))
  end)

  describe("outside a task", function()
    it("GETs and returns status, lower-case headers and the body", function()
      local status, headers, body = http.request{ url = base .. "/echo" }
      assert.are.equal(200, status)
      assert.is_true(math.type(status) == "integer")
      assert.are.equal("application/json", headers["content-type"])
      assert.are.equal(tostring(#body), headers["content-length"])
      local e = echo_of(body)
      assert.are.equal("GET", e.method)
      assert.are.equal("HTTP/1.1", e.version)
    end)

    it("sends the given headers, method and body as they are", function()
      local _, _, body = http.request{
        url = base .. "/echo?x=1", method = "PUT", body = "hello\0world",
        headers = { ["X-Token"] = "abc", ["Content-Type"] = "text/plain",
                    ["X-Number"] = 42, ["X-Empty"] = "" },
      }
      local e = echo_of(body)
      assert.are.equal("PUT", e.method)
      assert.are.equal("x=1", e.query)
      assert.are.equal(("hello\0world"):gsub(".", function(c)
        return ("%02x"):format(c:byte())
      end), e.body_hex)
      assert.are.equal("abc", sent_header(e, "x-token"))
      assert.are.equal("text/plain", sent_header(e, "content-type"))
      assert.are.equal("42", sent_header(e, "x-number"))
      assert.are.equal("", sent_header(e, "x-empty"))
      assert.is_nil(sent_header(e, "expect"))
    end)

    it("POSTs when a body is given, without inventing a content type", function()
      local _, _, body = http.request{ url = base .. "/echo", body = "{}" }
      local e = echo_of(body)
      assert.are.equal("POST", e.method)
      assert.are.equal("7b7d", e.body_hex)
      assert.is_nil(sent_header(e, "content-type"))
    end)

    it("sends a large body whole", function()
      local big = ("0123456789abcdef"):rep(200000)  -- 3.2 MB
      local _, _, body = http.request{ url = base .. "/echo", method = "POST", body = big }
      local e = echo_of(body)
      assert.are.equal(#big * 2, #e.body_hex)
    end)

    it("returns non-2xx statuses as results by default", function()
      for _, code in ipairs({ 201, 204, 400, 404, 500, 503 }) do
        local status, _, body = http.request{ url = base .. "/status/" .. code }
        assert.are.equal(code, status)
        assert.are.equal(code == 204 and "" or ("status " .. code), body)
      end
    end)

    it("answers HEAD with an empty body", function()
      local status, headers, body = http.request{ url = base .. "/echo", method = "HEAD" }
      assert.are.equal(200, status)
      assert.are.equal("", body)
      assert.is_truthy(tonumber(headers["content-length"]) > 0)
    end)

    it("joins repeated response headers with ', '", function()
      local _, headers = http.request{ url = base .. "/headers" }
      assert.are.equal("a, b", headers["x-multi"])
      assert.are.equal("a=1, b=2", headers["set-cookie"])
      assert.are.equal("Value", headers["x-mixed-case"])
      assert.is_nil(headers["X-Mixed-Case"])
    end)

    it("assembles a chunked body", function()
      local _, headers, body = http.request{ url = base .. "/chunked?n=30&size=100" }
      assert.are.equal("chunked", headers["transfer-encoding"])
      local want = {}
      for i = 0, 29 do want[#want + 1] = string.char(97 + i % 26):rep(100) end
      assert.are.equal(table.concat(want), body)
    end)

    it("reuses the connection for sequential requests", function()
      local _, _, b1 = http.request{ url = base .. "/echo" }
      local _, _, b2 = http.request{ url = base .. "/echo" }
      assert.are.equal(echo_of(b1).conn, echo_of(b2).conn)
    end)

    it("does not follow redirects unless asked", function()
      local status, headers = http.request{ url = base .. "/redirect?to=/echo" }
      assert.are.equal(302, status)
      assert.are.equal("/echo", headers.location)
      local s2, h2, body = http.request{ url = base .. "/redirect?to=/echo",
                                         follow_redirects = true }
      assert.are.equal(200, s2)
      assert.are.equal("/echo", echo_of(body).path)
      assert.is_nil(h2.location)  -- the headers of the last response only
      local err = catch(http.request, { url = base .. "/redirect?to=/echo",
                                        follow_redirects = true, max_redirects = 0 })
      assert.is_true(lash.is_error(err, "http"))
      assert.matches("redirect", err.message)
    end)

    it("drives the loop in place, running tasks meanwhile", function()
      local ran = false
      local t = lash.spawn(function() lash.sleep(0.05); ran = true end)
      local status = http.request{ url = base .. "/slow?delay=0.3" }
      assert.are.equal(200, status)
      assert.is_true(ran)
      assert.are.equal("done", t:status())
    end)
  end)

  describe("errors", function()
    it("raises a retryable timeout error when the timeout passes", function()
      local err = catch(http.request, { url = base .. "/hang", timeout = 0.3 })
      assert.is_true(lash.is_error(err, "timeout"))
      assert.is_true(err.retryable)
      assert.matches("/hang", err.message, 1, true)
      assert.are.equal(base .. "/hang", err.url)
    end)

    it("raises timeout when the body stalls past idle_timeout", function()
      local err = catch(http.request, { url = base .. "/slowbody?delay=5", idle_timeout = 1 })
      assert.is_true(lash.is_error(err, "timeout"))
    end)

    it("raises a retryable connect error when nothing listens", function()
      local err = catch(http.request, { url = "http://127.0.0.1:1/x" })
      assert.is_true(lash.is_error(err, "connect"))
      assert.is_true(err.retryable)
      assert.matches("http://127.0.0.1:1/x", err.message, 1, true)
    end)

    it("raises a retryable http error when the connection drops mid-body", function()
      for _, path in ipairs({ "/drop?size=1000&sent=100", "/drop_chunked", "/empty" }) do
        local err = catch(http.request, { url = base .. path })
        assert.is_true(lash.is_error(err, "http"), path)
        assert.is_true(err.retryable, path)
      end
      -- the pool is still good afterwards
      assert.are.equal(200, (http.request{ url = base .. "/echo" }))
    end)

    it("never shows header values, credentials or the query in messages", function()
      local err = catch(http.request, {
        url = "http://user:pw-SECRET1@127.0.0.1:1/v1/x?key=SECRET2#frag",
        headers = { Authorization = "Bearer SECRET3", ["X-Api-Key"] = "SECRET4" },
      })
      assert.is_true(lash.is_error(err, "connect"))
      local text = tostring(err) .. err.url
      assert.is_nil(text:find("SECRET", 1, true))
      assert.matches("127.0.0.1:1/v1/x?...", err.message, 1, true)
      local err2 = catch(http.request, { url = base .. "/hang?token=SECRET5", timeout = 0.1,
                                         headers = { Authorization = "SECRET6" } })
      assert.is_nil(tostring(err2):find("SECRET", 1, true))
    end)

    it("raises status errors only with check_status, carrying the response", function()
      local err = catch(http.request, { url = base .. "/status/503", check_status = true })
      assert.is_true(lash.is_error(err, "status"))
      assert.is_true(err.retryable)
      assert.are.equal(503, err.status)
      assert.are.equal("status 503", err.body)
      assert.are.equal("text/plain", err.headers["content-type"])
      assert.matches("503", err.message)
      local e404 = catch(http.request, { url = base .. "/status/404", check_status = true })
      assert.is_false(e404.retryable)
      assert.are.equal(200, (http.request{ url = base .. "/echo", check_status = true }))
    end)

    it("collects an error body instead of streaming it with check_status", function()
      local chunks = 0
      local err = catch(http.request, { url = base .. "/status/500", check_status = true,
                                        on_chunk = function() chunks = chunks + 1 end })
      assert.is_true(lash.is_error(err, "status"))
      assert.are.equal("status 500", err.body)
      assert.are.equal(0, chunks)
    end)

    it("caps the response size with max_body_bytes", function()
      local err = catch(http.request, { url = base .. "/big?n=100000", max_body_bytes = 50000 })
      assert.is_true(lash.is_error(err, "http"))
      assert.is_false(err.retryable)
      assert.matches("max_body_bytes", err.message)
      local got = 0
      local err2 = catch(http.request, { url = base .. "/big?n=100000", max_body_bytes = 50000,
                                         on_chunk = function(c) got = got + #c end })
      assert.is_true(lash.is_error(err2, "http"))
      assert.is_true(got <= 50000)
      local _, _, body = http.request{ url = base .. "/big?n=100000", max_body_bytes = 100000 }
      assert.are.equal(100000, #body)
    end)

    it("refuses bad options with a message naming them", function()
      local cases = {
        { {}, "'url'" },
        { { url = "ftp://127.0.0.1/x" }, "http:// or https://" },
        { { url = "file:///etc/passwd" }, "http:// or https://" },
        { { url = "not a url" }, "'url'" },
        { { url = base, bogus = 1 }, "unknown option 'bogus'" },
        { { url = base, timeout = -1 }, "'timeout'" },
        { { url = base, timeout = "1" }, "'timeout'" },
        { { url = base, method = "GET X" }, "invalid method" },
        { { url = base, headers = { ["Bad Name"] = "x" } }, "invalid header name" },
        { { url = base, headers = { X = "a\r\nInjected: 1" } }, "CR, LF" },
        { { url = base, headers = "x" }, "'headers'" },
        { { url = base, on_chunk = 1 }, "'on_chunk'" },
        { { url = base, verify = "no" }, "'verify'" },
        { { url = base, max_body_bytes = 0 }, "'max_body_bytes'" },
        { { url = base, http_version = "3" }, "'http_version'" },
        { { url = base, body = {} }, "'body'" },
      }
      for _, c in ipairs(cases) do
        local err = catch(http.request, c[1])
        assert.matches(c[2], tostring(err), 1, true)
      end
      assert.has_error(function() http.request("http://x") end)
    end)
  end)

  describe("streaming with on_chunk", function()
    it("hands the body over in pieces and returns no body", function()
      local got = {}
      local status, headers, body = http.request{
        url = base .. "/chunked?n=5&size=4&delay_ms=30",
        on_chunk = function(c) got[#got + 1] = c end,
      }
      assert.are.equal(200, status)
      assert.are.equal("chunked", headers["transfer-encoding"])
      assert.is_nil(body)
      assert.is_true(#got > 1)
      assert.are.equal("aaaabbbbccccddddeeee", table.concat(got))
    end)

    it("aborts the transfer when on_chunk raises, propagating its error", function()
      local boom = setmetatable({}, { __tostring = function() return "boom" end })
      local calls = 0
      local ok, err = pcall(http.request, {
        url = base .. "/chunked?n=50&size=10&delay_ms=10",
        on_chunk = function() calls = calls + 1; error(boom) end,
      })
      assert.is_false(ok)
      assert.are.equal(boom, err)
      assert.are.equal(1, calls)
      assert.are.equal(200, (http.request{ url = base .. "/echo" }))
    end)

    it("lets on_chunk wait (it runs inside the waiting task)", function()
      local function stream()
        local got = {}
        http.request{ url = base .. "/chunked?n=4&size=3&delay_ms=5",
                      on_chunk = function(c) lash.sleep(0.01); got[#got + 1] = c end }
        return table.concat(got)
      end
      assert.are.equal("aaabbbcccddd", stream())
      assert.are.equal("aaabbbcccddd", lash.spawn(stream):join())
    end)

    it("holds a fast stream back while on_chunk is slow, losing nothing", function()
      local n = 6 * 1024 * 1024
      local sizes, parts = {}, {}
      local t = lash.spawn(function()
        http.request{ url = base .. "/big?n=" .. n, on_chunk = function(c)
          if #sizes == 0 then lash.sleep(0.3) end
          sizes[#sizes + 1] = #c
          parts[#parts + 1] = c
        end }
      end)
      t:join()
      local body = table.concat(parts)
      assert.are.equal(n, #body)
      assert.are.equal(("0123456789abcdef"):rep(4096), body:sub(1, 65536))
      local largest = math.max(table.unpack(sizes))
      assert.is_true(largest < 3 * 1024 * 1024, "largest chunk " .. largest)
    end)

    it("parses SSE written one byte per flush, at every split", function()
      for _, h2c in ipairs({ false, info.h2 and true or nil }) do
        local chunks = {}
        local events = {}
        local p <close> = http.sse_parser()
        local status, headers = http.request{
          url = base .. "/trickle?type=text/event-stream&delay_ms=1",
          body = SSE_DOC, http2_prior_knowledge = h2c,
          on_chunk = function(c)
            chunks[#chunks + 1] = c
            for _, ev in ipairs(p:feed(c)) do events[#events + 1] = ev end
          end,
        }
        assert.are.equal(200, status)
        assert.are.equal("text/event-stream", headers["content-type"])
        assert.are.equal(SSE_DOC, table.concat(chunks))
        assert.is_true(#chunks > 1)
        assert.are.same(SSE_WANT, events)
        -- the same stream cut at every byte boundary, and byte by byte
        for i = 0, #SSE_DOC do
          assert.are.same(SSE_WANT, parse_sse({ SSE_DOC:sub(1, i), SSE_DOC:sub(i + 1) }))
        end
        local bytes = {}
        for i = 1, #SSE_DOC do bytes[i] = SSE_DOC:sub(i, i) end
        assert.are.same(SSE_WANT, parse_sse(bytes))
      end
    end)
  end)

  describe("inside tasks", function()
    it("runs requests concurrently in several tasks", function()
      local tasks = {}
      for i = 1, 8 do
        tasks[i] = lash.spawn(function()
          local seen = {}
          for j = 1, 5 do
            local _, _, body = http.request{ url = base .. "/echo",
                                             headers = { ["X-Who"] = i .. "." .. j } }
            seen[#seen + 1] = sent_header(echo_of(body), "x-who")
          end
          return table.concat(seen, " ")
        end)
      end
      for i = 1, 8 do
        assert.are.equal(("%d.1 %d.2 %d.3 %d.4 %d.5"):format(i, i, i, i, i), tasks[i]:join())
      end
    end)

    it("does not block other tasks while one waits", function()
      local order = {}
      local slow = lash.spawn(function()
        http.request{ url = base .. "/slow?delay=0.5" }
        order[#order + 1] = "slow"
      end)
      local fast = lash.spawn(function()
        http.request{ url = base .. "/echo" }
        order[#order + 1] = "fast"
      end)
      slow:join()
      fast:join()
      assert.are.same({ "fast", "slow" }, order)
    end)

    it("cancels a waiting request with a cancelled error", function()
      local t = lash.spawn(function() return http.request{ url = base .. "/hang" } end)
      lash.sleep(0.1)
      assert.are.equal("waiting", t:status())
      t:cancel()
      local ok, err = pcall(t.join, t)
      assert.is_false(ok)
      assert.is_true(lash.is_error(err, "cancelled"))
      assert.are.equal("cancelled", t:status())
      assert.are.equal(200, (http.request{ url = base .. "/echo" }))
    end)

    it("cancels mid-stream, between chunks", function()
      local first = lash.future()
      local got = 0
      local t = lash.spawn(function()
        http.request{ url = base .. "/chunked?n=100&size=10&delay_ms=20",
                      on_chunk = function(c)
                        got = got + #c
                        if not first:done() then first:set() end
                      end }
      end)
      first:wait()
      t:cancel()
      local ok, err = pcall(t.join, t)
      assert.is_false(ok)
      assert.is_true(lash.is_error(err, "cancelled"))
      assert.is_true(got < 1000)
      lash.sleep(0.1)
      local settled = got
      lash.sleep(0.1)
      assert.are.equal(settled, got)  -- nothing more is delivered
    end)

    it("lets cleanup code make requests after a cancel", function()
      local t = lash.spawn(function()
        local ok, err = pcall(http.request, { url = base .. "/hang" })
        assert(not ok and lash.is_error(err, "cancelled"))
        local status = http.request{ url = base .. "/echo" }
        return status
      end)
      lash.sleep(0.05)
      t:cancel()
      assert.are.equal(200, t:join())
    end)
  end)

  describe("HTTP/2", function()
    if not info.h2 then
      pending("python3-h2 is missing: no HTTP/2 server")
      return
    end

    it("speaks HTTP/2 cleartext with http2_prior_knowledge", function()
      local status, headers, body = http.request{ url = base .. "/echo", http2_prior_knowledge = true,
                                                  body = "x", method = "PATCH" }
      assert.are.equal(200, status)
      assert.are.equal("application/json", headers["content-type"])
      local e = echo_of(body)
      assert.are.equal("HTTP/2", e.version)
      assert.are.equal("PATCH", e.method)
      assert.are.equal("78", e.body_hex)
    end)

    it("runs sequential and concurrent requests with prior knowledge", function()
      -- (libcurl < 8.0.0 gets a connection per request: see src/3-transport/http.c)
      for _ = 1, 3 do
        local _, _, body = http.request{ url = base .. "/echo", http2_prior_knowledge = true }
        assert.are.equal("HTTP/2", echo_of(body).version)
      end
      local tasks = {}
      for i = 1, 6 do
        tasks[i] = lash.spawn(function()
          local _, _, body = http.request{ url = base .. "/slow?delay=0.1",
                                           http2_prior_knowledge = true }
          return body
        end)
      end
      for i = 1, 6 do assert.are.equal("slow done", tasks[i]:join()) end
    end)

    it("keeps HTTP/1.1 responses with their requests after h2c to the same origin", function()
      -- (libcurl < 8 would multiplex HTTP/1.1 transfers onto one in-use
      -- connection once the origin had an HTTP/2 one: see src/3-transport/http.c)
      http.request{ url = base .. "/echo" }  -- an idle HTTP/1.1 connection
      http.request{ url = base .. "/echo", http2_prior_knowledge = true }
      local tasks = {}
      for i = 1, 6 do
        tasks[i] = lash.spawn(function()
          local got = {}
          for j = 1, 3 do
            local _, _, body = http.request{ url = base .. "/echo", timeout = 10,
                                             headers = { ["X-Who"] = i .. "." .. j } }
            local e = echo_of(body)
            assert.are.equal("HTTP/1.1", e.version)
            got[j] = sent_header(e, "x-who")
          end
          return table.concat(got, " ")
        end)
      end
      for i = 1, 6 do
        assert.are.equal(("%d.1 %d.2 %d.3"):format(i, i, i), tasks[i]:join())
      end
    end)

    it("reports a stream dropped mid-body as a retryable http error", function()
      local err = catch(http.request, { url = base .. "/drop?size=1000&sent=10",
                                        http2_prior_knowledge = true })
      assert.is_true(lash.is_error(err, "http"))
      assert.is_true(err.retryable)
    end)
  end)

  describe("TLS", function()
    if not tls_base then
      pending("openssl is missing: no certificate for the TLS server")
      return
    end
    local ca = certdir .. "/cert.pem"

    it("verifies certificates by default", function()
      local err = catch(http.request, { url = tls_base .. "/echo" })
      assert.is_true(lash.is_error(err, "tls"))
      assert.is_false(err.retryable)
    end)

    it("accepts the server with ca_file, or with verify=false, over HTTP/2", function()
      local _, _, body = http.request{ url = tls_base .. "/echo", ca_file = ca }
      assert.are.equal(info.h2 and "HTTP/2" or "HTTP/1.1", echo_of(body).version)
      local status = http.request{ url = tls_base .. "/echo", verify = false }
      assert.are.equal(200, status)
    end)

    it("multiplexes concurrent HTTP/2 requests on one connection", function()
      if not info.h2 then return pending("python3-h2 is missing") end
      local tasks = {}
      for i = 1, 6 do
        tasks[i] = lash.spawn(function()
          local _, _, body = http.request{ url = tls_base .. "/echo", ca_file = ca }
          local e = echo_of(body)
          return e.conn, e.version
        end)
      end
      local first = tasks[1]:join()
      for i = 1, 6 do
        local conn, version = tasks[i]:join()
        assert.are.equal("HTTP/2", version)
        assert.are.equal(first, conn)
      end
    end)

    it("resumes TLS sessions on new connections", function()
      local opts = { url = tls_base .. "/close", ca_file = ca, http_version = "1.1" }
      assert.are.equal(200, (http.request(opts)))
      local _, _, body = http.request{ url = tls_base .. "/echo", ca_file = ca, http_version = "1.1" }
      local e = echo_of(body)
      assert.are.equal("HTTP/1.1", e.version)
      assert.is_true(e.tls_reused)
    end)
  end)

  describe("the process environment", function()
    local function lua_child(env, code)
      local cmd = ("%s lua5.4 -e %s 2>&1"):format(env, sh_quote(
        "package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path; " ..
        "package.cpath = '" .. (os.getenv("LASH_BUILD") or "build") ..
        "/?.so;' .. package.cpath; " .. code))
      local p = assert(io.popen(cmd, "r"))
      local out = p:read("a")
      local ok, _, rc = p:close()
      return out, ok, rc
    end

    it("honours libcurl's proxy variables", function()
      local out, ok = lua_child("env http_proxy=" .. base .. " NO_PROXY= no_proxy=",
        "local _, _, b = require('lash').http.request{ url = 'http://proxied.invalid/echo' } io.write(b)")
      assert.is_true(ok, out)
      local e = echo_of(out)
      assert.are.equal("/echo", e.path)
      assert.are.equal("proxied.invalid", sent_header(e, "host"))
    end)

    it("closes a state with requests still in flight", function()
      local out, ok = lua_child("",
        "local lash = require 'lash' " ..
        "for i = 1, 4 do lash.spawn(function() lash.http.request{ url = '" .. base .. "/hang' } end) end " ..
        "lash.spawn(function() lash.http.request{ url = '" .. base .. "/chunked?n=100&delay_ms=10', " ..
        "  on_chunk = function() end } end) " ..
        "lash.sleep(0.2) io.write('closing') os.exit(0, true)")
      assert.is_true(ok, out)
      assert.are.equal("closing", out)
    end)

    it("keeps its connections out of the processes the host starts", function()
      -- sockets a process started by the host inherits, before and after a
      -- request leaves a keep-alive connection in the pool and made the
      -- loop's multi handle (whose wakeup pair libcurl < 8.8 opens without
      -- close-on-exec, curl issue 13618: the loop marks it)
      local out, ok = lua_child("",
        "local function n() local p = io.popen('ls -l /proc/self/fd') local c = 0 " ..
        "for l in p:lines() do if l:find('socket:', 1, true) then c = c + 1 end end p:close() return c end " ..
        "local lash = require('lash') local before = n() " ..
        "local s = lash.http.request{ url = '" .. base .. "/echo' } " ..
        "io.write(s, ' ', before, ' ', n())")
      assert.is_true(ok, out)
      local status, before, after = out:match("^(%d+) (%d+) (%d+)$")
      assert.are.equal("200", status, out)
      assert.are.equal(before, after)
    end)
  end)
end)
