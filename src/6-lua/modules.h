/*
** modules.h: the C submodules that make up `lash.core`. Each entry NAME
** names a function `int lash_open_NAME(lua_State *L)` that pushes one table;
** luaopen_lash_core stores it as core.NAME. Add a line when a binding lands.
** Prefix: lash_open_NAME, one per binding (the l*.c files).
*/
#ifndef lash_modules_h
#define lash_modules_h

#include "lua.h"

#define LASH_MODULES(X) \
  X(task)               \
  X(output)             \
  X(http)               \
  X(sandbox)            \
  X(sys)                \
  X(budget)             \
  X(yaml)               \
  X(json)               \
  X(proc)               \
  X(net)                \
  X(secret)             \
  X(sqlite)             \
  X(files)              \
  X(outq)               \
  X(ports)

#define LASH_DECLARE_OPEN(name) int lash_open_##name(lua_State *L);
LASH_MODULES(LASH_DECLARE_OPEN)
#undef LASH_DECLARE_OPEN

#endif
