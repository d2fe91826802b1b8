/*
** laux.c: helpers for C functions that take Lua arguments (see laux.h): today the
** one checker of option tables, so "unknown option" reads the same from
** every binding and lists every option the caller takes.
*/
#include <string.h>

#include "lauxlib.h"
#include "laux.h"

int lashA_optionindex(lua_State *L, int k, const char *const known[]) {
  const char *key;
  int i;
  if (lua_type(L, k) != LUA_TSTRING) return -1;
  key = lua_tostring(L, k);
  for (i = 0; known[i]; i++)
    if (strcmp(key, known[i]) == 0) return i;
  return -1;
}

static void raise_unknown(lua_State *L, int key, const char *who,
                          const char *const known[]) {
  luaL_Buffer b;
  const char *list;
  int i;
  key = lua_absindex(L, key);
  luaL_buffinit(L, &b);
  for (i = 0; known[i]; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, known[i]);
  }
  luaL_pushresult(&b);
  list = lua_tostring(L, -1);
  if (lua_type(L, key) == LUA_TSTRING)
    luaL_error(L, "%s: unknown option '%s' (known: %s)", who, lua_tostring(L, key), list);
  luaL_error(L, "%s: option keys must be strings, got a %s key (known: %s)",
             who, luaL_typename(L, key), list);
}

int lashA_checkoptions(lua_State *L, int idx, const char *who,
                       const char *const known[]) {
  int n = 0;
  if (lua_isnoneornil(L, idx)) return 0;
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lashA_optionindex(L, -2, known) < 0) raise_unknown(L, -2, who, known);
    lua_pop(L, 1);
    n++;
  }
  return n;
}
