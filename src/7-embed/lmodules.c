/*
** lmodules.c: how lash_open and lash_attach find lash's Lua modules: a
** searcher for `lash` and `lash.*` over a developer's directory (lua_dir
** or $LASH_LUA_DIR) and then the bytecode compiled into the library, and,
** where the library carries its own hidden Lua, the refusal of Lua C
** modules (they would bind to some other Lua's symbols).
*/
#include "lua.h"
#include "lauxlib.h"

#include "lmodules.h"

#include <dlfcn.h>
#include <string.h>

/* The table is weak: lash/core.so is linked without it. */
extern const lash_lua_module lash_lua_modules[] __attribute__((weak));

static int is_lash_module(const char *name) {
  return strcmp(name, "lash") == 0 || strncmp(name, "lash.", 5) == 0;
}

static const lash_lua_module *find_builtin(const char *name) {
  const lash_lua_module *m;
  if (!lash_lua_modules) return NULL;
  for (m = lash_lua_modules; m->name; m++)
    if (strcmp(m->name, name) == 0) return m;
  return NULL;
}

/* package.searchers entry; upvalue 1: the developer's directory or nil. */
static int search(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const lash_lua_module *m;
  if (!is_lash_module(name)) return 0;
  if (lua_isstring(L, lua_upvalueindex(1))) {
    const char *dir = lua_tostring(L, lua_upvalueindex(1));
    const char *file;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushvalue(L, 1);
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", dir, dir);
    lua_call(L, 2, 1);
    if ((file = lua_tostring(L, -1)) != NULL) {
      if (luaL_loadfilex(L, file, "t") != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s",
                          name, file, lua_tostring(L, -1));
      lua_pushstring(L, file);
      return 2;
    }
  }
  if ((m = find_builtin(name)) != NULL) {
    if (luaL_loadbufferx(L, (const char *)m->code, m->size, m->chunkname, "b") != LUA_OK)
      return luaL_error(L, "error loading lash's built-in module '%s':\n\t%s",
                        name, lua_tostring(L, -1));
    lua_pushstring(L, m->chunkname + 1);
    return 2;
  }
  lua_pushfstring(L, "no module '%s' among lash's built-in modules", name);
  return 1;
}

static int no_c_modules(lua_State *L) {
  lua_pushliteral(L, "no C modules: lash carries its own Lua 5.4 inside "
                  "liblash, hidden, and a Lua C module would bind to another "
                  "Lua's symbols (register C functions through lash_lua.h, or "
                  "use the stock lua5.4 with lash.core)");
  return 1;
}

static int no_loadlib(lua_State *L) {
  luaL_pushfail(L);
  no_c_modules(L);
  lua_pushliteral(L, "absent");
  return 3;
}

/* Is the Lua in use the one inside the same object file as lash (the
** self-contained liblash.so, or liblash.a linked into a host), rather than
** a shared liblua the C modules could link against? */
static int lua_is_private(void) {
  Dl_info lua_info, lash_info;
  /* the Lua the process exports (the CLI's, linked in and -rdynamic):
  ** C modules bind to this very one */
  if (dlsym(RTLD_DEFAULT, "lua_newstate") == (void *)lua_newstate) return 0;
  if (!dladdr((void *)lua_newstate, &lua_info) ||
      !dladdr((void *)lash_modules_install, &lash_info))
    return 0;
  return lua_info.dli_fbase == lash_info.dli_fbase;
}

void lash_modules_install(lua_State *L, const char *dir, int attached) {
  int n;
  lua_getfield(L, -1, "searchers");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  n = (int)luaL_len(L, -1);
  /* shift entries 2..n up one and put ours at 2 */
  for (int i = n; i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  if (dir) lua_pushstring(L, dir); else lua_pushnil(L);
  lua_pushcclosure(L, search, 1);
  lua_rawseti(L, -2, 2);
  if (!attached && lua_is_private()) {
    /* the C searchers (package.cpath, all-in-one) give way to one that
    ** explains; package.loadlib fails the same way */
    for (int i = (int)luaL_len(L, -1); i >= 4; i--) {
      lua_pushnil(L);
      lua_rawseti(L, -2, i);
    }
    lua_pushcfunction(L, no_c_modules);
    lua_rawseti(L, -2, 4);
    lua_pushcfunction(L, no_loadlib);
    lua_setfield(L, -3, "loadlib");
    lua_pushliteral(L, "");
    lua_setfield(L, -3, "cpath");
  }
  lua_pop(L, 1);
}
