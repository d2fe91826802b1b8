#!/usr/bin/env bash
# LuaJIT and lash in one process (issue 13's crash: lash_open segfaulted in
# a host that had LuaJIT, the two Luas' lua_* binding to each other).
# examples/luajit-host/host.c opens a LuaJIT state and runs Lua, then runs
# an agent on lash's scripted `test` model whose tool, a C callback, calls
# back into LuaJIT, then uses LuaJIT again. Built three ways: against
# liblash.so and LuaJIT's shared library; against liblash.a and LuaJIT's
# static library (a host that links both statically); and from the luajit
# interpreter through the FFI (examples/luajit-host/ffi_host.lua, the
# route of LÖVE and Neovim), with a tool made by ffi.cast. TAP.
. "$(dirname "$0")/../lib.sh"
B=${LASH_BUILD:-build}
if ! pkg-config --exists luajit 2>/dev/null; then
  skip_all "LuaJIT's development files are missing (Debian: libluajit-5.1-dev)"
fi
for f in "$B/liblash.so" "$B/liblash.a"; do
  [ -e "$f" ] || skip_all "$f is missing (run make)"
done
new_tmp tmp
absb=$(cd "$B" && pwd)
src=examples/luajit-host/host.c
luajit_a=$(pkg-config --variable=libdir luajit)/libluajit-5.1.a
cflags="-O1 -g"   # under make check, the host is sanitized like the library
[ -n "${LASH_SANITIZED:-}" ] && cflags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined"

# check_run NAME LOG RC: the host's three lines say LuaJIT ran, the agent
# called the tool that asked LuaJIT, and LuaJIT still works.
check_run() {
  local name=$1 log=$2 rc=$3
  ok "$rc" "$name: runs (exit $rc$([ "$rc" -gt 128 ] && echo ", signal $((rc - 128))"))"
  grep -q '^luajit: LuaJIT 2\.' "$log"; ok $? "$name: the LuaJIT state ran its Lua first"
  grep -q '^lash 0\.[0-9.]*: {"score":"ada has 142 points (from LuaJIT 2\.' "$log"
  ok $? "$name: the agent's run called the C tool, which asked LuaJIT (answer in the summary)"
  grep -q '^luajit after lash: 143$' "$log"; ok $? "$name: LuaJIT works after lash ran"
  [ $failed -ne 0 ] && sed 's/^/# /' "$log"
}

cc $cflags -Wall -Wextra -Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli $(pkg-config --cflags luajit) -o "$tmp/host" "$src" \
  -L"$absb" -llash -Wl,-rpath,"$absb" $(pkg-config --libs luajit) >"$tmp/log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$tmp/log"
ok $rc "host.c builds with -llash -lluajit-5.1"
libs=$(ldd "$tmp/host" | grep -Eo 'lib(lash|luajit|lua)[^ ]*' | sort -u | tr '\n' ' ')
echo "$libs" | grep -q libluajit && echo "$libs" | grep -q liblash.so.0 && ! echo "$libs" | grep -q 'liblua5'
ok $? "the host loads liblash.so.0 and LuaJIT, and no Lua 5.4 library ($libs)"
(cd "$tmp" && ./host) >"$tmp/run.log" 2>&1
check_run "shared" "$tmp/run.log" $?

if [ -f "$luajit_a" ]; then
  cc $cflags -Wall -Wextra -Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli $(pkg-config --cflags luajit) -o "$tmp/host-static" "$src" \
    "$B/liblash.a" "$luajit_a" $(pkg-config --libs libcurl sqlite3) -lm -ldl >"$tmp/log" 2>&1
  rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$tmp/log"
  ok $rc "host.c links liblash.a and libluajit-5.1.a statically (no duplicate symbol)"
  (cd "$tmp" && ./host-static) >"$tmp/run.log" 2>&1
  check_run "static" "$tmp/run.log" $?
else
  echo "# no $luajit_a: the static link is not checked"
fi

if [ -n "${LASH_SANITIZED:-}" ]; then
  echo "# sanitized build: the luajit interpreter cannot load an ASan library; the FFI route is checked by make test"
elif command -v luajit >/dev/null 2>&1; then
  (cd "$tmp" && luajit "$OLDPWD/examples/luajit-host/ffi_host.lua" "$absb/liblash.so") >"$tmp/ffi.log" 2>&1
  rc=$?
  ok $rc "luajit drives lash through the FFI (exit $rc)"
  grep -q '^lash 0\.[0-9.]* via LuaJIT 2\.[^:]*: status 2 after [0-9]* frames: {"light":"lit lamp 1 (args {})"}$' "$tmp/ffi.log"
  ok $? "the run ended done, its tool an ffi.cast callback"
  grep -q '^lamps: 1$' "$tmp/ffi.log"; ok $? "the callback ran once"
  [ $failed -ne 0 ] && sed 's/^/# /' "$tmp/ffi.log"
else
  echo "# no luajit command: the FFI route is not checked"
fi
done_testing
