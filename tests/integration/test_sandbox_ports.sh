#!/usr/bin/env bash
# tests/integration/test_sandbox_ports.sh: a server in a local sandbox
# (network off: a namespace of its own) reached from the host through
# `lash sandbox port`, with real clients: curl fetches a file from
# python3's http.server started by another lash process, a raw TCP echo
# server gets 5 MB and half-closes (the answer still comes back whole), a
# port nothing listens on is refused while the relay keeps serving, and an
# interrupt ends it with nothing left listening. TAP; skips where there is
# no jail, curl or python3.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
[ "$(jail_probe)" = yes ] || skip_all "no bubblewrap jail here"
command -v curl >/dev/null || skip_all "no curl"
command -v python3 >/dev/null || skip_all "no python3"
work=$(mktemp -d /tmp/lash-port.XXXXXX); chmod 711 "$work"
export LASH_SANDBOX_ROOT=$work/state
pids=()
at_exit "for p in \${pids[@]:-}; do kill \$p 2>/dev/null; done; wait 2>/dev/null; [ -n \"\${id:-}\" ] && '$LASH' sandbox destroy \"\$id\" >/dev/null 2>&1; rm -rf '$work'"

# wait until FILE has a line (at most 20 s); print it
first_line() {
  for _ in $(seq 200); do
    [ -s "$1" ] && { head -n1 "$1"; return 0; }
    sleep 0.1
  done
  return 1
}

id=$("$LASH" sandbox create --timeout 300)
check "a sandbox with the network off" test -n "$id"
echo 'hello from the sandbox' | "$LASH" sandbox write "$id" site/hello.txt

# a web server run by one lash process, published by another
"$LASH" sandbox exec "$id" --timeout 120 -- python3 -m http.server 8000 --bind 127.0.0.1 --directory site \
  >"$work/server.out" 2>&1 &
pids+=($!)
"$LASH" sandbox port "$id" 8000 >"$work/addr" 2>"$work/port.err" &
port_pid=$!; pids+=($port_pid)
addr=$(first_line "$work/addr")
check "lash sandbox port prints the host address" grep -Eq '^127\.0\.0\.1:[0-9]+$' <<<"$addr"
body=""
for _ in $(seq 50); do   # the server may still be starting
  body=$(curl -sf "http://$addr/hello.txt") && break
  sleep 0.2
done
same "curl gets the sandbox's file through it" "$body" "hello from the sandbox"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/missing")
same "and the server's own answers (404)" "$code" 404
lacks "the host itself has nothing on the sandbox's port" "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/ 2>&1)" 200

# a raw echo server: 5 MB both ways, then a half close from the client
cat >"$work/echo.py" <<'PY'
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7000)); s.listen(4)
while True:
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
PY
"$LASH" sandbox cp "$work/echo.py" "$id:echo.py" >/dev/null
"$LASH" sandbox exec "$id" --timeout 120 -- python3 echo.py >"$work/echo.out" 2>&1 &
pids+=($!)
"$LASH" sandbox port "$id" 7000 --host-port 0 >"$work/addr2" 2>/dev/null &
pids+=($!)
addr2=$(first_line "$work/addr2")
cat >"$work/client.py" <<'PY'
import hashlib, os, socket, sys, time
host, port = sys.argv[1].split(":")
data = os.urandom(5 * 1024 * 1024)
for _ in range(50):
    try:
        c = socket.create_connection((host, int(port)))
        c.sendall(b"x"); got = c.recv(1)
        if got == b"x": break
        c.close()
    except OSError:
        pass
    time.sleep(0.2)
import threading
def send():
    c.sendall(data); c.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send); t.start()
back = bytearray()
while True:
    b = c.recv(1 << 16)
    if not b: break
    back += b
t.join()
print(hashlib.sha256(data).hexdigest() == hashlib.sha256(bytes(back)).hexdigest(), len(back))
PY
out=$(timeout 60 python3 "$work/client.py" "$addr2")
same "5 MB go in and come back whole after the client's half close" "$out" "True 5242880"

# a port nothing listens on
"$LASH" sandbox port "$id" 9 >"$work/addr3" 2>"$work/port3.err" &
p3=$!; pids+=($p3)
addr3=$(first_line "$work/addr3")
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr3/" 2>/dev/null)
same "a port nothing listens on: the connection is refused" "$code" 000
contains "and the relay says why" "$(cat "$work/port3.err")" "nothing listens on port 9 in the sandbox"
check "while it goes on listening" kill -0 $p3

kill -INT $port_pid
for _ in $(seq 50); do kill -0 $port_pid 2>/dev/null || break; sleep 0.1; done
wait $port_pid; rc=$?
same "an interrupt ends lash sandbox port" "$(kill -0 $port_pid 2>/dev/null && echo running || echo ended)" ended
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/hello.txt" 2>/dev/null)
same "and nothing listens on its address any more" "$code" 000

out=$("$LASH" sandbox port "$id" 70000 2>&1); rc=$?
same "a bad port is a usage error" "$rc" 2
contains "naming it" "$out" "PORT must be a TCP port number"
done_testing
