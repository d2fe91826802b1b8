/*
** lbytecode.c: lash's own modules loaded precompiled. `make` compiles every
** .lua file under lua/lash with luac into a twin tree of .luac files ($(BUILD)/luac,
** installed as share/lash/luac); this searcher, placed right after
** package.preload, loads a module's twin when it is at least as new as the
** source package.path would find, so a start-up does not parse ~300 KB of
** Lua. An edited source (newer than its twin), a missing twin or bytecode
** of another Lua build falls through to the ordinary Lua searcher: the
** source stays the truth. Only modules named lash or lash.* are looked up.
*/
#include "lauxlib.h"
#include "lua.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lash_bytecode_install(lua_State *L, const char *lua_dir,
                          const char *bc_dir);

static int newer_or_same(const struct stat *bc, const struct stat *src) {
  if (bc->st_mtim.tv_sec != src->st_mtim.tv_sec)
    return bc->st_mtim.tv_sec > src->st_mtim.tv_sec;
  return bc->st_mtim.tv_nsec >= src->st_mtim.tv_nsec;
}

/* Read the twin whole and load it as bytecode only (one open, where
** luaL_loadfilex opens it twice). The chunk keeps the source's name,
** recorded by luac. */
static int load_twin(lua_State *L, const char *path, size_t size) {
  char *buf;
  size_t got = 0;
  int fd, rc;
  if (size == 0 || size > (64u << 20) || !(buf = malloc(size))) {
    lua_pushliteral(L, "unusable bytecode");
    return LUA_ERRFILE;
  }
  fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (fd >= 0) close(fd);
  if (got != size) {
    free(buf);
    lua_pushliteral(L, "unreadable bytecode");
    return LUA_ERRFILE;
  }
  rc = luaL_loadbufferx(L, buf, size, path, "b");
  free(buf);
  return rc;
}

/* package.searchers entry; upvalues: the Lua dir, the bytecode dir */
static int search(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *dir = lua_tostring(L, lua_upvalueindex(1));
  const char *bcdir = lua_tostring(L, lua_upvalueindex(2));
  char rel[512], src[4096], bc[4096];
  static const char *const forms[][2] = {{"%s/%s.lua", "%s/%s.luac"},
                                         {"%s/%s/init.lua", "%s/%s/init.luac"}};
  size_t i, n = strlen(name);
  if (strncmp(name, "lash", 4) != 0 || (name[4] != '\0' && name[4] != '.') ||
      n >= sizeof rel) {
    lua_pushliteral(L, "not one of lash's modules");
    return 1;
  }
  for (i = 0; i <= n; i++) rel[i] = name[i] == '.' ? '/' : name[i];
  for (i = 0; i < 2; i++) {
    struct stat ss, bs;
    snprintf(src, sizeof src, forms[i][0], dir, rel);
    if (stat(src, &ss) != 0) continue;
    /* the source package.path finds first decides; its twin or nothing */
    snprintf(bc, sizeof bc, forms[i][1], bcdir, rel);
    if (stat(bc, &bs) != 0 || !newer_or_same(&bs, &ss)) break;
    if (load_twin(L, bc, (size_t)bs.st_size) != LUA_OK) {
      lua_pop(L, 1);   /* another Lua's bytecode: the source will do */
      break;
    }
    lua_pushstring(L, src);
    return 2;
  }
  lua_pushfstring(L, "no precompiled '%s' in %s", name, bcdir);
  return 1;
}

/* Put the searcher at package.searchers[2]. Returns 0, or -1 when the
** package library is not there. */
int lash_bytecode_install(lua_State *L, const char *lua_dir,
                          const char *bc_dir) {
  lua_Integer i, n;
  if (lua_getglobal(L, "package") != LUA_TTABLE ||
      lua_getfield(L, -1, "searchers") != LUA_TTABLE) {
    lua_settop(L, lua_gettop(L) - 2);
    return -1;
  }
  n = (lua_Integer)lua_rawlen(L, -1);
  for (i = n; i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushstring(L, lua_dir);
  lua_pushstring(L, bc_dir);
  lua_pushcclosure(L, search, 2);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
  return 0;
}
