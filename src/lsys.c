/*
** lsys.c: lash.sys, the few facts about the process that the standard
** library cannot tell Lua (is a descriptor a terminal? what is the heap's
** budget?).
*/
#include "lua.h"
#include "lauxlib.h"
#include "modules.h"
#include "runtime.h"

#include <unistd.h>

/*** Is file descriptor `fd` (default 1, standard output) a terminal? */
static int l_isatty(lua_State *L) {
  lua_Integer fd = luaL_optinteger(L, 1, 1);
  luaL_argcheck(L, fd >= 0 && fd <= 1 << 20, 1, "not a file descriptor");
  lua_pushboolean(L, isatty((int)fd) == 1);
  return 1;
}

static int l_getpid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/*** The Lua heap's budget: used bytes and the limit (nil when unlimited or
** when the state was not opened by lash, e.g. a stock lua5.4). */
static int l_memory(lua_State *L) {
  size_t used, limit;
  if (!lash_memory_budget(L, &used, &limit)) {
    lua_pushinteger(L, (lua_Integer)(lua_gc(L, LUA_GCCOUNT, 0)) * 1024);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)used);
  if (limit) lua_pushinteger(L, (lua_Integer)limit);
  else lua_pushnil(L);
  return 2;
}

int lash_open_sys(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"isatty", l_isatty}, {"getpid", l_getpid}, {"memory", l_memory},
    {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
