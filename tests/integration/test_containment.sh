#!/usr/bin/env bash
# tests/integration/test_containment.sh: the local sandbox's containment
# suite. Each case is one command in a jail with an expected result; every
# one must be contained and leave the host working. Meant to run as root
# too (CI): the jail must keep the host's secrets out even then. Prints TAP;
# skips cleanly where bubblewrap or user namespaces are missing.
set -u
cd "$(dirname "$0")/../.."
BUILD=${LASH_BUILD:-build}
LASH=${LASH_BIN:-$BUILD/bin/lash}
n=0; failed=0

ok()   { n=$((n+1)); echo "ok $n - $1"; }
nok()  { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
check() { # check DESC CONDITION-COMMAND...
  local d=$1; shift
  if "$@"; then ok "$d"; else nok "$d" "failed: $*"; fi
}

if [ ! -x "$LASH" ]; then echo "1..0 # SKIP $LASH is not built"; exit 0; fi
# stdout only: a sanitized build may print warnings on stderr
probe=$("$LASH" eval 'local ok, why = lash.sandbox.probe(); return ok and "yes" or "no " .. tostring(why)' 2>/dev/null)
if [ "${probe%% *}" != "yes" ]; then
  echo "1..0 # SKIP no bubblewrap jail here: ${probe#no }"
  exit 0
fi

work=$(mktemp -d /tmp/lash-containment.XXXXXX)
chmod 711 "$work"
export LASH_SANDBOX_ROOT=$work/state
secret_home=""
cleanup() {
  [ -n "${listener:-}" ] && kill "$listener" 2>/dev/null
  [ -n "$secret_home" ] && rm -rf "$secret_home"
  rm -f /root/.lash-containment-secret 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

sb() { "$LASH" sandbox "$@"; }
# jail CMD...: run a shell snippet in the sandbox; sets out, err, rc
jail() {
  out=$(sb exec "$ID" --timeout "${T:-20}" -- sh -c "$1" 2>"$work/err"); rc=$?
  err=$(cat "$work/err")
  [ "$rc" = 125 ] && echo "# lash failed: $err"
}
leftovers() { pgrep -f "$1" | wc -l; }
host_ok() { [ "$(echo ok)" = ok ] && sb exec "$ID" -- true; }

ID=$(sb create --timeout 600 --limit processes=512 --limit address_space=1073741824)
check "create a sandbox" test -n "$ID"

# --- identity ------------------------------------------------------------
# seen from the host: which uid do the jail's processes hold?
( sb exec "$ID" -- sh -c 'sleep 3.456' >/dev/null 2>&1 & )
host_uid=""
for _ in $(seq 50); do
  p=$(pgrep -f '^sleep 3[.]456' | head -1)
  [ -n "$p" ] && host_uid=$(ps -o uid= -p "$p" | tr -d ' ') && break
  sleep 0.05
done
if [ "$(id -u)" = 0 ]; then
  check "as root, the jail's processes hold an unprivileged host uid ($host_uid)" \
    test -n "$host_uid" -a "$host_uid" != 0
else
  check "the jail's processes hold the caller's uid ($host_uid)" test "$host_uid" = "$(id -u)"
fi
jail 'id -u'
check "inside, the command is not root ($out)" test -n "$out" -a "$out" != 0
jail 'grep CapEff /proc/self/status'
check "no capabilities inside" test "$(echo "$out" | awk '{print $2}')" = 0000000000000000

# --- writing outside the workspace -------------------------------------
jail 'touch /etc/lash-x 2>/dev/null || touch /lash-x 2>/dev/null || touch /usr/lash-x 2>/dev/null || echo refused'
check "writes outside the workspace fail (/etc, /, /usr)" test "$out" = refused
check "  and nothing appeared on the host" test ! -e /etc/lash-x -a ! -e /lash-x -a ! -e /usr/lash-x
jail 'echo inside > /tmp/lash-containment-marker && cat /tmp/lash-containment-marker'
check "the sandbox's /tmp is its own" test "$out" = inside -a ! -e /tmp/lash-containment-marker
jail 'echo ok > /workspace/f && cat /workspace/f'
check "the workspace is writable" test "$out" = ok

# --- reading host secrets ----------------------------------------------
if [ -w /root ]; then echo "root-secret" > /root/.lash-containment-secret; fi
secret_home=$(mktemp -d /home/lash-containment.XXXXXX 2>/dev/null || true)
[ -n "$secret_home" ] && echo "home-secret" > "$secret_home/secret" && chmod 755 "$secret_home" && chmod 644 "$secret_home/secret"
jail 'cat /etc/shadow /etc/gshadow 2>/dev/null | wc -c'
check "/etc/shadow and /etc/gshadow read as nothing" test "$out" = 0
jail 'ls -A /root | wc -l; cat /root/.lash-containment-secret 2>&1 | grep -c root-secret'
check "/root is empty inside" test "$(echo $out)" = "0 0"
jail "ls -A /home | wc -l; cat $secret_home/secret 2>/dev/null | grep -c home-secret"
check "the host's home is not there" test "$(echo $out)" = "0 0"
jail 'ls /etc/ssh/ 2>/dev/null | grep _key$ | while read k; do cat /etc/ssh/$k; done | wc -c'
check "SSH host keys read as nothing" test "$out" = 0
OTHER=$(sb create --timeout 600)
echo "other's secret" | sb write "$OTHER" /workspace/secret.txt
jail "cat $LASH_SANDBOX_ROOT/$OTHER/workspace/secret.txt 2>&1; ls -A $LASH_SANDBOX_ROOT 2>/dev/null | wc -l"
check "other sandboxes under the state root are out of reach" sh -c "! echo \"$out\" | grep -q \"other's secret\""
sb read "$ID" /etc/shadow >/dev/null 2>&1; r1=$?
sb read "$ID" "/root/.lash-containment-secret" >/dev/null 2>&1; r2=$?
check "file operations refuse host secrets too (exit 1)" test "$r1" = 1 -a "$r2" = 1

# --- the network when it is off ------------------------------------------
port_file=$work/port
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
s.settimeout(60)
while True:
    try:
        c, _ = s.accept(); c.send(b"reached"); c.close()
    except Exception:
        break' "$port_file" & listener=$!
for _ in $(seq 50); do [ -s "$port_file" ] && break; sleep 0.1; done
port=$(cat "$port_file")
host_reach=$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && head -c 7 <&3" 2>/dev/null)
check "control: the host reaches its loopback listener" test "$host_reach" = reached
jail "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$port && head -c 7 <&3' 2>/dev/null || echo unreachable"
check "TCP to the host's loopback listener fails inside" test "$out" = unreachable
jail 'getent hosts example.com >/dev/null 2>&1 && echo resolved || echo no-dns; cat /proc/net/dev | grep -c ":"'
check "DNS fails, only loopback exists" test "$(echo $out)" = "no-dns 1"

# --- a fork bomb ------------------------------------------------------------
start=$(date +%s)
T=10 jail 'bomb() { bomb | bomb & }; bomb; sleep 30' 2>/dev/null
el=$(( $(date +%s) - start ))
# it ends at its deadline (124), or sooner when the process limit stops the
# shell itself (the limit counts every jail of the same host uid)
check "a fork bomb is stopped ($el s, exit $rc)" test "$rc" != 0 -a "$el" -lt 25
sleep 0.5
check "  nothing of it survives" test "$(leftovers 'bom[b]')" = 0
check "  and the host keeps working" host_ok

# --- a memory bomb ----------------------------------------------------------
T=30 jail 'awk "BEGIN { s = \"xxxxxxxxxxxxxxxx\"; while (1) s = s s }" 2>/dev/null; echo "exit $?"'
check "a memory bomb dies at the address-space limit ($out)" sh -c "echo '$out' | grep -qv 'exit 0'"
check "  and the host keeps working" host_ok

# --- an infinite output stream ----------------------------------------------
hwm=$("$LASH" eval "
  local s = lash.sandbox.open('$ID')
  local r = s:exec({'yes'}, {timeout = 3, max_output_bytes = 1048576})
  local f = io.open('/proc/self/status'); local st = f:read('a'); f:close()
  return r.timed_out, #r.stdout, st:match('VmHWM:%s*(%d+)')")
read -r to len kb <<<"$hwm"
check "an endless stream is cut at its deadline, keeping 1 MiB" test "$to" = true -a "$len" = 1048576
check "  lash's peak memory stays bounded (${kb} KiB < 64 MiB)" test "${kb:-999999}" -lt 65536

# --- a process ignoring SIGTERM ---------------------------------------------
start=$(date +%s)
T=2 jail "trap '' TERM INT HUP; sleep 1111"
el=$(( $(date +%s) - start ))
check "SIGTERM-proof processes are killed at the deadline (exit $rc, $el s)" test "$rc" = 124 -a "$el" -lt 8
check "  nothing left" test "$(leftovers 'sleep 111[1]')" = 0

# --- a daemonised grandchild ------------------------------------------------
jail '(setsid sleep 2222 >/dev/null 2>&1 &); nohup sleep 2223 >/dev/null 2>&1 & echo started'
sleep 0.3
check "a daemonised grandchild dies when the command ends" test "$out" = started -a "$(leftovers 'sleep 222[23]')" = 0

# --- lash itself killed mid-command -------------------------------------------
"$LASH" sandbox exec "$ID" -- sh -c '(setsid sleep 3335 >/dev/null 2>&1 &); sleep 3334' >/dev/null 2>&1 &
lash_pid=$!
for _ in $(seq 50); do [ "$(leftovers '^sleep 333[45]')" = 2 ] && break; sleep 0.1; done
kill -9 "$lash_pid" 2>/dev/null; wait "$lash_pid" 2>/dev/null
sleep 0.3
check "lash killed with SIGKILL mid-command takes the jail with it" test "$(leftovers '^sleep 333[45]')" = 0

# --- symlink and .. escapes in file operations ------------------------------
jail 'ln -s /etc/shadow s1; ln -s ../../../../../../../etc/shadow s2; ln -s /root s3; ln -s /etc/lash-escape s4; echo done'
sb read "$ID" s1 >/dev/null 2>&1; a=$?
sb read "$ID" s2 >/dev/null 2>&1; b=$?
sb ls "$ID" s3 >/dev/null 2>&1; c=$?
sb read "$ID" ../../../../etc/shadow >/dev/null 2>&1; d=$?
check "symlinks and .. to host secrets are refused (exit 1)" test "$a$b$c$d" = 1111
echo evil | sb write "$ID" s4 2>/dev/null; a=$?
echo evil | sb write "$ID" ../../../lash-escape 2>/dev/null; b=$?
check "writes through symlinks or .. never land on the host (exit 1)" \
  test "$a$b" = 11 -a ! -e /etc/lash-escape -a ! -e /lash-escape
# the state root's path means nothing inside: it resolves in the jail's view
echo evil | sb write "$ID" "$LASH_SANDBOX_ROOT/$OTHER/workspace/secret.txt" 2>/dev/null
check "  another sandbox's file cannot be reached by its host path" \
  test "$(sb read "$OTHER" secret.txt)" = "other's secret"

# --- /proc/1/root and ptrace ---------------------------------------------------
jail 'cat /proc/1/root/etc/shadow 2>/dev/null | wc -c; ls -A /proc/1/root/root 2>/dev/null | wc -l; ls /proc | grep -c "^[0-9]"'
set -- $out x x x
check "/proc/1/root is the jail's own root (no secrets)" test "$1" = 0 -a "$2" = 0
check "only the jail's processes are visible ($3)" test "${3:-99}" -lt 10
jail 'strace -f -p 1 -o /dev/null 2>&1 & sleep 0.5; kill %1 2>/dev/null; echo; unshare -U true 2>/dev/null && echo nested || echo no-nested'
check "no nested user namespaces" test "$(echo "$out" | tail -1)" = no-nested
host_pid=$$
jail "kill -0 $host_pid 2>/dev/null && echo visible || echo invisible; cat /proc/$host_pid/environ 2>/dev/null | wc -c"
check "host processes cannot be signalled or read" test "$(echo $out)" = "invisible 0"

# --- the host keeps working -----------------------------------------------------
check "after all this, the sandbox still runs commands" host_ok
sb destroy "$OTHER"; sb destroy "$ID"
check "destroy removes both" test "$(ls -A "$LASH_SANDBOX_ROOT" | wc -l)" = 0
echo "1..$n"
[ "$failed" -eq 0 ]
