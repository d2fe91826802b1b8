#!/usr/bin/env bash
# tests/integration/test_cli_start.sh: the CLI loads libcurl (and its TLS,
# HTTP/2 and Kerberos libraries) only when something makes a request, so
# commands that make none (lash eval, lash sandbox ...) start without them;
# and when libcurl cannot be loaded, a run that needs it fails with a
# message naming the library and the package, not a crash, while the rest
# of the CLI still works.
. "$(dirname "$0")/../lib.sh"
LASH=${LASH_BIN:-$BUILD/bin/lash}
[ -x "$LASH" ] || skip_all "$LASH is not built"

new_tmp work
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config HOME=$work OPENAI_API_KEY=k
unset LASH_CONFIG LASH_SESSIONS_DB
# port 9 (discard) on loopback: nothing listens, a request fails at once
export OPENAI_BASE_URL=http://127.0.0.1:9/v1
SPEC=$(pwd)/examples/hello_tools.lua
mapped='local f = assert(io.open("/proc/self/maps")); local s = f:read("a"); f:close(); return s:find("libcurl", 1, true) and "mapped" or "not mapped"'

same "lash eval: libcurl not mapped" "$("$LASH" eval "$mapped" 2>&1)" "not mapped"
out=$("$LASH" eval "local ok, err = pcall(lash.http.request, {url = 'http://127.0.0.1:9/'}); $mapped" 2>&1)
same "after a request in the same process: libcurl mapped" "$out" "mapped"
out=$("$LASH" run --trust "$SPEC" --model openai:gpt-4o --no-save hi 2>&1); rc=$?
[ "$rc" -ne 0 ]; ok $? "a run against a closed port fails (rc $rc)"
lacks "  with a connection error, not a loading one" "$out" "cannot load libcurl"

# a libcurl.so.4 that is not a library, found first
mkdir -p "$work/badlib"
echo "not an ELF file" >"$work/badlib/libcurl.so.4"
export LD_LIBRARY_PATH=$work/badlib
same "unloadable libcurl: lash eval still works" "$("$LASH" eval 'return 6 * 7' 2>&1)" "42"
out=$("$LASH" --help 2>&1); rc=$?
same "unloadable libcurl: lash --help still works" "$rc" 0
out=$("$LASH" run --trust "$SPEC" --model openai:gpt-4o --no-save hi 2>&1); rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -lt 126 ]; ok $? "unloadable libcurl: a run fails as a run does (rc $rc: not the loader's 127, no signal)"
contains "  naming the library" "$out" "cannot load libcurl"
contains "  and the package to install" "$out" "libcurl4"
out=$("$LASH" eval "local ok, err = pcall(lash.http.request, {url = 'http://127.0.0.1:9/'}); return tostring(err)" 2>&1)
contains "unloadable libcurl: lash.http.request raises the reason" "$out" "lash.http.request: cannot load libcurl"
done_testing
