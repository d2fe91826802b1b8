#!/usr/bin/env bash
# tests/integration/test_probe_cache.sh: the bubblewrap probe (a jail run
# and waited for before a process's first jailed sandbox) is remembered
# across processes in $XDG_RUNTIME_DIR/lash (/run/lash for root), keyed by
# bwrap's identity, the euid and the kernel's user-namespace switches: a
# second process runs no probe and its jail works; a changed bwrap, a file
# that is not ours alone, or a damaged file means a new probe; a failed
# probe is never remembered. TAP; skips where there is no jail or strace.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v strace >/dev/null || skip_all "no strace to see which programs run"
probe=$(jail_probe)
[ "$probe" = yes ] || skip_all "no bubblewrap jail here"
work=$(mktemp -d /tmp/lash-probe.XXXXXX); chmod 711 "$work"
at_exit "rm -rf '$work'"
export LASH_SANDBOX_ROOT=$work/state XDG_RUNTIME_DIR=$work/rt
mkdir -m 700 "$XDG_RUNTIME_DIR"
F=$XDG_RUNTIME_DIR/lash/bwrap-probe
# probes LOG: how many probes a strace log shows (bwrap --version, run by
# the probe inside its jail)
probes() { grep -c 'execve("[^"]*bwrap", \["[^"]*bwrap", "--version"\]' "$1"; }
# one: a process that makes a jailed sandbox and runs a command in it
one() {
  strace -f -e trace=execve -o "$work/trace" "$LASH" eval \
    'local s = lash.sandbox.create{} local r = s:exec{"echo", "jailed"} s:close() return r.stdout' \
    >"$work/out" 2>"$work/err"
}

one
check "a first process probes bwrap ($(probes "$work/trace") probe) and remembers it" \
  sh -c "test $(probes "$work/trace") = 1 -a -s '$F'"
check "  the file is ours alone (0600)" test "$(stat -c %a "$F")" = 600
one
check "a second process runs no probe ($(probes "$work/trace")), and its jail works" \
  sh -c "test $(probes "$work/trace") = 0 && grep -qx jailed '$work/out'"

chmod 666 "$F"
one
check "a file others may write is ignored: a new probe ($(probes "$work/trace"))" test "$(probes "$work/trace")" = 1
check "  and replaced by one of ours" test "$(stat -c %a "$F")" = 600

printf 'v2 garbage\n' >"$F"
one
check "a damaged file means a new probe ($(probes "$work/trace"))" test "$(probes "$work/trace")" = 1

# another bwrap (a copy: another inode) is another key
cp "$(command -v bwrap)" "$work/bwrap"
LASH_BWRAP=$work/bwrap one
check "another bwrap binary is probed ($(probes "$work/trace"))" test "$(probes "$work/trace")" = 1
check "  and remembered under its own key" grep -q "^v2 $work/bwrap " "$F"
touch -d '1 hour ago' "$work/bwrap"
LASH_BWRAP=$work/bwrap one
check "  touched (a new mtime), it is probed again ($(probes "$work/trace"))" test "$(probes "$work/trace")" = 1

# a probe that fails is not remembered
rm -f "$F"
printf '#!/bin/sh\necho "bwrap: no permissions to create a jail" >&2\nexit 1\n' >"$work/badbwrap"
chmod 755 "$work/badbwrap"
LASH_BWRAP=$work/badbwrap "$LASH" eval 'return tostring(lash.sandbox.probe())' >/dev/null 2>&1
check "a failed probe is not remembered" test ! -e "$F"
echo "1..$n"
