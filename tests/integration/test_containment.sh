#!/usr/bin/env bash
# test: alone (machine-wide cgroups, mounts or loop devices; see tests/run.sh)
# tests/integration/test_containment.sh: the local sandbox's containment
# suite. Each case is one command in a jail with an expected result; every
# one must be contained and leave the host working. Meant to run as root
# too (CI): the jail must keep the host's secrets out even then. Prints TAP;
# skips cleanly where bubblewrap or user namespaces are missing.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}


if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then
  skip_all "no bubblewrap jail here: ${probe#no }"
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
at_exit cleanup

sb() { "$LASH" sandbox "$@"; }
# jail CMD...: run a shell snippet in the sandbox; sets out, err, rc
jail() {
  out=$(sb exec "$ID" --timeout "${T:-20}" -- sh -c "$1" 2>"$work/err"); rc=$?
  err=$(cat "$work/err")
  [ "$rc" = 125 ] && echo "# lash failed: $err"
}
leftovers() { pgrep -f "$1" | wc -l; }
# marks this run's sleeps: another checkout may run this suite at the same time
U=$$
# gone PATTERN: no process matches, waiting (bounded) for killed ones to be
# reaped: on a loaded machine that can trail the command's result
gone() { local i; for i in $(seq 100); do [ "$(leftovers "$1")" = 0 ] && return 0; sleep 0.1; done; return 1; }
host_ok() { [ "$(echo ok)" = ok ] && sb exec "$ID" -- true; }

# LASH_CONTAINMENT_ONLY=cgroup runs only the cgroup cases (the cgroup v2 VM
# test runs them on a kernel that has v2); LASH_CONTAINMENT_CGROUP=2 makes a
# sandbox without a v2 group of its own a failure there, not a skip.
ONLY=${LASH_CONTAINMENT_ONLY:-}
WANT_CG=${LASH_CONTAINMENT_CGROUP:-}
if [ -z "$ONLY" ]; then

ID=$(sb create --timeout 600 --limit processes=512 --limit address_space=1073741824)
check "create a sandbox" test -n "$ID"

# --- identity ------------------------------------------------------------
# seen from the host: which uid do the jail's processes hold?
# (the probe lives long and is waited for, bounded: a loaded machine can take
# seconds to start a jail; it is killed once seen)
( sb exec "$ID" --timeout 60 -- sh -c "sleep 33.456$U" >/dev/null 2>&1 & )
host_uid=""
for _ in $(seq 600); do
  p=$(pgrep -f "^sleep 33[.]456$U\$" | head -1)
  [ -n "$p" ] && host_uid=$(ps -o uid= -p "$p" | tr -d ' ') && break
  sleep 0.05
done
pkill -f "^sleep 33[.]456$U\$" 2>/dev/null
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
# the other's cgroup (its name, its memory use), once it has one: nothing of
# it, nor of any group, shows under /sys/fs/cgroup
sb exec "$OTHER" -- true
jail "find /sys/fs/cgroup 2>/dev/null | grep -c -e '$OTHER' -e '$ID' -e 'memory.current' -e 'memory.usage_in_bytes' -e 'pids.current'"
same "no sandbox's cgroup is visible under /sys/fs/cgroup" "$out" 0
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
# (the exit status is the proof; the time is only a hang guard)
check "a fork bomb is stopped ($el s, exit $rc)" test "$rc" != 0 -a "$el" -lt 120
check "  nothing of it survives" gone 'bom[b]'
check "  and the host keeps working" host_ok

# --- one sandbox's fork bomb against another's commands ----------------------
# Both at the default process limit (2048, counted per host uid). As root
# every sandbox has a host uid of its own, so B keeps running commands; as
# another user all sandboxes share that user's uid and lash cannot separate
# them without a delegated cgroup, so the case is skipped there.
if [ "$(id -u)" = 0 ]; then
  A=$(sb create --timeout 600); B=$(sb create --timeout 600)
  ( sb exec "$A" --timeout 15 -- sh -c 'bomb() { bomb | bomb & }; bomb; sleep 30' >/dev/null 2>&1 & )
  sleep 4
  out=$(sb exec "$B" --timeout 10 -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true || exit 1; done; echo alive' 2>&1)
  check "while a fork bomb runs in sandbox A, sandbox B still runs commands ($out)" test "$out" = alive
  a_uid=$(grep -o '"uid": *[0-9]*' "$LASH_SANDBOX_ROOT/$A/meta.json" | grep -o '[0-9]*$')
  b_uid=$(grep -o '"uid": *[0-9]*' "$LASH_SANDBOX_ROOT/$B/meta.json" | grep -o '[0-9]*$')
  check "  each sandbox holds its own host uid ($a_uid, $b_uid)" test -n "$a_uid" -a "$a_uid" != "$b_uid" -a "${a_uid:-0}" -ge 1593835520
  for _ in $(seq 40); do [ "$(leftovers 'bom[b]')" = 0 ] && break; sleep 0.5; done
  sb destroy "$A"; sb destroy "$B"
else
  skip "" "sandbox A vs B fork bomb: as uid $(id -u) every sandbox shares this uid's process count (lash separates them by uid only as root)"
fi

fi # not ONLY

# --- a cgroup per sandbox: pids.max and memory.max ---------------------------
# Where lash can write cgroups (root here; v2 with a delegated subtree, or
# v1) each sandbox gets a group of its own; elsewhere an explicit
# limits.memory/pids is refused, naming why, and never silently ignored.
# cgval SANDBOX FILE: a file of its group (v2: the one dir; v1: pids, memory)
cgdir() { sed -n "${2}p" "$LASH_SANDBOX_ROOT/$1/cgroup" 2>/dev/null; }
cgval() {
  local v; v=$(sed -n 1p "$LASH_SANDBOX_ROOT/$1/cgroup" 2>/dev/null)
  case "$v:$2" in
    1:pids.*) cat "$(cgdir "$1" 2)/$2" 2>/dev/null ;;
    1:memory.max) cat "$(cgdir "$1" 3)/memory.limit_in_bytes" 2>/dev/null ;;
    1:memory.swap) cat "$(cgdir "$1" 3)/memory.memsw.limit_in_bytes" 2>/dev/null || echo none ;;
    2:memory.swap) cat "$(cgdir "$1" 2)/memory.swap.max" 2>/dev/null || echo none ;;
    1:cgroup.procs) cat "$(cgdir "$1" 3)/cgroup.procs" 2>/dev/null ;;
    1:oom_kill) grep -o 'oom_kill [0-9]*' "$(cgdir "$1" 3)/memory.oom_control" | grep -o '[0-9]*$' ;;
    2:oom_kill) grep -o '^oom_kill [0-9]*' "$(cgdir "$1" 2)/memory.events" | grep -o '[0-9]*$' ;;
    2:*) cat "$(cgdir "$1" 2)/$2" 2>/dev/null ;;
  esac
}
MEM=$((128 * 1024 * 1024))
A=$(sb create --timeout 600 --limit pids=64 --limit memory=$MEM 2>"$work/cgerr")
if [ -n "$A" ] && [ -s "$LASH_SANDBOX_ROOT/$A/cgroup" ]; then
  B=$(sb create --timeout 600)
  check "sandbox A has a cgroup of its own (v$(sed -n 1p "$LASH_SANDBOX_ROOT/$A/cgroup"): $(cgdir "$A" 2))" \
    test -d "$(cgdir "$A" 2)"
  [ -n "$WANT_CG" ] && check "  of cgroup v$WANT_CG, as this run expects" \
    test "$(sed -n 1p "$LASH_SANDBOX_ROOT/$A/cgroup")" = "$WANT_CG"
  check "  with pids.max 64 ($(cgval "$A" pids.max))" test "$(cgval "$A" pids.max)" = 64
  check "  and memory.max 128 MiB ($(cgval "$A" memory.max))" test "$(cgval "$A" memory.max)" = $MEM
  sw=$(cgval "$A" memory.swap)
  check "  swap counted in it ($sw)" test "$sw" = $MEM -o "$sw" = 0 -o "$sw" = none
  check "sandbox B has its own, with the defaults ($(cgval "$B" pids.max) processes)" \
    test "$(cgval "$B" pids.max)" = 2048 -a "$(cgdir "$A" 2)" != "$(cgdir "$B" 2)"
  # (read once: on a slow machine the command can end between two reads)
  ( sb exec "$A" --timeout 20 -- sh -c 'sleep 12.345' >/dev/null 2>&1 & )
  procs=""
  for _ in $(seq 300); do procs=$(cgval "$A" cgroup.procs); [ -n "$procs" ] && break; sleep 0.1; done
  check "a command of A runs in A's group ($(echo "$procs" | grep -c .) processes)" test -n "$procs"
  # a fork bomb in A meets A's pids.max, while B runs commands
  ( sb exec "$A" --timeout 30 -- sh -c 'bomb() { bomb | bomb & }; bomb; sleep 30' >/dev/null 2>&1 & )
  # until the bomb has met the limit (pids.events counts refused forks; a
  # slow machine, an emulated one, takes a while to start the jail)
  hits=0; peak=0
  for _ in $(seq 200); do
    hits=$(cgval "$A" pids.events | awk '$1 == "max" { print $2 }')
    cur=$(cgval "$A" pids.current); [ "${cur:-0}" -gt "$peak" ] && peak=$cur
    [ "${hits:-0}" -gt 0 ] && break
    sleep 0.1
  done
  out=$(sb exec "$B" --timeout 20 -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true || exit 1; done; echo alive' 2>&1)
  check "while a fork bomb runs in A, B runs commands ($out)" test "$out" = alive
  cur=$(cgval "$A" pids.current); [ "${cur:-0}" -gt "$peak" ] && peak=$cur
  check "  and A's bomb met its pids.max (refused $hits forks; at most $peak <= 64 processes)" \
    test "${hits:-0}" -gt 0 -a "$peak" -le 64
  for _ in $(seq 60); do [ "$(leftovers 'bom[b]')" = 0 ] && break; sleep 0.5; done
  # a memory hog in A dies in A's group; B is untouched
  out=$(sb exec "$A" --timeout 30 -- sh -c 'awk "BEGIN { s = \"xxxxxxxxxxxxxxxx\"; while (1) s = s s }" 2>/dev/null; echo "exit $?"' 2>&1)
  check "a memory hog in A is killed by A's memory.max ($out, oom kills $(cgval "$A" oom_kill))" \
    test "$out" = "exit 137" -a "$(cgval "$A" oom_kill)" -ge 1
  # (dd's one 150 MiB buffer, filled: resident, past A's 128 MiB)
  out=$(sb exec "$B" -- sh -c 'dd if=/dev/zero bs=150M count=1 iflag=fullblock 2>/dev/null | wc -c' 2>&1)
  check "  B still uses more than A's limit (a 150 MiB buffer) ($out)" test "$out" = 157286400
  check "  B saw no OOM kill ($(cgval "$B" oom_kill))" test "$(cgval "$B" oom_kill)" = 0
  # a reboot empties cgroupfs: the next command makes the group again
  for d in $(cgdir "$A" 2) $(cgdir "$A" 3); do [ -n "$d" ] && rmdir "$d"; done
  out=$(sb exec "$A" -- sh -c 'echo ran' 2>&1)
  check "a lost group is made again by the next command, limits and all ($out, pids.max $(cgval "$A" pids.max))" \
    test "$out" = ran -a "$(cgval "$A" pids.max)" = 64 -a "$(cgval "$A" memory.max)" = $MEM
  # destroy leaves nothing: no group, no process, no reserved uid
  a_dirs="$(cgdir "$A" 2) $(cgdir "$A" 3)"; a_uid=$(cat "$LASH_SANDBOX_ROOT/$A/uid" 2>/dev/null)
  ( sb exec "$A" --timeout 60 -- sh -c 'sleep 59.5' >/dev/null 2>&1 & )
  for _ in $(seq 50); do [ -n "$(cgval "$A" cgroup.procs)" ] && break; sleep 0.1; done
  sb destroy "$A"
  left=0; for d in $a_dirs; do [ -e "$d" ] && left=$((left+1)); done
  check "destroy removes A's group ($left left of: $a_dirs)" test "$left" = 0
  check "  and kills what ran in it" gone 'sleep 59.[5]'
  check "  and gives back its uid ($a_uid)" test -n "$a_uid" -a ! -e "/var/lib/lash/uids/$a_uid"
  sb destroy "$B"
  # where cgroups are off, limits that need one are refused, defaults fall back
  err=$(LASH_CGROUP_ROOT=none sb create --limit memory=$MEM 2>&1 >/dev/null); rc=$?
  check "without cgroups, --limit memory is refused, naming why (exit $rc)" \
    sh -c "test $rc != 0 && echo \"\$1\" | grep -q 'limits.memory needs a cgroup' && echo \"\$1\" | grep -q 'LASH_CGROUP_ROOT=none'" _ "$err"
  C=$(LASH_CGROUP_ROOT=none sb create 2>"$work/cgwarn")
  check "  and a sandbox with the defaults is made, with a warning ($(head -c 80 "$work/cgwarn"))" \
    sh -c "test -n '$C' && test ! -e '$LASH_SANDBOX_ROOT/$C/cgroup' && grep -q 'no cgroup of their own' '$work/cgwarn'"
  [ -n "$C" ] && sb destroy "$C"
  F=$(sb create --limit memory=none --limit pids=none)
  check "--limit memory=none --limit pids=none: no group at all" test -n "$F" -a ! -e "$LASH_SANDBOX_ROOT/$F/cgroup"
  [ -n "$F" ] && sb destroy "$F"
elif [ -n "$WANT_CG" ] && [ "$(id -u)" = 0 ]; then
  not_ok "as root on cgroup v$WANT_CG, sandbox A gets a cgroup of its own" "$(cat "$work/cgerr")"
else
  # not writable here (an unprivileged run, or a container without one):
  # the explicit limit is refused with the reason, never ignored
  check "without writable cgroups, --limit memory/pids is refused naming why ($(head -c 160 "$work/cgerr"))" \
    sh -c "test -z '$A' && grep -q 'needs a cgroup' '$work/cgerr'"
  n=$((n+1)); echo "ok $n - # SKIP per-sandbox cgroup cases: lash cannot write cgroups here ($(grep -o 'lash cannot make one here: [^.]*' "$work/cgerr" | head -c 200))"
fi

if [ -z "$ONLY" ]; then

# --- a disk quota per sandbox (limits.disk) ---------------------------------
# As root with loop devices: the workspace and /tmp in an ext4 filesystem of
# the quota's size. Elsewhere --limit disk is refused, naming why.
D=$(sb create --timeout 600 --limit disk=$((48 * 1024 * 1024)) 2>"$work/diskerr")
if [ -n "$D" ]; then
  E=$(sb create --timeout 600)
  ID_SAVE=$ID; ID=$D
  jail 'dd if=/dev/zero of=big bs=1M count=80 2>/dev/null; echo "dd $?"; dd if=/dev/zero of=/tmp/more bs=1M count=8 2>/dev/null; echo "dd $?"; du -sk . | cut -f1'
  set -- $out x x x
  check "a write past the disk quota fails in the sandbox ($1 $2; $5 KiB kept)" test "$2" != 0 -a "${5:-999999}" -le 49152
  check "  /tmp shares the quota ($3 $4)" test "$4" != 0
  ID=$ID_SAVE
  out=$(sb exec "$E" -- sh -c 'dd if=/dev/zero of=big bs=1M count=80 2>/dev/null; echo "dd $?"; rm big' 2>&1)
  check "  another sandbox is not bounded by it ($out)" test "$out" = "dd 0"
  # a reboot unmounts everything: the next use mounts it again
  for m in workspace tmp disk; do umount -l "$LASH_SANDBOX_ROOT/$D/$m"; done
  out=$(sb exec "$D" -- sh -c 'ls big >/dev/null && df -k . | tail -1 | awk "{print \$2}"' 2>&1)
  check "  lost mounts are made again on the next use, files kept ($out KiB)" test "${out:-0}" -gt 0 -a "${out:-999999}" -le 49152
  sb destroy "$D"; sb destroy "$E"
  check "  destroy unmounts it and removes the image" \
    sh -c "! grep -q '$D' /proc/self/mounts && test ! -e '$LASH_SANDBOX_ROOT/$D' && ! losetup -a 2>/dev/null | grep -q '$D'"
else
  check "without root or loop devices, --limit disk is refused naming why ($(head -c 160 "$work/diskerr"))" \
    grep -q 'limits.disk needs a filesystem' "$work/diskerr"
  n=$((n+1)); echo "ok $n - # SKIP disk quota cases: $(grep -o 'cannot make one here: [^.]*' "$work/diskerr" | head -c 200)"
fi

# --- the default disk quota ---------------------------------------------------
# Every sandbox gets one where lash can make it (root, loop devices,
# mkfs.ext4): 8 GiB, at most a quarter of the state root's free space, made
# at the first use; --limit disk=off has none. Elsewhere one warning says
# what is missing and that the workspace shares the state root's filesystem.
# loops [ID]: loop devices (mounts) of sandbox ID, or of the state root
loops() { losetup -a 2>/dev/null | grep -c "$LASH_SANDBOX_ROOT/${1:-}" ; }
mounts() { grep -c " $LASH_SANDBOX_ROOT/${1:-}" /proc/self/mounts; }
# (sandboxes made above in this state root may already have said it: the
# warning is said once per state root)
rm -f "$LASH_SANDBOX_ROOT/.no-disk-quota"
G=$(sb create --timeout 600 2>"$work/gwarn")
if lash_disk_ok=$(sb create --timeout 60 --limit disk=$((16 * 1024 * 1024)) 2>/dev/null) && [ -n "$lash_disk_ok" ]; then
  sb destroy "$lash_disk_ok"
  gq=$(grep -o '"disk": *[0-9]*' "$LASH_SANDBOX_ROOT/$G/meta.json" | grep -o '[0-9]*$')
  free4=$(( $(df -B1 --output=avail "$LASH_SANDBOX_ROOT" | tail -1) / 4 ))
  check "a sandbox gets a disk quota by default ($gq bytes: 8 GiB or a quarter of the free space, $free4)" \
    test -n "$gq" -a "${gq:-0}" -ge 16777216 -a "${gq:-0}" -le 8589934592 -a "${gq:-0}" -le $((free4 + 1048576))
  check "  made at the first use, not at create (no image yet)" test ! -e "$LASH_SANDBOX_ROOT/$G/disk.img"
  out=$(sb exec "$G" -- sh -c 'df -B1 --output=size /workspace /tmp | tail -2 | tr "\n" " "' 2>&1)
  set -- $out
  check "  the first command runs in it: /workspace and /tmp are one filesystem of that size ($1 $2)" \
    test "${1:-0}" = "${2:-x}" -a "${1:-0}" -le "${gq:-0}" -a "${1:-0}" -ge $(( ${gq:-0} / 10 * 9 ))
  check "  on a loop device of its own ($(loops "$G") attached)" test "$(loops "$G")" = 1
  H=$(sb create --timeout 600 --limit disk=off)
  out=$(sb exec "$H" -- sh -c 'echo ran' 2>&1)
  check "--limit disk=off: no quota, no image, no loop device ($out)" \
    test "$out" = ran -a ! -e "$LASH_SANDBOX_ROOT/$H/disk.img" -a "$(loops "$H")" = 0
  # B's jail lives while A is destroyed: A's loop device must still go back
  ( sb exec "$H" --timeout 60 -- sh -c "sleep 7.25$U" >/dev/null 2>&1 & )
  for _ in $(seq 100); do pgrep -f "^sleep 7[.]25$U" >/dev/null && break; sleep 0.1; done
  sb destroy "$G"
  for _ in $(seq 50); do [ "$(loops "$G")" = 0 ] && break; sleep 0.1; done
  check "destroy gives the loop device and the mounts back, even while another jail runs ($(loops "$G") loops, $(mounts "$G") mounts)" \
    test "$(loops "$G")" = 0 -a "$(mounts "$G")" = 0
  pkill -f "^sleep 7[.]25$U" 2>/dev/null
  sb destroy "$H"
  # no loop device to be had at the first use (here: loop-control is not
  # one, in a mount namespace of that command's own): the sandbox goes on
  # without a quota, says so once, and leaks nothing
  if command -v unshare >/dev/null; then
    K=$(sb create --timeout 600)
    out=$(unshare -m sh -c 'mount --bind /dev/null /dev/loop-control && "$@"' _ "$LASH" sandbox exec "$K" -- sh -c 'echo ran' 2>"$work/kwarn")
    check "no loop device at the first use: the command runs without a quota ($out)" test "$out" = ran
    check "  with one warning naming why ($(head -c 200 "$work/kwarn"))" \
      sh -c "test \$(grep -c 'has no disk quota' '$work/kwarn') = 1 && grep -q 'loop device' '$work/kwarn'"
    check "  and nothing left of it: no image, no loop device, no mount ($(loops "$K"), $(mounts "$K"))" \
      test ! -e "$LASH_SANDBOX_ROOT/$K/disk.img" -a ! -e "$LASH_SANDBOX_ROOT/$K/disk.img.new" -a "$(loops "$K")" = 0 -a "$(mounts "$K")" = 0
    out=$(sb exec "$K" -- sh -c 'echo again' 2>"$work/kwarn2")
    check "  later uses keep it so, silently (the box is marked: $out)" \
      test "$out" = again -a ! -s "$work/kwarn2" -a "$(loops "$K")" = 0
    sb destroy "$K"
    before=$(ls -A "$LASH_SANDBOX_ROOT" | grep -c '^lb-'); loops_before=$(loops)
    err=$(unshare -m sh -c 'mount --bind /dev/null /dev/loop-control && "$@"' _ "$LASH" sandbox create --limit disk=$((32 * 1024 * 1024)) 2>&1 >/dev/null); rc=$?
    check "an explicit --limit disk without a loop device fails at create, naming why (exit $rc)" \
      sh -c "test $rc != 0 && echo \"\$1\" | grep -q 'loop device'" _ "$err"
    check "  leaving no sandbox, image or loop device behind" \
      test "$(ls -A "$LASH_SANDBOX_ROOT" | grep -c '^lb-')" = "$before" -a "$(loops)" = "$loops_before"
  fi
  # a sandbox lash gc reclaims gives its loop device back too
  M=$(sb create --timeout 5)
  sb exec "$M" -- true >/dev/null 2>&1
  sleep 6
  m_loops=$(loops "$M")
  sb gc >/dev/null 2>&1
  check "gc of an expired sandbox gives its loop device back (before: $m_loops, after: $(loops "$M"))" \
    test "$m_loops" = 1 -a "$(loops "$M")" = 0 -a "$(mounts "$M")" = 0 -a ! -e "$LASH_SANDBOX_ROOT/$M"
  # a sandbox deleted by hand (rm -rf of its directory or its state root:
  # the mount points stay, its metadata and image go): the next create
  # frees its mounts, and with them the loop device
  X=$(sb create --timeout 600); sb exec "$X" -- true >/dev/null 2>&1
  x_loops=$(loops "$X")
  rm -rf "$LASH_SANDBOX_ROOT/$X" 2>/dev/null
  Y=$(sb create --timeout 60)
  for _ in $(seq 50); do [ "$(loops "$X")" = 0 ] && break; sleep 0.1; done
  check "a sandbox removed by hand gives its loop device back at the next create (before: $x_loops, after: $(loops "$X"), $(mounts "$X") mounts)" \
    test "$x_loops" = 1 -a "$(loops "$X")" = 0 -a "$(mounts "$X")" = 0
  sb destroy "$Y"; rm -rf "$LASH_SANDBOX_ROOT/$X"
else
  check "without root or loop devices, a sandbox is made with one warning naming what is missing ($(head -c 200 "$work/gwarn"))" \
    sh -c "test -n '$G' && grep -q 'get no disk quota here' '$work/gwarn' && grep -q 'share the filesystem' '$work/gwarn'"
  "$LASH" eval "lash.sandbox.create{timeout = 60}:destroy() lash.sandbox.create{timeout = 60}:destroy()" 2>"$work/gwarn2"
  check "  once per state root: a later process says nothing ($(grep -c 'get no disk quota here' "$work/gwarn2") for two more sandboxes)" \
    test "$(grep -c 'get no disk quota here' "$work/gwarn2")" = 0
  LASH_SANDBOX_ROOT=$work/other-root "$LASH" eval "lash.sandbox.create{timeout = 60}:destroy() lash.sandbox.create{timeout = 60}:destroy()" 2>"$work/gwarn4"
  check "  and once in another state root ($(grep -c 'get no disk quota here' "$work/gwarn4") for two sandboxes)" \
    test "$(grep -c 'get no disk quota here' "$work/gwarn4")" = 1
  W=$(sb create --timeout 60 --limit disk=off 2>"$work/gwarn3")
  check "  --limit disk=off silences it" sh -c "test -n '$W' && ! grep -q 'disk quota' '$work/gwarn3'"
  sb destroy "$W"
  sb destroy "$G"
fi

# --- /dev/shm ---------------------------------------------------------------
jail 'df -k /dev/shm | tail -1 | awk "{print \$2}"; dd if=/dev/zero of=/dev/shm/big bs=1M count=200 2>/dev/null; echo "dd $?"; ls /dev/shm'
set -- $out x x x
check "/dev/shm is the jail's own tmpfs, 64 MiB at most (${1} KiB)" test "$1" = 65536
check "  filling it fails at its size, not in host RAM ($2 $3)" test "$3" != 0
check "  and the host's /dev/shm did not get it" test ! -e /dev/shm/big

# --- write_file into parents swapped for a symlink ---------------------------
# A process in the jail exchanges a directory d with a symlink to a host
# directory (renameat2 RENAME_EXCHANGE, as fast as it can) while write_file
# creates d/eN/f: a parent followed by path instead of by fd lands on the host.
if command -v python3 >/dev/null; then
  tgt=$(mktemp -d /tmp/lash-containment-target.XXXXXX); chmod 777 "$tgt"
  "$LASH" eval "
    local sb = lash.sandbox.open('$ID')
    local swap = lash.spawn(function()
      return sb:exec({'python3', '-c', [[
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir('d'); os.symlink('$tgt', 'l')
end = time.time() + 5
while time.time() < end:
    libc.renameat2(-100, b'd', -100, b'l', 2)
]]}, {timeout = 20})
    end)
    lash.sleep(0.3)
    local n, t0 = 0, lash.now()
    while lash.now() - t0 < 4 do
      n = n + 1
      pcall(sb.write_file, sb, 'd/e' .. n .. '/f', 'x')
    end
    swap:join()
    return n" >"$work/race" 2>&1
  check "racing a parent swap, write_file never creates anything outside ($(cat "$work/race") writes, $(ls -A "$tgt" | wc -l) escaped)" \
    test "$(ls -A "$tgt" | wc -l)" = 0
  rm -rf "$tgt"
  jail 'rm -rf d l; echo ok'
fi

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
T=2 jail "trap '' TERM INT HUP; sleep 1111.$U"
el=$(( $(date +%s) - start ))
check "SIGTERM-proof processes are killed at the deadline (exit $rc, $el s)" test "$rc" = 124 -a "$el" -lt 120
check "  nothing left" gone "sleep 1111[.]$U"

# --- a daemonised grandchild ------------------------------------------------
jail "(setsid sleep 2222.$U >/dev/null 2>&1 &); nohup sleep 2223.$U >/dev/null 2>&1 & echo started"
check "a daemonised grandchild dies when the command ends" test "$out" = started
check "  (nothing of it is left)" gone "sleep 222[23][.]$U"

# --- lash itself killed mid-command -------------------------------------------
"$LASH" sandbox exec "$ID" -- sh -c "(setsid sleep 3335.$U >/dev/null 2>&1 &); sleep 3334.$U" >/dev/null 2>&1 &
lash_pid=$!
for _ in $(seq 50); do [ "$(leftovers "^sleep 333[45][.]$U")" = 2 ] && break; sleep 0.1; done
kill -9 "$lash_pid" 2>/dev/null; wait "$lash_pid" 2>/dev/null
check "lash killed with SIGKILL mid-command takes the jail with it" gone "^sleep 333[45][.]$U"

# --- the terminal's Ctrl-C ----------------------------------------------------
# A terminal sends SIGINT to its foreground process group. The jail (bwrap and
# the supervisor) has a session of its own, so it keeps running (`lash chat`
# cancels a turn on Ctrl-C and must not lose its jail); lash ignores SIGINT
# here (a background job's inherited SIG_IGN) and then tears the jail down.
setsid "$LASH" eval "
  local sb = lash.sandbox.create{timeout = 120}
  sb:exec({'true'})
  local r = sb:exec({'sh', '-c', 'sleep 4.75$U; echo survived'}, {timeout = 60})
  local again = sb:exec({'echo', 'and-again'})
  sb:destroy()
  return r.stdout .. again.stdout" >"$work/int" 2>"$work/interr" &
int_pid=$!
for _ in $(seq 300); do pgrep -f "^sleep 4[.]75$U" >/dev/null && break; sleep 0.1; done
# (live ones: a probe's reaped-late zombie does not count)
in_group=$(ps -e -o pgid=,stat=,comm= | awk -v g="$int_pid" '$1 == g && $2 !~ /^Z/ && $3 == "bwrap"' | wc -l)
kill -INT -- -"$int_pid" 2>/dev/null
wait "$int_pid"
check "a SIGINT to lash's process group leaves the jail running (bwrap in lash's group: $in_group; $(tr '\n' ' ' <"$work/int" | head -c 120))" \
  test "$in_group" = 0 -a "$(grep -c '^survived$\|^and-again$' "$work/int")" = 2
check "  and lash tore it down when done" gone "sleep 4[.]75$U"

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

# --- untrusted specs through lash run ----------------------------------------
marker=$work/pwned
cat >"$work/evil.lua" <<EOF
lash.load_spec_string("os.execute('id > $marker') return lash.agent{model='test'}", "x.lua", {trust = true})
return lash.agent{model = 'test'}
EOF
"$LASH" run "$work/evil.lua" hi >/dev/null 2>"$work/err"; rc=$?
check "lash run of a spec that loads code trusted is refused (exit $rc) and ran nothing" test "$rc" != 0 -a ! -e "$marker"
check "  naming --trust" grep -q "load_spec_string is not available to a spec loaded without --trust" "$work/err"
printf 'lash.spawn(function() while true do lash.sleep(1) end end)\nreturn lash.agent{model = "test"}\n' >"$work/task.lua"
timeout 60 "$LASH" run "$work/task.lua" hi >/dev/null 2>&1; rc=$?
check "a spec cannot leave a task keeping lash run alive (exit $rc)" test "$rc" != 0 -a "$rc" != 124
# the spec's own functions at run time: a tool that loops, one that doubles a string
for body in 'while true do end' "local s = 'x' while true do s = s .. s end"; do
  cat >"$work/loop.lua" <<EOF
return lash.agent{model = lash.script_model{{tool_calls = {{name = 't', args = {}, id = 'c1'}}}, 'done'},
  tools = {lash.tool{name = 't', description = 't', parameters = {type = 'object'}, handler = function() $body end}}}
EOF
  timeout 120 "$LASH" run "$work/loop.lua" hi >/dev/null 2>"$work/err"; rc=$?
  check "a spec's tool doing '$body' at run time is stopped by its budget (exit $rc: $(grep -o 'budget: [^;]*' "$work/err" | head -c 120))" \
    sh -c "test $rc = 8 && grep -q 'lash.tool .t..handler' '$work/err'"
done
printf 'model: test\ncapabilities:\n  - LocalSandbox: {isolation: none}\n' >"$work/none.yaml"
"$LASH" run "$work/none.yaml" hi >/dev/null 2>"$work/err"; rc=$?
check "a YAML spec cannot hand the model an unjailed sandbox (exit $rc)" test "$rc" != 0
check "  the message names the option and the flag" grep -q "option 'isolation' is refused.*--isolation" "$work/err"

# --- the host keeps working -----------------------------------------------------
check "after all this, the sandbox still runs commands" host_ok
sb destroy "$OTHER"; sb destroy "$ID"
# (the disk templates stay: the next sandbox's quota is a copy of one; the
# no-quota warning's marker stays too)
check "destroy removes both" test "$(ls -A "$LASH_SANDBOX_ROOT" | grep -cvx '[.]disk-templates\|[.]no-disk-quota')" = 0
fi # not ONLY

# --- again, as an unprivileged user --------------------------------------------
# As root, the whole suite (and specs/containment_spec.lua) runs once more
# under an unprivileged uid with no passwd entry (setpriv), where the jail is
# made through an unprivileged user namespace instead.
if [ "$(id -u)" = 0 ] && [ -z "${LASH_CONTAINMENT_NESTED:-}" ]; then
  # a uid of this run's own: the unprivileged jails share their uid's process
  # count, so another checkout's run (its fork bomb) under the same uid would
  # starve this one
  as_uid=${LASH_CONTAINMENT_UID:-$((61000 + $$ % 4000))}
  if ! command -v setpriv >/dev/null; then
    skip "" "the unprivileged run: setpriv is missing (util-linux)"
  else
    # a sanitized build (make check) needs its runtime's settings, which
    # env -i would drop; the specs load the sanitized module into a stock
    # lua5.4, so the runtime is preloaded there as tests/run.sh does
    san_env=(); spec_env=()
    if [ -n "${LASH_SANITIZED:-}" ]; then
      san_env=(LASH_SANITIZED=1 "ASAN_OPTIONS=${ASAN_OPTIONS:-}" "UBSAN_OPTIONS=${UBSAN_OPTIONS:-}")
      spec_env=("LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
                ASAN_OPTIONS=detect_leaks=0 "UBSAN_OPTIONS=${UBSAN_OPTIONS:-}")
    fi
    sub=$(setpriv --reuid "$as_uid" --regid "$as_uid" --clear-groups env -i PATH="$PATH" HOME=/tmp \
          "${san_env[@]}" LASH_CONTAINMENT_NESTED=1 LASH_CONTAINMENT_ONLY="$ONLY" LASH_BUILD="$BUILD" LASH_BIN="$LASH" bash "$0" 2>&1)
    sub_rc=$?
    sub_n=0; sub_plan=""; sub_skip=""; sub_bad=0
    while IFS= read -r line; do
      case $line in
        "ok "*"# SKIP"*) sub_n=$((sub_n+1)); skip "as uid $as_uid:" "${line#*# SKIP }" ;;
        "ok "*) sub_n=$((sub_n+1)); ok "as uid $as_uid: ${line#ok * - }" ;;
        "not ok "*) sub_n=$((sub_n+1)); sub_bad=$((sub_bad+1)); not_ok "as uid $as_uid: ${line#not ok * - }" ;;
        "1..0"*) sub_skip=${line#*# SKIP } ;;
        "1.."*) sub_plan=${line#1..} ;;
        "#"*) echo "$line" ;;
      esac
    done <<<"$sub"
    # the re-run must have run: a skip of it all says why, anything else
    # that printed no result, a short count or a failed exit is a failure
    if [ -n "$sub_skip" ] && [ "$sub_n" = 0 ]; then
      skip "as uid $as_uid:" "$sub_skip"
    elif [ "$sub_n" = 0 ] || [ "$sub_plan" != "$sub_n" ] || { [ "$sub_rc" != 0 ] && [ "$sub_bad" = 0 ]; }; then
      not_ok "as uid $as_uid: the unprivileged re-run ran (results $sub_n, plan ${sub_plan:-none}, exit $sub_rc)" \
        "$(echo "$sub" | grep -v '^ok ' | tail -5)"
    fi
    [ -n "$ONLY" ] || {
    spec_out=$(setpriv --reuid "$as_uid" --regid "$as_uid" --clear-groups env -i PATH="$PATH" \
               HOME=/tmp "${spec_env[@]}" lua5.4 /usr/bin/busted --cpath="$BUILD/?.so" -o TAP specs/containment_spec.lua 2>&1)
    bad=$(echo "$spec_out" | grep -c '^not ok')
    good=$(echo "$spec_out" | grep -c '^ok')
    check "as uid $as_uid: specs/containment_spec.lua passes ($good ok, $bad failed)" test "$bad" = 0 -a "$good" -gt 0
    [ "$good" -gt 0 ] || echo "$spec_out" | tail -5 | sed 's/^/#   /'
    [ "$bad" = 0 ] || echo "$spec_out" | grep -A5 '^not ok' | sed 's/^/#   /'
    }
  fi
fi

done_testing

