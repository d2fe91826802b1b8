#!/usr/bin/env bash
# test: alone (machine-wide cgroups, mounts or loop devices; see tests/run.sh)
# tests/integration/test_host_paths.sh: host-side operations on the paths a
# sandbox controls (its workspace and /tmp) never follow a link the sandbox
# wrote. A command in the sandbox swaps a directory for a symlink to a host
# directory it cannot see (renameat2 RENAME_EXCHANGE in a tight loop) while
# the host snapshots, restores and destroys the sandbox: no byte of the host
# directory may reach a snapshot or a sandbox made from one, nothing on the
# host may change, and where the sandbox has a cgroup the snapshot is taken
# frozen, so it holds the tree whole. Run as root, then again as an
# unprivileged uid (where the host directory is the caller's own).
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}

if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then skip_all "no bubblewrap jail here: ${probe#no }"; fi
command -v python3 >/dev/null || skip_all "python3 is missing (the racer is a python3 script)"

work=$(mktemp -d /tmp/lash-hostpaths.XXXXXX)
chmod 711 "$work"
export LASH_SANDBOX_ROOT=$work/state
at_exit "rm -rf '$work'"
sb() { "$LASH" sandbox "$@"; }

ID=$(sb create --timeout 600)
check "create a sandbox" test -n "$ID"
at_exit "'$LASH' sandbox destroy '$ID' >/dev/null 2>&1"
box=$LASH_SANDBOX_ROOT/$ID

# the host directory: under the state root, which every jail has masked;
# as root it is root's alone (0700)
secret=$LASH_SANDBOX_ROOT/.hostsecret
mkdir -m 700 "$secret"
MARK="lash-host-secret-$$-$RANDOM"
for i in $(seq 50); do echo "$MARK" >"$secret/s$i"; done
chmod 600 "$secret"/s*
hostview=$(stat -c '%a %U %s' "$secret" "$secret/s1")

# The racer: d/ (a directory of 50 files named as the host directory's are)
# and s (a symlink to the host directory) trade places as fast as the kernel
# allows, until stop appears: a copy that opens d/s7 by its path while d is
# the link reads the host's s7.
cat >"$work/racer.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1])
os.makedirs("d", exist_ok=True)
for i in range(50):
    with open("d/s%d" % (i + 1), "w") as f: f.write("inside\n")
if not os.path.islink("s"): os.symlink(sys.argv[2], "s")
open("ready", "w").close()
n = 0
while not os.path.exists("stop"):
    libc.renameat2(-100, b"d", -100, b"s", 2)   # RENAME_EXCHANGE
    n += 1
print(n)
PY
sb write "$ID" racer.py <"$work/racer.py"
( sb exec "$ID" --timeout 300 -- python3 racer.py /workspace "$secret" >"$work/racer.out" 2>&1 & )
for _ in $(seq 300); do sb stat "$ID" ready >/dev/null 2>&1 && break; sleep 0.1; done
check "the racer runs in the sandbox" sb stat "$ID" ready

has_cgroup=0; [ -f "$box/cgroup" ] && has_cgroup=1
leaks=0; torn=0; snaps=()
for i in $(seq 24); do
  snap=$(sb snapshot "$ID" 2>"$work/snap.err") || { echo "# snapshot failed: $(cat "$work/snap.err")"; continue; }
  snaps+=("$snap")
  dir=$LASH_SANDBOX_ROOT/snapshots/$snap
  if grep -rqs "$MARK" "$dir"; then leaks=$((leaks + 1)); leaked=${leaked:-$snap}; fi
  # whole: one of d and s is the directory with its 50 files, the other the link
  whole=0
  for pair in "d s" "s d"; do
    set -- $pair
    if [ -d "$dir/$1" ] && [ ! -L "$dir/$1" ] && [ "$(ls "$dir/$1" | wc -l)" = 50 ] &&
       [ -L "$dir/$2" ] && [ "$(readlink "$dir/$2")" = "$secret" ]; then whole=1; fi
  done
  [ "$whole" = 1 ] || torn=$((torn + 1))
done
check "24 snapshots were taken while the racer ran" test "${#snaps[@]}" = 24
same "no snapshot holds a byte of the host directory the racer's link points to" "$leaks" 0
if [ "$has_cgroup" = 1 ]; then
  same "every snapshot holds the tree whole (taken with the sandbox frozen, cgroup v$(head -1 "$box/cgroup"))" "$torn" 0
elif [ -n "${LASH_HOSTPATHS_CGROUP:-}" ]; then
  not_ok "the sandbox has a cgroup v$LASH_HOSTPATHS_CGROUP group to freeze"
else
  skip "every snapshot holds the tree whole" "this sandbox has no cgroup to freeze (not root, nothing delegated)"
fi
check "the racer was still running after them (thawed)" test ! -e "$work/racer.out" -o ! -s "$work/racer.out"

# a sandbox made from each snapshot, while the racer still runs: it can
# never read the host's file through what the snapshot holds
R=$(sb create --timeout 600 --from-snapshot "${leaked:-${snaps[0]}}")
at_exit "'$LASH' sandbox destroy '$R' >/dev/null 2>&1"
out=$(sb exec "$R" -- sh -c 'cat d/s1 s/s1 2>/dev/null; grep -rhs . . 2>/dev/null' 2>&1)
lacks "a sandbox made from a snapshot reads nothing of the host directory" "$out" "$MARK"
rown=$(stat -c %u "$LASH_SANDBOX_ROOT/$R/workspace/racer.py" 2>/dev/null)
wown=$(stat -c %u "$LASH_SANDBOX_ROOT/$R/workspace" 2>/dev/null)
same "the restored files belong to the new sandbox" "$rown" "$wown"

sb exec "$ID" -- touch stop >/dev/null 2>&1
for _ in $(seq 100); do [ -s "$work/racer.out" ] && break; sleep 0.1; done
check "the racer stopped" test -s "$work/racer.out"
echo "# racer exchanges: $(head -c 64 "$work/racer.out")"

# destroy while a directory of mode 000 trades places with a link to the
# host directory: the host directory keeps its mode and files
cat >"$work/racer2.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1])
for k in range(20):
    os.makedirs("z%d/in" % k, exist_ok=True)
    os.chmod("z%d/in" % k, 0)
    os.symlink(sys.argv[2], "l%d" % k)
open("ready2", "w").close()
while True:
    for k in range(20):
        libc.renameat2(-100, b"z%d/in" % k, -100, b"l%d" % k, 2)
PY
sb write "$ID" racer2.py <"$work/racer2.py"
( sb exec "$ID" --timeout 300 -- python3 racer2.py /workspace "$secret" >/dev/null 2>&1 & )
for _ in $(seq 300); do sb stat "$ID" ready2 >/dev/null 2>&1 && break; sleep 0.1; done
sb destroy "$ID"
same "destroy left the host directory as it was" "$(stat -c '%a %U %s' "$secret" "$secret/s1")" "$hostview"
same "and all its files" "$(ls "$secret" | wc -l)" 50

for s in "${snaps[@]}"; do rm -rf "${LASH_SANDBOX_ROOT:?}/snapshots/$s"; done

# --- again, as an unprivileged user --------------------------------------------
rerun_unprivileged LASH_HOSTPATHS_NESTED

done_testing
