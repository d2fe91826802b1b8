#!/usr/bin/env bash
# The manual holds: every relative link of README.md and docs/*.md
# resolves (file and heading anchor), every page of docs/ is reachable from
# README, and README's tour does what it says: its YAML spec and its
# commands run (offline, with the test model), its Lua agent runs, and its
# C fragment compiles and links against lash.h and liblash. TAP.
. "$(dirname "$0")/../lib.sh"
new_tmp tmp
chmod o+x "$tmp"   # the jail runs as an unprivileged uid and must reach its state root
export LASH_SANDBOX_ROOT=$tmp/state
LASH=$BUILD/bin/lash
export LASH_SESSIONS_DB=$tmp/sessions.db
# a step that fails leaves the block's sandbox: destroy whatever is left
at_exit 'for d in "$LASH_SANDBOX_ROOT"/lb-*; do [ -d "$d" ] && "$LASH" sandbox destroy "${d##*/}" >/dev/null 2>&1; done'

for f in README.md docs/*.md; do
  out=$(lua5.4 tests/docs/check_links.lua "$f" 2>&1)
  ok $? "every link of $f resolves" || true
  [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'
done

for f in docs/*.md; do
  grep -q "](docs/$(basename "$f"))" README.md
  ok $? "README links $f"
done

# block LANG N: the Nth fenced block of README.md in language LANG.
block() {
  awk -v lang="$1" -v want="$2" '
    on && /^```$/ { on = 0; next }
    on && k == want { print }
    $0 == "```" lang { k++; on = 1 }' README.md
}

block yaml 1 > "$tmp/agent.yaml"
grep -q LocalSandbox "$tmp/agent.yaml"; ok $? "the tour's YAML spec names a sandbox"
out=$("$LASH" run "$tmp/agent.yaml" "x" --model test 2>&1)
rc=$?; ok $rc "the tour's YAML spec runs with the test model"; [ $rc -eq 0 ] || printf '%s\n' "$out" | tail -5 | sed 's/^/# /'

# The tour's first shell block: the line that needs no key, as written.
line=$(block sh 2 | grep -- '--model test')
out=$(bash -c "$line" 2>&1)
rc=$?; ok $rc "the tour's offline command runs: $line"; [ $rc -eq 0 ] || printf '%s\n' "$out" | tail -5 | sed 's/^/# /'

# The sandbox block for orchestrators, each step as written; the agent run
# gets the offline model.
block sh 3 | sed '/ run /{/--model/!s/$/ --model test/}' > "$tmp/steps.sh"
grep -q 'sandbox create' "$tmp/steps.sh"; ok $? "the tour's orchestrator block creates a sandbox"
out=$(bash -e "$tmp/steps.sh" 2>&1)
rc=$?; ok $rc "the tour's orchestrator block runs step by step"; [ $rc -eq 0 ] || printf '%s\n' "$out" | tail -8 | sed 's/^/# /'
left=$(find "$LASH_SANDBOX_ROOT" -mindepth 1 -maxdepth 1 -name 'lb-*' 2>/dev/null | wc -l)
same "the block, run through, leaves no sandbox behind" "$left" 0

block lua 1 | sed 's/model = "[^"]*"/model = "test"/' > "$tmp/agent.lua"
out=$(LUA_CPATH="$BUILD/?.so;;" LUA_PATH="lua/?.lua;lua/?/init.lua;;" lua5.4 "$tmp/agent.lua" 2>&1)
rc=$?
ok $rc "the tour's Lua agent runs with the test model"; [ $rc -eq 0 ] || printf '%s\n' "$out" | tail -5 | sed 's/^/# /'
contains "its tool was called and answered" "$out" '"add"'

{
  echo '#include "lash.h"'
  echo 'static const char *schema = "{\"type\":\"object\"}";'
  echo 'static void spawn_entity(lash_Call *call, const char *args, void *ud) { (void)args; (void)ud; lash_call_return(call, "ok"); }'
  echo 'static void render_frame(void) {}'
  echo 'int main(void) { lash_Run *run = NULL;'
  block c 1
  echo 'lash_close(S); return 0; }'
} > "$tmp/tour.c"
out=$(cc -std=c11 -Wall -Werror -Isrc/7-embed "$tmp/tour.c" -o "$tmp/tour" -L"$BUILD" -llash 2>&1)
rc=$?; ok $rc "the tour's C fragment compiles and links against lash.h and liblash"; [ $rc -eq 0 ] || printf '%s\n' "$out" | head -10 | sed 's/^/# /'

done_testing
