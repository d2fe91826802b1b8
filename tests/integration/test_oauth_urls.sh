#!/usr/bin/env bash
# tests/integration/test_oauth_urls.sh: what an MCP server's OAuth metadata
# may make lash do with the user's browser and terminal. The server
# (tests/servers/oauth_hostile.py) names the authorization_endpoint; lash
# opens only an https URL or an http one on loopback, in $BROWSER (here a
# script recording what it was given), prints it with nothing a terminal
# would act on, and never starts a login for a server an untrusted spec named.
# Runs on a real pty (tests/integration/term_pty.py), where lash would be
# interactive.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v python3 >/dev/null || skip_all "python3 is missing"

new_tmp work
export HOME=$work XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config NO_COLOR=1
python3 tests/servers/oauth_hostile.py "$work/port" "$work/endpoint" >"$work/server.log" 2>&1 &
server=$!
at_exit "kill $server 2>/dev/null"
printf 'x' >"$work/endpoint"
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
check "the hostile server runs" test -n "$port"
URL=http://127.0.0.1:$port/mcp

# the browser: records its argument; for a loopback URL it comes back to the
# redirect as a user's browser would (the code is then refused at /token)
cat >"$work/browser" <<'PY'
#!/usr/bin/env python3
import sys, urllib.parse, urllib.request
with open(sys.argv[2], "ab") as f: f.write(sys.argv[1].encode("latin-1", "replace") + b"\n")
q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(sys.argv[1]).query))
if "redirect_uri" in q:
    try: urllib.request.urlopen(q["redirect_uri"] + "?code=c&state=" + urllib.parse.quote(q.get("state", "")), timeout=10)
    except Exception: pass
PY
chmod 755 "$work/browser"
cat >"$work/browse.sh" <<SH
#!/bin/sh
exec "$work/browser" "\$1" "$work/opened"
SH
chmod 755 "$work/browse.sh"
export BROWSER=$work/browse.sh

# login URL: the user's own command, on a terminal
login() {
  rm -f "$work/opened"
  printf '%b' "$1" >"$work/endpoint"
  verdict=$(python3 tests/integration/term_pty.py "$work/tty.log" -- "$LASH" mcp login "$URL")
  rc=$?
  shown=$(tr -d '\r' <"$work/tty.log")
}
HOSTILE='file:///etc/passwd\033]52;c;aGVsbG8=\007\033[2J\233'
for ep in "$HOSTILE" 'javascript:alert(1)//' 'http://evil.example/authorize' \
          'https://user:pw@evil.example/authorize' 'https://evil.example/a\033[2Jb'; do
  login "$ep"
  name=$(printf '%s' "$ep" | cut -c1-40 | cat -v)
  check "authorization_endpoint $name: login fails (exit $rc)" test "$rc" != 0
  check "  nothing is opened in the browser" test ! -e "$work/opened"
  contains "  the refusal says why" "$shown" "authorization_endpoint"
  same "  the terminal gets nothing it would act on" "$verdict" clean
done

# the control: a loopback endpoint is opened and printed as it is
login "http://127.0.0.1:$port/authorize"
check "a loopback http endpoint is opened in the browser" grep -q "^http://127.0.0.1:$port/authorize?response_type=code&" "$work/opened"
contains "  and printed for the user" "$shown" "http://127.0.0.1:$port/authorize?response_type=code&"
contains "  (the flow went on: its code was refused at /token)" "$shown" "exchanging the authorization code failed"

# an untrusted spec names the server: no login, even on a terminal and with
# a browser at hand; the message says how to log in
cat >"$work/spec.yaml" <<YAML
name: untrusted
model: test
capabilities:
  - MCPServerStreamableHTTP:
      url: $URL
YAML
rm -f "$work/opened"
verdict=$(python3 tests/integration/term_pty.py "$work/tty.log" -- "$LASH" run "$work/spec.yaml" "hello"); rc=$?
shown=$(tr -d '\r' <"$work/tty.log")
check "an untrusted spec's server needing OAuth: the run fails (exit $rc)" test "$rc" != 0 -a "$rc" != 124
check "  without opening the browser" test ! -e "$work/opened"
contains "  saying how to log in" "$shown" "lash mcp login $URL"
contains "  or to trust the spec" "$shown" "--trust"
lacks "  and printing no authorization URL" "$shown" "/authorize?"

done_testing
