#!/usr/bin/env bash
# The LuaRocks spec installs a working module: build it into a scratch tree
# and `require "lash"` from a stock lua5.4 with that tree's paths only.
. "$(dirname "$0")/../lib.sh"
command -v luarocks >/dev/null || skip_all "luarocks is not installed"
new_tmp tree; at_exit 'rm -rf build-rock'
if ! luarocks --lua-version=5.4 --tree "$tree" make rockspec/lash-scm-1.rockspec >"$tree/log" 2>&1; then
  not_ok "luarocks make rockspec/lash-scm-1.rockspec" "$(tail -30 "$tree/log")"; done_testing
fi
ok "luarocks make rockspec/lash-scm-1.rockspec"
out=$(cd /tmp && LUA_PATH="$tree/share/lua/5.4/?.lua;$tree/share/lua/5.4/?/init.lua" \
  LUA_CPATH="$tree/lib/lua/5.4/?.so;/usr/lib/x86_64-linux-gnu/lua/5.4/?.so" \
  lua5.4 -e 'local lash = require "lash"; local t = lash.spawn(function() lash.sleep(0.01) return "ran" end); io.write(lash.version, " ", t:join(), " ", package.searchpath("lash.core", package.cpath))' 2>&1)
case "$out" in
  *" ran $tree/lib/lua/5.4/lash/core.so") ok "require \"lash\" from the installed tree runs a task ($out)" ;;
  *) not_ok "require \"lash\" from the installed tree" "$out" ;;
esac
done_testing
