#!/usr/bin/env bash
# tests/integration/test_sandbox_reclaim.sh: opening a local state root
# reclaims sandboxes that expired a while ago, without `lash sandbox gc`:
# bounded per open (the rest wait for the next one), safe with lash
# processes opening the root at once, never touching a live sandbox, one
# within the grace after its expiry, one held by a holder, one whose lock
# another process holds, or one still running a command. TAP; skips
# without a jail.
. "$(dirname "$0")/../lib.sh"
LASH=$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
command -v python3 >/dev/null || skip_all "no python3 to age sandboxes"
probe=$(jail_probe)
[ "$probe" = yes ] || skip_all "no bubblewrap jail here"
work=$(mktemp -d /tmp/lash-reclaim.XXXXXX); chmod 711 "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
at_exit cleanup
export LASH_SANDBOX_ROOT=$work/state
sb() { timeout 120 "$LASH" sandbox "$@"; }   # the timeout is a hang guard only

# age ID SECONDS [HOLDER]: make ID have expired SECONDS ago (both the
# metadata's expiry and its stamp), optionally with a holder mark
age() {
  python3 - "$LASH_SANDBOX_ROOT/$1/meta.json" "$2" "${3:-}" <<'PY'
import json, os, sys, time
path, ago, holder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = json.load(open(path))
m["expires_at"] = int(time.time()) - ago
m["tags"]["lash_expires_at"] = str(m["expires_at"])
if holder:
    m["tags"]["lash_owner"] = "o"
    m["tags"]["lash_holder"] = holder
open(path + ".new", "w").write(json.dumps(m))
os.replace(path + ".new", path)
PY
}
present() { [ -d "$LASH_SANDBOX_ROOT/$1" ]; }
count_present() { local c=0 id; for id in "$@"; do present "$id" && c=$((c+1)); done; echo "$c"; }

# set up with reclaiming off (every lash process would reclaim on open)
export LASH_SANDBOX_RECLAIM=off
LIVE=$(sb create --timeout 600)
GRACE=$(sb create --timeout 600)
HELD=$(sb create --timeout 600); age "$HELD" 3600 "dag/run/task"
LOCKED=$(sb create --timeout 600)
BUSY=$(sb create --timeout 600)
OLD=()
for _ in $(seq 10); do id=$(sb create --timeout 600); age "$id" 3600; OLD+=("$id"); done
# another process holds LOCKED's lock (as a lash operation reading it would)
# -o: the lock stays with flock itself (not its sleep), so killing flock frees it
flock -s -o "$LASH_SANDBOX_ROOT/$LOCKED/lock" sleep 300 & pids+=($!)
age "$LOCKED" 3600
# BUSY has a command still running (a job record whose process is alive)
sleep 300 & jp=$!; pids+=($jp)
mkdir -p "$LASH_SANDBOX_ROOT/$BUSY/jobs"
: >"$LASH_SANDBOX_ROOT/$BUSY/jobs/$jp-$(awk '{print $22}' /proc/$jp/stat)"
age "$BUSY" 3600
for _ in $(seq 100); do flock -n "$LASH_SANDBOX_ROOT/$LOCKED/lock" true || break; sleep 0.1; done

sb list >/dev/null
check "LASH_SANDBOX_RECLAIM=off: nothing is reclaimed" test "$(count_present "${OLD[@]}")" = 10
unset LASH_SANDBOX_RECLAIM

# one open: some reclaimed, at most the cap (8), the rest left for later
age "$GRACE" 5
sb list --json >"$work/list1"; rc=$?
left=$(count_present "${OLD[@]}")
check "one expired within the grace is kept (its owner may be tearing it down)" present "$GRACE"
check "  and says it expired" sh -c "$LASH sandbox exec $GRACE -- true 2>&1 | grep -q 'expired at'"
check "the first open exits 0 (got $rc) while another process holds a lock" test "$rc" = 0
check "the first open reclaims at most 8 expired sandboxes, leaving the rest ($left of 10 left)" \
  test "$left" -ge 2 -a "$left" -lt 10
check "  and lists none it reclaimed" \
  python3 -c "import json,sys; ids={e['id'] for e in json.load(open('$work/list1'))}; sys.exit(0 if len(ids & set('${OLD[*]}'.split())) == $left else 1)"
# further opens (each lash process opens the root once) reclaim the rest
for _ in $(seq 20); do [ "$(count_present "${OLD[@]}")" = 0 ] && break; sb list >/dev/null; done
check "later opens reclaim the rest" test "$(count_present "${OLD[@]}")" = 0
check "a live sandbox is never touched" present "$LIVE"
check "one held by a holder is kept" present "$HELD"
check "one whose lock another process holds is kept (and not waited for)" present "$LOCKED"
check "one still running a command is kept" present "$BUSY"
check "the live one still works" sb exec "$LIVE" -- true
check "no trash left behind" test "$(ls -A "$LASH_SANDBOX_ROOT" | grep -c '^\.trash')" = 0

# lash processes opening the root at once: every one succeeds, each
# sandbox is reclaimed once, nothing is left half-removed
OLD=()
for _ in $(seq 12); do id=$(LASH_SANDBOX_RECLAIM=off sb create --timeout 600); age "$id" 3600; OLD+=("$id"); done
cp=()
for i in 1 2 3 4; do sb list >"$work/c$i" 2>&1 & cp+=($!); done
crc=0; for p in "${cp[@]}"; do wait "$p" || crc=1; done
check "four processes opening the root at once all exit 0" test "$crc" = 0
check "  and reclaim between them at most 4 x 8 ($(count_present "${OLD[@]}") of 12 left)" \
  test "$(count_present "${OLD[@]}")" -lt 12
for _ in $(seq 20); do [ "$(count_present "${OLD[@]}")" = 0 ] && break; sb list >/dev/null; done
check "  later opens reclaim the rest" test "$(count_present "${OLD[@]}")" = 0
check "  no trash left behind" test "$(ls -A "$LASH_SANDBOX_ROOT" | grep -c '^\.trash')" = 0
check "  nothing else touched" sh -c "[ -d '$LASH_SANDBOX_ROOT/$LIVE' ] && [ -d '$LASH_SANDBOX_ROOT/$HELD' ] && [ -d '$LASH_SANDBOX_ROOT/$BUSY' ]"

# gc, asked for, still removes every expired one (the lock released first)
for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=()
sb gc | sort >"$work/gc"
check "gc removes the held, the locked, the busy and the one past its expiry" \
  test "$(wc -l <"$work/gc")" = 4
check "  and leaves the live one" present "$LIVE"
sb destroy "$LIVE"
done_testing
