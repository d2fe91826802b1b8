/*
** test_laux.c: the bindings' shared option checker (src/2-runtime/laux.c): known keys
** pass and are counted, an unknown or non-string key raises naming the
** caller, the key and every known option.
*/
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "laux.h"
#include "t.h"

static const char *const known[] = {"cwd", "env", NULL};

static int check(lua_State *L) {
  lua_pushinteger(L, lashA_checkoptions(L, 1, "spawn", known));
  return 1;
}

static const char *run(lua_State *L, const char *chunk) {
  if (luaL_dostring(L, chunk) != LUA_OK) return lua_tostring(L, -1);
  return lua_tostring(L, -1);
}

int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_register(L, "check", check);
  T_EQ_STR(run(L, "return tostring(check{cwd = '/', env = {}})"), "2", "known keys are counted");
  T_EQ_STR(run(L, "return tostring(check(nil))"), "0", "no table is no options");
  T_EQ_STR(run(L, "return select(2, pcall(check, {cwd = 1, cdw = 2}))"),
           "spawn: unknown option 'cdw' (known: cwd, env)", "an unknown key names itself and the known ones");
  T_EQ_STR(run(L, "return select(2, pcall(check, {true}))"),
           "spawn: option keys must be strings, got a number key (known: cwd, env)",
           "a non-string key is refused");
  T_EQ_STR(run(L, "return select(2, pcall(check, 'x'))"),
           "bad argument #1 to 'check' (table expected, got string)", "a non-table is an argument error");
  lua_close(L);
  return T_DONE();
}
