#!/usr/bin/env bash
# Where liblash.so finds lash's Lua modules, and what it refuses: with no
# lua_dir they are the bytecode compiled into the library; lua_dir (and,
# when it is unset, $LASH_LUA_DIR) is searched first, module by module;
# Lua C modules cannot load into its hidden Lua and say why. A C host
# (hosts/lookup_host.c) prints what its chunk prints. TAP.
. "$(dirname "$0")/../lib.sh"
B=${LASH_BUILD:-build}
[ -e "$B/liblash.so" ] || skip_all "$B/liblash.so is missing (run make)"
new_tmp tmp
absb=$(cd "$B" && pwd)
cflags="-O1"   # under make check, the host is sanitized like the library
[ -n "${LASH_SANITIZED:-}" ] && cflags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined"
cc $cflags -Wall -Isrc/1-base -Isrc/2-runtime -Isrc/3-transport -Isrc/4-sandbox -Isrc/5-backend/local/prim -Isrc/5-backend/local -Isrc/5-backend/modal -Isrc/6-lua -Isrc/7-embed -Isrc/8-cli -o "$tmp/host" tests/integration/hosts/lookup_host.c -L"$absb" -llash -Wl,-rpath,"$absb" \
  || { not_ok "the host builds"; done_testing; }
src='local f
for _, v in pairs(require "lash.agent") do if type(v) == "function" then f = v break end end
print(debug.getinfo(f, "S").source)'
run() { (cd "$tmp" && env -u LASH_LUA_DIR "$@") 2>&1; }

out=$(run ./host - "$src"); [ "$out" = "@lash/agent.lua" ]
ok $? "no lua_dir: lash.agent is the module compiled in ($out)"
out=$(run ./host - 'print(#package.searchers, package.searchers[2] ~= nil)'); [ "$out" = "$(printf '4\ttrue')" ]
ok $? "searchers: preload, lash's, package.path, the C-module refusal ($out)"

mkdir -p "$tmp/dev/lash"
printf 'return { dev = true, who = "the developer tree" }\n' > "$tmp/dev/lash/agent.lua"
out=$(run ./host "$tmp/dev" 'print(require("lash.agent").who)'); [ "$out" = "the developer tree" ]
ok $? "lua_dir is searched first ($out)"
out=$(run ./host "$tmp/dev" 'print(type(require("lash.json").encode))'); [ "$out" = function ]
ok $? "a module missing from lua_dir comes from the library ($out)"
out=$(cd "$tmp" && LASH_LUA_DIR="$tmp/dev" ./host - 'print(require("lash.agent").who)' 2>&1); [ "$out" = "the developer tree" ]
ok $? "\$LASH_LUA_DIR when lua_dir is unset ($out)"
printf 'return {\n' > "$tmp/dev/lash/template.lua"
out=$(run ./host "$tmp/dev" 'require "lash.template"')
echo "$out" | grep -q "error loading module 'lash.template' from file '$tmp/dev/lash/template.lua'"
ok $? "a broken file in lua_dir is an error naming it, not a silent fallback"

out=$(run ./host "$tmp/nowhere" 'print 1')
echo "$out" | grep -q "lua_dir '$tmp/nowhere' is not a directory"; ok $? "a lua_dir that is not a directory fails lash_open, naming it"
out=$(cd "$tmp" && LASH_LUA_DIR="$tmp/nowhere" ./host - 'print 1' 2>&1)
echo "$out" | grep -q "LASH_LUA_DIR '$tmp/nowhere' is not a directory"; ok $? "so does such a \$LASH_LUA_DIR"
out=$(run ./host - 'require "lfs"')
echo "$out" | grep -q "no C modules: lash carries its own Lua 5.4 inside liblash"
ok $? "require of a Lua C module says why it cannot load"
out=$(run ./host - 'print(package.loadlib("/usr/lib/x86_64-linux-gnu/liblua5.4.so.0", "luaopen_base"))')
echo "$out" | grep -q "^nil	no C modules: .*	absent$"
ok $? "package.loadlib fails the same way, loading nothing"
out=$(run ./host - 'require "lash.nope"')
echo "$out" | grep -q "no module 'lash.nope' among lash's built-in modules"
ok $? "an unknown lash module says it is not among the built-in ones"
done_testing
