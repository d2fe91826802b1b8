-- The `lash` CLI on a stock lua5.4, for specs when no binary is built:
-- lua5.4 specs/helpers/lash_main.lua <command> [args...]
local build = os.getenv("LASH_BUILD") or "build"
package.cpath = build .. "/?.so;" .. package.cpath
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
os.exit(require("lash.cli").main(arg))
