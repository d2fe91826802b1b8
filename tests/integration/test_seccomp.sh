#!/usr/bin/env bash
# tests/integration/test_seccomp.sh: the jail's seccomp filter and session
# keyring. Each refused system call (src/5-backend/local/sandbox_seccomp_list.h)
# is made inside a jail by tests/integration/try_syscalls.c and must fail with
# ENOSYS, the filter's answer (the kernel's own refusals are EPERM, EFAULT,
# EINVAL...: so each case fails without the filter); getpid must still work.
# Then a lash started with a session keyring holding a key: the jail must
# not see it. As root, then again as an unprivileged uid.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}

if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then skip_all "no bubblewrap jail here: ${probe#no }"; fi
CC=${CC:-cc}
command -v "$CC" >/dev/null || skip_all "no C compiler to build the helper"
command -v python3 >/dev/null || skip_all "python3 is missing (it makes the session keyring)"

work=$(mktemp -d /tmp/lash-seccomp.XXXXXX)
chmod 711 "$work"
at_exit "rm -rf '$work'"
export LASH_SANDBOX_ROOT=$work/state
sb() { "$LASH" sandbox "$@"; }
"$CC" -O -o "$work/try" tests/integration/try_syscalls.c || skip_all "the helper did not build"
chmod 755 "$work/try"

ID=$(sb create --timeout 300)
check "create a sandbox" test -n "$ID"
at_exit "'$LASH' sandbox destroy '$ID' >/dev/null 2>&1"
sb write "$ID" try <"$work/try"
sb exec "$ID" -- chmod 755 try

refused="keyctl add_key request_key io_uring_setup io_uring_enter io_uring_register
perf_event_open bpf userfaultfd init_module finit_module delete_module kexec_load
kexec_file_load clock_settime clock_adjtime settimeofday adjtimex open_by_handle_at
syslog acct swapon swapoff iopl ioperm"
ENOSYS=38
out=$(sb exec "$ID" -- ./try $refused getpid 2>&1)
for call in $refused; do
  got=$(echo "$out" | awk -v c="$call" '$1 == c { print $2 }')
  if [ "$got" = unknown ]; then skip "$call is refused" "this build's headers do not have it"; continue; fi
  same "$call is refused with ENOSYS" "$got" "$ENOSYS"
done
same "getpid, not refused, works" "$(echo "$out" | awk '$1 == "getpid" { print $2 }')" 0
if [ "$(uname -m)" = x86_64 ] && "$work/try" i386:keyctl >/dev/null 2>&1; then
  same "keyctl through the i386 ABI (int 0x80) is refused too" \
    "$(sb exec "$ID" -- ./try i386:keyctl | awk '{print $2}')" "$ENOSYS"
else
  skip "keyctl through the i386 ABI is refused" "no i386 ABI on this machine"
fi
jail_status=$(sb exec "$ID" -- sh -c 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status' | tr -s '\t ' ' ')
contains "the jail's commands run under a seccomp filter" "$jail_status" "Seccomp: 2"

# the host's session keyring: a lash started by a process that holds one (as
# under pam_keyinit or a systemd service) with a key in it
cat >"$work/keyring.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL_JOIN_SESSION_KEYRING, KEY_SPEC_SESSION_KEYRING = 1, -3
add_key = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
if libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, b"lash-host-session") < 0:
    sys.exit("no keyring here: errno %d" % ctypes.get_errno())
k = libc.syscall(add_key, b"user", b"lash-host-secret-key", b"hunter2", 7, KEY_SPEC_SESSION_KEYRING)
if k < 0:
    sys.exit("add_key failed: errno %d" % ctypes.get_errno())
os.execvp(sys.argv[1], sys.argv[1:])
PY
host_keys=$(python3 "$work/keyring.py" cat /proc/self/keys 2>&1 || python3 "$work/keyring.py" cat /proc/keys 2>&1)
if echo "$host_keys" | grep -q lash-host-secret-key; then
  S2=$(sb create --timeout 300)
  at_exit "'$LASH' sandbox destroy '$S2' >/dev/null 2>&1"
  jail_keys=$(python3 "$work/keyring.py" "$LASH" sandbox exec "$S2" -- sh -c 'cat /proc/keys 2>&1; echo; cat /proc/self/keys 2>&1' 2>&1)
  lacks "a jail started under a session keyring sees none of its keys" "$jail_keys" "lash-host-secret-key"
  lacks "  nor the host's session keyring" "$jail_keys" "lash-host-session"
else
  skip "a jail started under a session keyring sees none of its keys" "the host has no keyring to test with: $(echo "$host_keys" | head -1)"
fi

# --- again, as an unprivileged user --------------------------------------------
rerun_unprivileged LASH_SECCOMP_NESTED

done_testing
