/*
** modules.h: the C submodules that make up `lash.core`. Each entry NAME
** names a function `int lash_open_NAME(lua_State *L)` that pushes one table;
** luaopen_lash_core stores it as core.NAME. Add a line when a binding lands.
*/
#ifndef lash_modules_h
#define lash_modules_h

#include "lua.h"

#define LASH_MODULES(X) \
  X(task)               \
  X(output)             \
  X(http)               \
  X(sandbox)            \
  X(sys)

/* Weak while the tree is being built up in parallel: a module whose file
** has not landed yet is simply absent. TODO(lead): make these strong. */
#define LASH_DECLARE_OPEN(name) \
  __attribute__((weak)) int lash_open_##name(lua_State *L);
LASH_MODULES(LASH_DECLARE_OPEN)
#undef LASH_DECLARE_OPEN

#endif
