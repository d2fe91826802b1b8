#!/usr/bin/env bash
# tests/integration/test_sandbox_cli.sh: `lash sandbox ...` for
# orchestrators: every subcommand, its output and its documented exit code,
# and two processes racing to attach (exactly one wins). TAP; skips cleanly
# without a bubblewrap jail.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}

if [ ! -x "$LASH" ]; then skip_all "$LASH is not built"; fi
probe=$(jail_probe)
if [ "${probe%% *}" != "yes" ]; then
  skip_all "no bubblewrap jail here: ${probe#no }"
fi

work=$(mktemp -d /tmp/lash-cli.XXXXXX)
chmod 711 "$work"
at_exit 'rm -rf "$work"'
export LASH_SANDBOX_ROOT=$work/state
sb() { "$LASH" sandbox "$@"; }

check "list --json with no sandboxes is an empty array" test "$(sb list --json)" = "[]"

# create
ID=$(sb create --owner pipeline/run1 --timeout 300 --tag team=data --env GREETING=hi)
check "create prints an id (lb- + 20 base32)" sh -c "echo '$ID' | grep -qE '^lb-[a-z2-7]{20}$'"
check "it lives under the state root" test -f "$LASH_SANDBOX_ROOT/$ID/meta.json"

# exec
out=$(sb exec "$ID" -- sh -c 'echo "$GREETING $X"; echo to-stderr >&2; exit 7' 2>"$work/err"); rc=$?
check "exec passes the command's exit code (7)" test "$rc" = 7
check "  stdout to stdout, with the sandbox's env" test "$out" = "hi "
check "  stderr to stderr" test "$(cat "$work/err")" = "to-stderr"
out=$(sb exec "$ID" --env X=there --cwd sub/.. -- sh -c 'echo "$GREETING $X"; pwd'); rc=$?
check "exec --env and --cwd" test "$out" = "hi there
/workspace" -a "$rc" = 0
out=$(printf 'line1\nline2\n' | sb exec "$ID" --stdin -- wc -l)
check "exec --stdin feeds the command" test "$out" = 2
out=$(sb exec "$ID" --max-output-bytes 10 -- sh -c 'seq 1 1000' 2>"$work/err")
check "exec --max-output-bytes keeps the tail and says so" \
  test "$out" = "
999
1000" -a -n "$(grep 'stdout truncated' "$work/err")"
sb exec "$ID" --timeout 1 -- sleep 30 2>"$work/err"; rc=$?
check "a command past its deadline exits 124" test "$rc" = 124 -a -n "$(grep 'timed out after 1s' "$work/err")"
sb exec "$ID" -- no-such-command-lash 2>"$work/err"; rc=$?
check "a command that cannot start exits 125, saying why" \
  test "$rc" = 125 -a -n "$(grep 'could not start' "$work/err")"
sb exec lb-aaaaaaaaaaaaaaaaaaaa -- true 2>/dev/null; rc=$?
check "exec in a sandbox that does not exist exits 3 (unavailable)" test "$rc" = 3
# a program under /tmp exists on the host but not in the jail (its own
# /tmp): both jailed ways of running it say so and how to fix it
printf '#!/bin/sh\necho hi\n' > "$work/prog" && chmod 755 "$work/prog"
sb exec "$ID" -- "$work/prog" 2>"$work/err"; rc=$?
check "exec of a host program under /tmp exits 125, naming the masking and the fix" \
  test "$rc" = 125 -a -n "$(grep "is on the host, but a sandbox does not see /tmp: every sandbox has its own /tmp, and /var/tmp, /home, /root and /run are masked. Put the program where the sandbox sees the host" "$work/err")"
"$LASH" mcp tools --sandbox -- "$work/prog" 2>"$work/err"; rc=$?
check "a jailed MCP server under /tmp: the error names the masking too (not a bare execvp)" \
  test "$rc" = 1 -a -n "$(grep "execvp .*No such file.*is on the host, but a sandbox does not see /tmp" "$work/err")"
out=$(sb exec "$ID" -- sh -c 'test -d /opt && test -d /usr/local && echo seen')
check "  the fix's directories are seen in the jail" test "$out" = seen

# exec --json: the command's code and lash's own status apart
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
out=$(sb exec "$ID" --json -- sh -c 'echo out; printf "\377" >&2; exit 3'); rc=$?
check "exec --json: a command's exit 3 is data, lash exits 0" test "$rc" = 0
check "  one result line: exit code, stdout, stderr (bytes as latin1, said)" test "$(echo "$out" | jq_py \
  "d['type'], d['exit_code'], repr(d['stdout']), d['stderr'] == '\\xff', d['stderr_encoding'], d['timed_out']")" \
  = "result 3 'out\\n' True latin1 False"
out=$(sb exec "$ID" --json --timeout 1 -- sleep 30); rc=$?
check "exec --json: a timeout is the command's outcome (timed_out), lash exits 0" \
  test "$rc" = 0 -a "$(echo "$out" | jq_py "d['timed_out']")" = True
out=$(sb exec lb-aaaaaaaaaaaaaaaaaaaa --json -- true 2>/dev/null); rc=$?
check "exec --json: lash's own failure is an exit line with its kind (unavailable, 3)" \
  test "$rc" = 3 -a "$(echo "$out" | jq_py "d['type'], d['kind'], d['exit_code']")" = "exit unavailable 3"
out=$(sb exec "$ID" --json -- no-such-command-lash 2>/dev/null); rc=$?
check "exec --json: a command that cannot start is lash's exec_failed (125)" \
  test "$rc" = 125 -a "$(echo "$out" | jq_py "d['kind'], 'could not start' in d['message']")" = "exec_failed True"

# files
printf 'bin\000ary\nbytes' | sb write "$ID" /workspace/data/in.bin; rc=$?
check "write from stdin (parents created)" test "$rc" = 0
check "read gives the bytes back exactly" \
  test "$(sb read "$ID" data/in.bin | od -An -c | tr -s ' ')" = "$(printf 'bin\000ary\nbytes' | od -An -c | tr -s ' ')"
sb read "$ID" data/in.bin --max-bytes 3 >/dev/null 2>"$work/err"; rc=$?
check "read --max-bytes refuses a bigger file with exit 1 and the sizes" \
  test "$rc" = 1 -a -n "$(grep "is 13B, over the 3B read limit" "$work/err")"
sb read "$ID" /nope >/dev/null 2>&1; rc=$?
check "read of a missing file exits 1" test "$rc" = 1
sb exec "$ID" -- sh -c 'mkdir -p b_dir; touch a_file Z_file' >/dev/null
check "ls sorts by bytes and marks directories" \
  test "$(sb ls "$ID" | tr '\n' ' ')" = "Z_file a_file b_dir/ data/ "
check "stat describes a path" sh -c "$LASH sandbox stat $ID data/in.bin | grep -q '^kind=file size=13 mode=0644'"

# tags
check "tags prints sorted k=v lines with the reserved stamps" \
  test "$(sb tags "$ID" | cut -d= -f1 | tr '\n' ' ')" = "lash_expires_at lash_network lash_owner lash_workdir team "
check "tags --json is JSON" sh -c "$LASH sandbox tags $ID --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"lash_owner\"]==\"pipeline/run1\"'"
check "tags --json and list --json have their keys sorted" sh -c "{ $LASH sandbox tags $ID --json; $LASH sandbox list --json; } | /usr/bin/python3 -c '
import json, sys
def hook(pairs):
    keys = [k for k, _ in pairs]
    assert keys == sorted(keys), keys
    return dict(pairs)
for line in sys.stdin: json.loads(line, object_pairs_hook=hook)'"

# attach / release, and a race
sb attach "$ID" --owner wrong/run --holder x 2>/dev/null; rc=$?
check "attach with the wrong owner exits 5" test "$rc" = 5
sb attach "$ID" --owner pipeline/run1 --holder pipeline/run1/a >/dev/null; rc=$?
check "attach with the owner exits 0" test "$rc" = 0
sb attach "$ID" --owner pipeline/run1 --holder pipeline/run1/b 2>/dev/null; rc=$?
check "another holder is refused (5)" test "$rc" = 5
check "release by another holder clears nothing" \
  test "$(sb release "$ID" --holder pipeline/run1/b)" = "not held by pipeline/run1/b"
check "release by the holder clears its mark" test "$(sb release "$ID" --holder pipeline/run1/a)" = released
flock -x "$LASH_SANDBOX_ROOT/$ID/lock" sleep 1 &
locker=$!
sleep 0.2
sb attach "$ID" --owner pipeline/run1 --holder racer/1 >"$work/r1" 2>&1 & p1=$!
sb attach "$ID" --owner pipeline/run1 --holder racer/2 >"$work/r2" 2>&1 & p2=$!
wait "$p1"; r1=$?
wait "$p2"; r2=$?
wait "$locker"
check "two processes racing to attach: exactly one wins ($r1 $r2)" \
  test "$((r1 == 0 ? 1 : 0))$((r2 == 0 ? 1 : 0))" = 10 -o "$((r1 == 0 ? 1 : 0))$((r2 == 0 ? 1 : 0))" = 01
check "  the loser is refused with 5" test "$((r1 + r2))" = 5
holder=$(sb tags "$ID" | grep '^lash_holder=' | cut -d= -f2)
check "  and the winner holds it ($holder)" sh -c "echo '$holder' | grep -qE '^racer/[12]$'"

# list, gc, destroy
check "list shows it with its owner and holder" \
  sh -c "$LASH sandbox list | grep -q \"^$ID	running	expires .*owner=pipeline/run1	holder=$holder\""
SHORT=$(sb create --timeout 1)
sleep 1.2
sb exec "$SHORT" -- true 2>"$work/err"; rc=$?
check "an expired sandbox refuses commands (3, expired)" test "$rc" = 3 -a -n "$(grep expired "$work/err")"
sb tags "$SHORT" >/dev/null 2>&1; rc=$?
check "  and other operations with exit 3 (unavailable)" test "$rc" = 3
check "gc removes it and prints its id" test "$(sb gc)" = "$SHORT"
check "gc leaves live sandboxes alone" test -d "$LASH_SANDBOX_ROOT/$ID"
sb destroy "$ID"; r1=$?
sb destroy "$ID"; r2=$?
check "destroy exits 0, and again for a sandbox already gone" test "$r1$r2" = 00
sb tags "$ID" >/dev/null 2>&1; rc=$?
check "a destroyed sandbox is unavailable (3)" test "$rc" = 3
# (but the disk templates: the next sandbox's quota is a copy of one; and
# the no-quota warning's marker)
check "nothing left under the state root" test "$(ls -A "$LASH_SANDBOX_ROOT" | grep -cvx '[.]disk-templates\|[.]no-disk-quota')" = 0

# usage
sb frobnicate >/dev/null 2>&1; r1=$?
sb exec >/dev/null 2>&1; r2=$?
sb create --network maybe >/dev/null 2>&1; r3=$?
sb create --timeout soon >/dev/null 2>&1; r4=$?
check "usage errors exit 2" test "$r1$r2$r3$r4" = 2222
sb create --workdir relative/dir >/dev/null 2>"$work/err"; rc=$?
check "a bad value the binding refuses exits 2 with the reason" \
  test "$rc" = 2 -a -n "$(grep 'absolute path' "$work/err")"
sb create --isolation none >/dev/null 2>"$work/err"; rc=$?
check "isolation none without --network on is refused, naming the fix (1)" \
  test "$rc" = 1 -a -n "$(grep 'network = "on"' "$work/err")"
check "--help documents the exit codes" sh -c "$LASH sandbox --help | grep -q '^exit codes:'"

# snapshots: prepare one workspace, fork it into several sandboxes
P=$(sb create)
printf 'prepared\n' | sb write "$P" input/data.txt
SNAP=$(sb snapshot "$P"); rc=$?
check "snapshot prints a snapshot id ($SNAP)" test "$rc" = 0 -a -n "$(echo "$SNAP" | grep '^ls-')"
printf 'later\n' | sb write "$P" input/data.txt
F1=$(sb create --from-snapshot "$SNAP"); F2=$(sb create --from-snapshot "$SNAP")
check "a fork starts from the snapshot, not from later changes" \
  test "$(sb read "$F1" input/data.txt)" = prepared
sb exec "$F1" -- sh -c 'echo mine > input/data.txt' >/dev/null
check "forks diverge on their own" test "$(sb read "$F2" input/data.txt)" = prepared
sb create --from-snapshot ls-aaaaaaaaaaaaaaaaaaaa >/dev/null 2>"$work/err"; rc=$?
check "an unknown snapshot is refused, saying where snapshots come from (1)" \
  test "$rc" = 1 -a -n "$(grep 'lash sandbox snapshot ID' "$work/err")"
sb create --idle-timeout 60 >/dev/null 2>"$work/err"; rc=$?
check "the local backend refuses --idle-timeout it cannot enforce" \
  test "$rc" = 2 -a -n "$(grep 'cannot enforce idle_timeout' "$work/err")"
check "an option error names no line of lash's own Lua" \
  test -z "$(grep -E '\.lua:[0-9]+:' "$work/err")"
sb create --gpu a10g >/dev/null 2>"$work/err"; rc=$?
check "a Modal-only option is refused on the local backend, naming it" \
  test "$rc" = 2 -a -n "$(grep 'does not take the option gpu' "$work/err")"
for x in "$P" "$F1" "$F2"; do sb destroy "$x"; done

done_testing
