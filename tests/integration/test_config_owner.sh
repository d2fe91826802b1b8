#!/usr/bin/env bash
# tests/integration/test_config_owner.sh: lash trusts a config file and an
# api_key_file only when they are the user's (or root's) and writable by
# nobody else, as ssh and git do: a config another user owns, which points
# api_key_file at a file only this user reads, would otherwise send that
# file's contents as a bearer token. Runs as root and again unprivileged.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"

new_tmp work
chmod 755 "$work"
export HOME=$work
unset XDG_CONFIG_HOME LASH_CONFIG
CFG=$work/.config/lash/config.lua
mkdir -p "${CFG%/*}"
echo "private-key-line" >"$work/key"; chmod 600 "$work/key"
printf 'return { providers = { openai = { base_url = "http://127.0.0.1:9/v1", api_key_file = "%s" } } }\n' \
  "$work/key" >"$CFG"
chmod 644 "$CFG"

out=$("$LASH" config show 2>&1); rc=$?
check "the user's own config file is used (exit $rc)" test "$rc" = 0
contains "  with its key file" "$out" "$work/key"

chmod 664 "$CFG"
out=$("$LASH" config show 2>&1); rc=$?
check "a group-writable config file is refused (exit $rc)" test "$rc" != 0
contains "  naming it and the fix" "$out" "chmod go-w $CFG"
chmod 646 "$CFG"
out=$("$LASH" config show 2>&1); rc=$?
check "a world-writable config file is refused (exit $rc)" test "$rc" != 0
chmod 644 "$CFG"

chmod 666 "$work/key"
out=$("$LASH" run --trust "$(pwd)/examples/hello_tools.lua" --model openai:gpt-4o hi 2>&1); rc=$?
check "a world-writable key file is refused (exit $rc)" test "$rc" != 0
contains "  naming it" "$out" "key file $work/key is writable by everyone"
chmod 600 "$work/key"

if [ "$(id -u)" = 0 ]; then
  chown 65534 "$CFG"
  out=$("$LASH" config show 2>&1); rc=$?
  check "as root, a config file owned by another user is refused (exit $rc)" test "$rc" != 0
  contains "  saying whose it is" "$out" "belongs to uid 65534"
  chown 0 "$CFG"
  chown 65534 "$work/key"
  out=$("$LASH" run --trust "$(pwd)/examples/hello_tools.lua" --model openai:gpt-4o hi 2>&1); rc=$?
  check "as root, a key file owned by another user is refused (exit $rc)" test "$rc" != 0
  contains "  naming it" "$out" "key file $work/key belongs to uid 65534"
  lacks "  and no request was tried" "$out" "connect"
fi

rerun_unprivileged LASH_CONFIG_OWNER_UNPRIV
done_testing
