#!/usr/bin/env bash
# What liblash shows a host: exactly the API. The functions lash.h and
# lash_lua.h mark LASH_API, the version script src/7-embed/liblash.map, the dynamic
# symbols liblash.so defines and the global symbols liblash.a defines must
# be one list; anything else exported (a lua_*, yaml_*, pb_*, grpc_*,
# modal_*, lsb_*, a lash_ internal) fails, by name. The only extra entry
# allowed is what the toolchain must put there: LASH_0, the version node's
# own absolute symbol (and _init/_fini, should a toolchain export them).
# The self-contained part: liblash.so needs no liblua/libyaml/LuaJIT and
# neither library has an undefined Lua or libyaml reference left. TAP.
. "$(dirname "$0")/../lib.sh"
B=${LASH_BUILD:-build}
for f in "$B/liblash.so" "$B/liblash.a"; do
  [ -e "$f" ] || skip_all "$f is missing (run make)"
done
new_tmp tmp
toolchain='^(LASH_0|_init|_fini)$'

sed -n 's/^LASH_API [^(]*[ *]\(lash_[a-z_0-9]*\)(.*/\1/p' src/7-embed/lash.h src/7-embed/lash_lua.h | sort > "$tmp/api"
sed -n 's/^ *\(lash_[a-z_0-9]*\);/\1/p' src/7-embed/liblash.map | sort > "$tmp/map"
[ "$(wc -l < "$tmp/api")" -ge 30 ]; ok $? "the headers declare the API ($(wc -l < "$tmp/api") LASH_API functions)"
diff "$tmp/api" "$tmp/map" > "$tmp/d"; rc=$?
[ $rc -ne 0 ] && sed 's/^/# header<>map: /' "$tmp/d"
ok $rc "src/7-embed/liblash.map lists exactly the LASH_API functions of lash.h and lash_lua.h"

# liblash.so: defined dynamic symbols
nm -D --defined-only "$B/liblash.so" | awk '{print $NF}' > "$tmp/so_raw"
grep -Ev '@@?LASH_0$' "$tmp/so_raw" | grep -Ev "$toolchain" > "$tmp/so_unversioned"
[ ! -s "$tmp/so_unversioned" ]; rc=$?
[ $rc -ne 0 ] && sed 's/^/# not under LASH_0: /' "$tmp/so_unversioned" | head -40
ok $rc "every symbol liblash.so exports is versioned LASH_0 ($(wc -l < "$tmp/so_raw") exported)"
sed 's/@.*//' "$tmp/so_raw" | grep -Ev "$toolchain" | sort > "$tmp/so"
diff "$tmp/api" "$tmp/so" > "$tmp/d"; rc=$?
[ $rc -ne 0 ] && sed -n 's/^> /# liblash.so exports, not in the API: /p; s/^< /# liblash.so lacks: /p' "$tmp/d" | head -40
ok $rc "liblash.so exports exactly the API ($(wc -l < "$tmp/so") functions)"
nm -D --undefined-only "$B/liblash.so" | awk '{print $NF}' | sed 's/@.*//' \
  | grep -E '^(lua|luaL|luaopen|yaml)_' > "$tmp/und"
[ ! -s "$tmp/und" ]; rc=$?
[ $rc -ne 0 ] && sed 's/^/# undefined: /' "$tmp/und" | head
ok $rc "liblash.so has no undefined Lua or libyaml symbol"
readelf -d "$B/liblash.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' > "$tmp/needed"
! grep -Eq 'lua|yaml' "$tmp/needed"; ok $? "liblash.so needs no Lua or libyaml library (needs: $(tr '\n' ' ' < "$tmp/needed"))"
soname=$(readelf -d "$B/liblash.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = liblash.so.0 ]; ok $? "soname liblash.so.0 (got '$soname')"

# liblash.a: global symbols it defines, and what it leaves undefined
nm -g --defined-only "$B/liblash.a" | awk 'NF == 3 {print $3}' | grep -Ev "$toolchain" | sort > "$tmp/a"
diff "$tmp/api" "$tmp/a" > "$tmp/d"; rc=$?
[ $rc -ne 0 ] && sed -n 's/^> /# liblash.a defines globally, not in the API: /p; s/^< /# liblash.a lacks: /p' "$tmp/d" | head -40
ok $rc "liblash.a defines exactly the API as global symbols ($(wc -l < "$tmp/a"))"
nm -g --undefined-only "$B/liblash.a" | awk '{print $NF}' | grep -E '^(lua|luaL|luaopen|yaml)_' | sort -u > "$tmp/und"
[ ! -s "$tmp/und" ]; rc=$?
[ $rc -ne 0 ] && sed 's/^/# undefined: /' "$tmp/und" | head
ok $rc "liblash.a leaves no Lua or libyaml symbol undefined (the host need not link one)"
# lash/core.so, the Lua C module of a stock lua5.4: its entry point only
if [ -e "$B/lash/core.so" ]; then
  core=$(nm -D --defined-only "$B/lash/core.so" | awk '{print $NF}' | sed 's/@.*//' | grep -Ev "$toolchain" | tr '\n' ' ')
  [ "$core" = "luaopen_lash_core " ]; ok $? "lash/core.so exports only luaopen_lash_core (got: $(echo "$core" | cut -c1-200))"
fi
done_testing
