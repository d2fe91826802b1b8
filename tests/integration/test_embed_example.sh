#!/usr/bin/env bash
# The embedding example (examples/embed): host.c builds with pkg-config
# against the build tree, runs its 60 Hz frame loop while the scripted
# agent builds a village through two C-registered tools, and the host
# reports how many frames' work (lash_step included) took longer than one
# frame budget: a figure, not asserted (nothing here is timed). TAP.
. "$(dirname "$0")/../lib.sh"
B=$(cd "${LASH_BUILD:-build}" && pwd)

cflags="-O2 -g -Wall -Wextra"
if [ -n "${LASH_SANITIZED:-}" ]; then
  cflags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
fi
log=$(mktemp); events=$(mktemp); at_exit 'rm -f "$log" "$events"'
make -s -C examples/embed BUILD="$B" CFLAGS="$cflags" "$B/examples/embed/host" >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "host.c builds with pkg-config flags against the built library"
[ $rc -ne 0 ] && done_testing

(cd examples/embed && "$B/examples/embed/host" village.lua --events "$events") >"$log" 2>&1
rc=$?
ok $rc "the host runs to the end (exit $rc)"
grep -q '^frame    1  entities 0$' "$log"; ok $? "it prints its frame counter"
grep -q '^agent: Built a small village in Green Hills: \[{"id":1,"kind":"house","x":0,"y":0},{"id":2,"kind":"tree","x":2,"y":1},{"id":3,"kind":"rock","x":0,"y":3}\]$' "$log"
ok $? "the agent built the village through the C tools and said so (the hook moved the rock into the level)"
grep -q '^scene: 3 entities$' "$log"; ok $? "the scene holds the three entities"
# the whole events, not the console's cut lines: what is checked cannot
# depend on where a line was cut
grep '"type":"tool_result"' "$events" | grep -q 'spawned rock #3 at (0, 3)'
ok $? "events arrived as JSON, with the host's answers (after its hook's edit)"
# every object, nested ones too, has its keys in sorted order
unsorted=$(python3 -c '
import json, sys
bad = []
def hook(pairs):
    keys = [k for k, _ in pairs]
    if keys != sorted(keys): bad.append(" ".join(keys))
    return dict(pairs)
for line in open(sys.argv[1]):
    json.loads(line, object_pairs_hook=hook)
print("\n".join(bad[:5]))' "$events")
[ -n "$unsorted" ] && printf '%s\n' "$unsorted" | sed 's/^/# keys out of order: /'
[ -s "$events" ]; ok $? "the host wrote every event to its --events file"
[ -z "$unsorted" ]; ok $? "every event's keys come out sorted (byte-for-byte stable)"
late=$(sed -n 's/^late frames: \([0-9]*\) .*/\1/p' "$log")
echo "# $(grep '^late frames' "$log")"
# how many frames ran late is a timing figure (make bench measures it on a
# quiet machine); here only that the host measured and reported it
[ -n "$late" ]; ok $? "the host reports its late frames (${late:-?}; make bench measures them)"
[ $failed -ne 0 ] && sed 's/^/# /' "$log" | tail -40
done_testing
