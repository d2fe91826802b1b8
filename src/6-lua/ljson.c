/*
** ljson.c: the Lua binding of json.c, the table behind lash.json
** (lua/lash/json.lua): encode, encode_canonical, decode, freeze, null and
** array_mt.
** Prefix: lash_open_json, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"

#include "json.h"
#include "modules.h"

/// Encode a value (object keys in the table's own order).
// @function encode
static int l_encode(lua_State *L) {
  lua_settop(L, 1);
  lash_json_encode(L, 1, LASH_JSON_HASH_ORDER);
  return 1;
}

/// Encode with object keys sorted bytewise: equal values give equal bytes
// in every process. Frozen tables are encoded once and their text reused.
// @function encode_canonical
static int l_encode_canonical(lua_State *L) {
  lua_settop(L, 1);
  lash_json_encode(L, 1, LASH_JSON_CANONICAL);
  return 1;
}

/// Decode JSON text; raises "invalid JSON at character N: ..." when bad.
// @function decode
static int l_decode(lua_State *L) {
  size_t n;
  const char *s;
  if (lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "json.decode expects a string, got %s", luaL_typename(L, 1));
  s = lua_tolstring(L, 1, &n);
  lash_json_decode(L, s, n);
  return 1;
}

/// Promise that a table (and all it holds) will not change again, so
// canonical encoding may encode it once and reuse the text. Returns it.
// @function freeze
static int l_freeze(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lash_json_freeze(L, 1);
  return 1;
}

/// Promise that a list only grows at its end and that its elements never
// change (each frozen, or a string or number), but for the last, which may
// be replaced: canonical encoding copies the text of those before the last
// and encodes only the others (a history's wire messages, one more each
// step). Returns it.
// @function grow_only
static int l_grow_only(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lash_json_grow_only(L, 1);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"encode", l_encode},
  {"encode_canonical", l_encode_canonical},
  {"decode", l_decode},
  {"freeze", l_freeze},
  {"grow_only", l_grow_only},
  {NULL, NULL},
};

int lash_open_json(lua_State *L) {
  luaL_newlib(L, funcs);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  lash_json_push_array_mt(L);
  lua_setfield(L, -2, "array_mt");
  return 1;
}
