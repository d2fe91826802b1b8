/*
** lfiles.c: lash.core.files, host-side helpers for copying files out of a
** sandbox: `untar(dest)` makes an extractor (untar.c) that a download
** feeds a sandbox's tar stream into, chunk by chunk.
**
**   local x = files.untar("/host/dir")
**   x:write(chunk)        raises on a malformed stream or a failed write
**   local s = x:finish()  {files =, dirs =, links =, bytes =, skipped =,
**                          first_skip = "path: why" or nil}
**   x:close()             (also __gc and __close); a closed one raises
**
** Prefix: lash_open_files, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "modules.h"
#include "untar.h"

#include <errno.h>
#include <string.h>

#define UNTAR_MT "lash.files.untar"

typedef struct { lash_untar *u; } untar_box;

static untar_box *check_open(lua_State *L) {
  untar_box *b = luaL_checkudata(L, 1, UNTAR_MT);
  if (!b->u) luaL_error(L, "the tar extractor is closed");
  return b;
}

/*** Make an extractor writing under dest (created if missing).
** @function untar */
static int l_untar(lua_State *L) {
  const char *dest = luaL_checkstring(L, 1);
  untar_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->u = NULL;
  luaL_setmetatable(L, UNTAR_MT);
  b->u = lash_untar_open(dest);
  if (!b->u) {
    lua_pushnil(L);
    lua_pushfstring(L, "cannot open %s: %s", dest, strerror(errno));
    return 2;
  }
  return 1;
}

static int l_write(lua_State *L) {
  untar_box *b = check_open(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  char err[256];
  if (lash_untar_write(b->u, s, n, err, sizeof err) != 0) return luaL_error(L, "%s", err);
  return 0;
}

static int l_finish(lua_State *L) {
  untar_box *b = check_open(L);
  lash_untar_stats st;
  char err[256];
  int rc = lash_untar_finish(b->u, &st, err, sizeof err);
  lash_untar_close(b->u);
  b->u = NULL;
  if (rc != 0) return luaL_error(L, "%s", err);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)st.files); lua_setfield(L, -2, "files");
  lua_pushinteger(L, (lua_Integer)st.dirs); lua_setfield(L, -2, "dirs");
  lua_pushinteger(L, (lua_Integer)st.links); lua_setfield(L, -2, "links");
  lua_pushinteger(L, (lua_Integer)st.bytes); lua_setfield(L, -2, "bytes");
  lua_pushinteger(L, (lua_Integer)st.skipped); lua_setfield(L, -2, "skipped");
  if (st.first_skip[0]) {
    lua_pushstring(L, st.first_skip);
    lua_setfield(L, -2, "first_skip");
  }
  return 1;
}

static int l_close(lua_State *L) {
  untar_box *b = luaL_checkudata(L, 1, UNTAR_MT);
  lash_untar_close(b->u);
  b->u = NULL;
  return 0;
}

int lash_open_files(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"write", l_write}, {"finish", l_finish}, {"close", l_close}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"untar", l_untar}, {NULL, NULL}};
  if (luaL_newmetatable(L, UNTAR_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
