/*
** test_json.c: json.c's protected entry points, for C that must not raise
** (a sandbox writing its metadata): text and values come back on the
** stack with LUA_OK, a failure comes back as a message and a status, and
** the stack is left as documented either way.
*/
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "json.h"
#include "t.h"

#include <string.h>

int main(void) {
  lua_State *L = luaL_newstate();
  const char *text;
  int top;
  luaL_openlibs(L);
  top = lua_gettop(L);

  text = "{\"b\":[1,2],\"a\":null}";
  T_EQ_INT(lash_json_pdecode(L, text, strlen(text)), LUA_OK, "valid text decodes");
  T_OK(lua_istable(L, -1), "to a table");
  T_EQ_INT(lash_json_pencode(L, -1, LASH_JSON_CANONICAL), LUA_OK, "the value encodes");
  T_EQ_STR(lua_tostring(L, -1), "{\"a\":null,\"b\":[1,2]}", "canonically, keys sorted");
  T_EQ_INT(lua_gettop(L), top + 2, "one result each");
  lua_settop(L, top);

  T_EQ_INT(lash_json_pdecode(L, "{\"a\":", 5), LUA_ERRRUN, "broken text fails");
  T_OK(strstr(lua_tostring(L, -1), "invalid JSON") != NULL, "with the decoder's message");
  T_EQ_INT(lua_gettop(L), top + 1, "the message alone");
  lua_settop(L, top);

  lua_pushcfunction(L, luaopen_base);
  T_EQ_INT(lash_json_pencode(L, -1, LASH_JSON_HASH_ORDER), LUA_ERRRUN, "a function does not encode");
  T_OK(strstr(lua_tostring(L, -1), "cannot encode a function") != NULL, "and the message says what");
  lua_settop(L, top);

  lua_close(L);
  return T_DONE();
}
