/*
** lcore.c: luaopen_lash_core, the entry point of the C module. It opens
** the runtime for this state and gathers the submodules of modules.h into
** one table: require("lash.core").task, .output, .http, .sandbox, ...
** Its one non-static function is luaopen_lash_core.
*/
#include "lua.h"
#include "lauxlib.h"

#include "modules.h"
#include "runtime.h"

#ifndef LASH_VERSION
#define LASH_VERSION "0.0.0"
#endif

/* The one symbol lash/core.so exports (the library is built with
** -fvisibility=hidden); inside liblash it is local like the rest. */
__attribute__((visibility("default"))) int luaopen_lash_core(lua_State *L);

int luaopen_lash_core(lua_State *L) {
  lash_runtime_open(L);
  lua_newtable(L);
#define LASH_OPEN_ONE(name)               \
  lua_pushcfunction(L, lash_open_##name); \
  lua_call(L, 0, 1);                      \
  lua_setfield(L, -2, #name);
  LASH_MODULES(LASH_OPEN_ONE)
#undef LASH_OPEN_ONE
  lua_pushliteral(L, LASH_VERSION);
  lua_setfield(L, -2, "version");
  return 1;
}
