/*
** lyaml.c: lash.core.yaml, the Lua face of the YAML loader (yaml_loader.c):
**
**   value = yaml.decode(text [, {max_depth=, max_nodes=, null=}])
**   nil, message = yaml.decode(bad)
**
** Prefix: lash_open_yaml, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "laux.h"
#include "modules.h"
#include "yaml_loader.h"

/*** Decode one YAML document.
@function decode
@tparam string text
@tparam[opt] table opts `max_depth` (100), `max_nodes` (1e6, aliases
  counted by what they repeat), `null` (the value for null; yaml.null)
@return the value
@treturn[2] nil
@treturn[2] string message with line and column */
static int l_decode(lua_State *L) {
  static const char *const options[] = {"max_depth", "max_nodes", "null", NULL};
  lua_Integer depth = LASH_YAML_MAX_DEPTH, nodes = LASH_YAML_MAX_NODES;
  luaL_checkstring(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lashA_checkoptions(L, 2, "lash.yaml.decode", options);
    if (lua_getfield(L, 2, "max_depth") != LUA_TNIL) depth = luaL_checkinteger(L, -1);
    if (lua_getfield(L, 2, "max_nodes") != LUA_TNIL) nodes = luaL_checkinteger(L, -1);
    luaL_argcheck(L, depth >= 1 && depth <= 10000, 2, "max_depth must be 1..10000");
    luaL_argcheck(L, nodes >= 1, 2, "max_nodes must be >= 1");
    lua_getfield(L, 2, "null");
  } else {
    lua_pushnil(L);
  }
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushlightuserdata(L, NULL);
  }
  return lash_yaml_decode(L, 1, -1, (int)depth, (long long)nodes);
}

int lash_open_yaml(lua_State *L) {
  static const luaL_Reg funcs[] = {{"decode", l_decode}, {NULL, NULL}};
  lash_yaml_open(L);
  luaL_newlib(L, funcs);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  return 1;
}
