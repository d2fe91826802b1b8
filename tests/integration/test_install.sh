#!/usr/bin/env bash
# `make install` into a staging DESTDIR, the prefix then moved elsewhere:
# the installed lash.pc (relative to its own directory) still gives the
# right flags, lash.h compiles with no Lua headers anywhere on the include
# path, a C++17 host (examples/cpp/host.cpp, including lash.h as is) builds
# with `pkg-config --cflags --libs lash` and runs an agent that calls its
# tool, and the installed CLI runs; then, with the installed Lua files
# removed, the host and the CLI still run (the modules are compiled in),
# and the host links the installed liblash.a statically. TAP.
. "$(dirname "$0")/../lib.sh"
new_tmp tmp
log=$tmp/log

make -s install DESTDIR="$tmp/stage" PREFIX=/opt/lash >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "make install DESTDIR=... PREFIX=/opt/lash"
mv "$tmp/stage/opt/lash" "$tmp/moved"
P=$tmp/moved
for f in lib/liblash.so lib/liblash.so.0 lib/liblash.a include/lash.h include/lash_lua.h \
         lib/pkgconfig/lash.pc bin/lash share/lash/lua/lash/init.lua lib/lua/5.4/lash/core.so \
         share/lua/5.1/lash_ffi.lua share/man/man1/lash.1; do
  [ -e "$P/$f" ]; ok $? "installed $f"
done
# the man page is made from the CLI's help: every command and the exit codes
page=$P/share/man/man1/lash.1
for w in '^\.SH EXIT STATUS' '^\.B 124$' '^\.SS lash sandbox$' '^\.SH ENVIRONMENT'; do
  grep -q "$w" "$page"; ok $? "lash.1 has $w"
done
if command -v man >/dev/null 2>&1; then
  out=$(MANPAGER=cat MANWIDTH=80 man -l "$page" 2>&1)
  echo "$out" | grep -q 'EXIT STATUS' && ! echo "$out" | grep -q 'warning'
  ok $? "man -l renders lash.1 without warnings"
else
  skip "man is missing: lash.1 not rendered"
fi
soname=$(readelf -d "$P/lib/liblash.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = liblash.so.0 ]; ok $? "the library's soname is liblash.so.0 (got '$soname')"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
libdir=$(pkg-config --variable=libdir lash)
[ "$(cd "$libdir" && pwd)" = "$(cd "$P/lib" && pwd)" ]; ok $? "lash.pc follows the moved prefix (libdir $libdir)"

printf '#include "lash.h"\nint main(void) { return lash_version() == 0; }\n' > "$tmp/plain.c"
cc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$P/include" "$tmp/plain.c" 2>"$log"
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "lash.h compiles as C99 with only the C standard headers"
g++ -std=c++17 -Wall -Wextra -pedantic -Werror -fsyntax-only -x c++ -I"$P/include" "$tmp/plain.c" 2>"$log"
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "lash.h compiles as C++17 as is"

g++ -std=c++17 -Wall -Wextra -O1 -o "$tmp/cpphost" examples/cpp/host.cpp $(pkg-config --cflags --libs lash) \
  -Wl,-rpath,"$libdir" >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "the C++17 host builds with pkg-config --cflags --libs lash"
(cd "$tmp" && ./cpphost) >"$log" 2>&1
rc=$?
ok $rc "the C++17 host runs its agent (exit $rc)"
grep -q '^status 2: Stocked: added sword (1 items)$' "$log"; ok $? "the agent called the C++ tool and answered with its result"
grep -q '^inventory: 1$' "$log"; ok $? "the tool changed the host's state"
[ $failed -ne 0 ] && sed 's/^/# /' "$log"

out=$(cd "$tmp" && "$P/bin/lash" eval 'return 1 + 1' 2>&1); ok $? "the installed CLI runs from the moved prefix ($out)"

# A host with its own Lua 5.4 (the system's liblua5.4) attaches lash to its
# state: liblash's hidden Lua works on it (same release), valgrind-clean
# where valgrind is.
cat > "$tmp/attach.c" <<'C_EOF'
#include "lash_lua.h"
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
int main(void) {
  lua_State *L = luaL_newstate();
  lash_State *S;
  lash_Run *run = NULL;
  const char *out = NULL;
  luaL_openlibs(L);
  S = lash_attach(L, NULL);
  if (lash_load_spec_string(S, "return { model = 'test', instructions = 'x' }", "a.lua") != LASH_OK ||
      lash_run_start(S, "hi", NULL, &run) != LASH_OK || lash_run(S) < 0) {
    fprintf(stderr, "lash: %s\n", lash_errmsg(S));
    return 1;
  }
  lash_run_result(run, &out, NULL);
  printf("status %d: %s\n", lash_run_status(run), out ? out : "-");
  if (luaL_dostring(L, "return require('lash').spawn(function() return 6 * 7 end):join()")) return 1;
  printf("host task: %d\n", (int)lua_tointeger(L, -1));
  lash_run_free(run);
  lash_close(S);
  lua_close(L);
  return 0;
}
C_EOF
cc -std=c99 -Wall -o "$tmp/attach" "$tmp/attach.c" $(pkg-config --cflags --libs lash lua5.4) -Wl,-rpath,"$libdir" >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "a Lua 5.4 host builds with pkg-config --cflags --libs lash lua5.4"
vg=; command -v valgrind >/dev/null 2>&1 && vg="valgrind -q --error-exitcode=9 --leak-check=no"
(cd "$tmp" && $vg ./attach) >"$log" 2>&1
rc=$?; grep -q '^status 2: success (no tool calls)$' "$log" && grep -q '^host task: 42$' "$log" || rc=1
[ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "it attaches lash to its own lua_State, runs an agent and a task of its own${vg:+ (under valgrind)}"

lua_a=$(pkg-config --variable=libdir lua5.4)/liblua5.4.a
if [ -f "$lua_a" ]; then
  cc -std=c99 -Wall -o "$tmp/attach-static" "$tmp/attach.c" $(pkg-config --cflags lash lua5.4) \
    "$P/lib/liblash.a" "$lua_a" $(pkg-config --libs libcurl sqlite3) -lm -ldl >"$log" 2>&1
  rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
  ok $rc "the same host links liblash.a and the system's static liblua5.4.a: two Luas with the same symbol names, no clash"
  (cd "$tmp" && ./attach-static) >"$log" 2>&1
  rc=$?; grep -q '^status 2: success (no tool calls)$' "$log" && grep -q '^host task: 42$' "$log" || rc=1
  [ $rc -ne 0 ] && sed 's/^/# /' "$log"
  ok $rc "and runs the same"
fi

# The library and the CLI carry lash's Lua modules compiled in: with the
# installed Lua files gone (and no source tree on any path they look at,
# LASH_LUA_DIR unset), both still run.
rm -rf "$P/share/lash"
(cd "$tmp" && env -u LASH_LUA_DIR ./cpphost) >"$log" 2>&1
rc=$?; grep -q '^status 2: Stocked: added sword (1 items)$' "$log" || rc=1
[ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "the C++17 host runs its agent with share/lash removed (modules compiled into liblash.so)"
out=$(cd "$tmp" && env -u LASH_LUA_DIR "$P/bin/lash" eval \
  'for _, f in pairs(require "lash.agent") do if type(f) == "function" then return debug.getinfo(f, "S").source end end' 2>&1)
[ "$out" = @lash/agent.lua ]; ok $? "the installed CLI runs lash.agent compiled in, not from a file (source $out)"
! readelf -p .rodata "$P/lib/liblash.so" | grep -qF "$(pwd)"
ok $? "liblash.so has no path into the source tree it was built from"

# A host that links liblash.a statically adds libcurl and libsqlite3 (shared), libm and
# libdl (lash.pc's Libs.private): no Lua, no libyaml.
static_libs="$(pkg-config --libs libcurl sqlite3) -lm -ldl"
g++ -std=c++17 -O1 -o "$tmp/cpphost-static" examples/cpp/host.cpp $(pkg-config --cflags lash) \
  "$P/lib/liblash.a" $static_libs >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "the C++17 host links the installed liblash.a with $static_libs"
! ldd "$tmp/cpphost-static" 2>/dev/null | grep -Eq 'liblash|liblua|libyaml'
ok $? "the static host loads no liblash, liblua or libyaml at run time"
(cd "$tmp" && env -u LASH_LUA_DIR ./cpphost-static) >"$log" 2>&1
rc=$?; grep -q '^status 2: Stocked: added sword (1 items)$' "$log" || rc=1
[ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "the statically linked C++17 host runs its agent"
# pkg-config --static: a host linked from its line alone, against a lib
# directory holding only liblash.a, runs with no liblash at run time
mkdir -p "$tmp/static/lib/pkgconfig" "$tmp/static/include"
cp "$P/lib/liblash.a" "$tmp/static/lib/" && cp "$P/lib/pkgconfig/lash.pc" "$tmp/static/lib/pkgconfig/"
cp "$P/include/"*.h "$tmp/static/include/"
g++ -std=c++17 -O1 -o "$tmp/cpphost-pc-static" examples/cpp/host.cpp \
  $(PKG_CONFIG_PATH=$tmp/static/lib/pkgconfig pkg-config --static --cflags --libs lash) >"$log" 2>&1
rc=$?; [ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "a host links with \$(pkg-config --static --cflags --libs lash) alone"
(cd "$tmp" && env -u LASH_LUA_DIR ./cpphost-pc-static) >"$log" 2>&1
rc=$?; grep -q '^status 2: Stocked: added sword (1 items)$' "$log" || rc=1
[ $rc -ne 0 ] && sed 's/^/# /' "$log"
ok $rc "... and runs its agent"

# a host linked against the shared library outside the loader's path: the
# manual's embedding line needs -Wl,-rpath (or LD_LIBRARY_PATH), and says so
cc -o "$tmp/plain-so" "$tmp/plain.c" $(pkg-config --cflags --libs lash) 2>"$log"
out=$(cd "$tmp" && ./plain-so 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q 'liblash.so.0'; ok $? "without an rpath the loader cannot find liblash.so.0 ($out)"
grep -q -- '-Wl,-rpath,$(pkg-config --variable=libdir lash)' docs/embedding.md
ok $? "docs/embedding.md's build line says how: -Wl,-rpath with pkg-config's libdir"
cc -o "$tmp/plain-rpath" "$tmp/plain.c" $(pkg-config --cflags --libs lash) \
  -Wl,-rpath,"$(pkg-config --variable=libdir lash)" 2>"$log"
(cd "$tmp" && ./plain-rpath); ok $? "... and with it the host runs"

# the FFI binding installed where LuaJIT's require finds it under the prefix
if command -v luajit >/dev/null 2>&1; then
  out=$(LUA_PATH="$P/share/lua/5.1/?.lua;;" LASH_LIB="$P/lib/liblash.so.0" luajit -e \
    'print(require("lash_ffi").version())' 2>&1)
  [ -n "$out" ] && echo "$out" | grep -qv 'error'; ok $? "luajit requires the installed lash_ffi and loads liblash ($out)"
else
  skip "luajit requires the installed lash_ffi" "no luajit here"
fi
done_testing
