#!/usr/bin/env bash
# tests/integration/test_private_state.sh: another local user cannot read
# your conversations. Whatever the umask, the sessions database, its WAL and
# shared memory are 0600 and the state directory is not readable by others
# (0700, or 0711 when it holds the sandboxes a jail's uid must reach); an
# older, wider database is tightened; a link planted where the database goes
# and (as root) another user's file there are refused, naming the file.
# Runs as root and again as an unprivileged uid.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"

new_tmp work
chmod 755 "$work"
export HOME=$work XDG_STATE_HOME= XDG_CONFIG_HOME= LASH_SESSIONS_DB=
unset XDG_STATE_HOME XDG_CONFIG_HOME LASH_SESSIONS_DB
ST=$work/.local/state/lash
mode() { stat -c %a "$1"; }
spec=$work/a.lua
printf 'return lash.agent { model = lash.script_model { "hi" } }\n' >"$spec"

(umask 022; "$LASH" run "$spec" hello >/dev/null 2>"$work/err")
check "a run under umask 022 saves its session" test -s "$ST/sessions.db"
same "  sessions.db is 0600" "$(mode "$ST/sessions.db")" 600
for f in "$ST/sessions.db-wal" "$ST/sessions.db-shm"; do
  [ -e "$f" ] && same "  ${f##*/} is 0600" "$(mode "$f")" 600
done
check "  the state directory is not readable or writable by others" \
  test $((8#$(mode "$ST") & 8#066)) = 0

chmod 644 "$ST"/sessions.db*
chmod 755 "$ST"
(umask 022; "$LASH" sessions list >/dev/null 2>&1)
same "an older 0644 sessions.db is tightened to 0600" "$(mode "$ST/sessions.db")" 600
check "  and a 0755 state directory loses others' read" test $((8#$(mode "$ST") & 8#066)) = 0

rm -f "$ST"/sessions.db*
echo "not yours" >"$work/target"; chmod 644 "$work/target"
ln -s "$work/target" "$ST/sessions.db"
out=$("$LASH" sessions list 2>&1); rc=$?
check "a link planted as sessions.db is refused (exit $rc)" test "$rc" != 0
contains "  naming the link" "$out" "sessions.db is a symbolic link"
same "  its target is untouched" "$(cat "$work/target") $(mode "$work/target")" "not yours 644"
rm -f "$ST/sessions.db"

if [ "$(id -u)" = 0 ]; then
  : >"$ST/sessions.db"; chown 65534:65534 "$ST/sessions.db"
  out=$("$LASH" sessions list 2>&1); rc=$?
  check "as root, a sessions.db owned by another user is refused (exit $rc)" test "$rc" != 0
  contains "  saying whose it is" "$out" "belongs to uid 65534"
  rm -f "$ST/sessions.db"
fi

rerun_unprivileged LASH_PRIVATE_UNPRIV
done_testing
