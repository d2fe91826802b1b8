#!/usr/bin/env bash
# The LuaRocks spec installs a working module: build it into a scratch tree
# and `require "lash"` from a stock lua5.4 with that tree's paths only.
set -u
cd "$(dirname "$0")/../.."
if ! command -v luarocks >/dev/null; then
  echo "1..0 # SKIP luarocks is not installed"; exit 0
fi
tree=$(mktemp -d); trap 'rm -rf "$tree" build-rock' EXIT
if ! luarocks --lua-version=5.4 --tree "$tree" make rockspec/lash-scm-1.rockspec >"$tree/log" 2>&1; then
  echo "not ok 1 - luarocks make rockspec/lash-scm-1.rockspec"; sed 's/^/# /' "$tree/log" | tail -30; echo "1..1"; exit 1
fi
echo "ok 1 - luarocks make rockspec/lash-scm-1.rockspec"
out=$(cd /tmp && LUA_PATH="$tree/share/lua/5.4/?.lua;$tree/share/lua/5.4/?/init.lua" \
  LUA_CPATH="$tree/lib/lua/5.4/?.so;/usr/lib/x86_64-linux-gnu/lua/5.4/?.so" \
  lua5.4 -e 'local lash = require "lash"; local t = lash.spawn(function() lash.sleep(0.01) return "ran" end); io.write(lash.version, " ", t:join(), " ", package.searchpath("lash.core", package.cpath))' 2>&1)
case "$out" in
  *" ran $tree/lib/lua/5.4/lash/core.so") echo "ok 2 - require \"lash\" from the installed tree runs a task ($out)";;
  *) echo "not ok 2 - require \"lash\" from the installed tree"; echo "# $out"; echo "1..2"; exit 1;;
esac
echo "1..2"
