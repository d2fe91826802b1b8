/*
** sandbox_result.c: what a backend hands back through the sandbox core,
** built in one place for every backend (prefix lash_sandbox_): the typed
** errors (and the too_large error of a read over its limit), the exec
** result table (built for C backends, checked for Lua ones), directory
** listings in byte order, and JSON text through lash's codec (json.h) in a
** protected call. See sandbox.h for the contract.
*/
#include "sandbox.h"
#include "sandbox_core.h"
#include "runtime.h"
#include "json.h"
#include "output.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void lash_sandbox_push_error(lua_State *L, const char *kind, const char *code,
                             const char *message) {
  int recoverable = strcmp(kind, LASH_SB_ERROR) == 0;
  lash_error_push(L, kind, message, recoverable);
  lua_pushboolean(L, !recoverable);
  lua_setfield(L, -2, "terminal");
  if (code) {
    lua_pushstring(L, code);
    lua_setfield(L, -2, "code");
  }
}

int lash_sandbox_raise(lua_State *L, const char *kind, const char *code,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lash_sandbox_push_error(L, kind, code, lua_tostring(L, -1));
  lua_remove(L, -2);
  return lua_error(L);
}

int lash_sandbox_raise_too_large(lua_State *L, const char *path,
                                 lua_Integer size, lua_Integer max_bytes,
                                 const char *why) {
  if (size >= 0 && max_bytes >= 0) {
    char a[32], b[32];
    lash_format_size((uint64_t)size, a, sizeof a);
    lash_format_size((uint64_t)max_bytes, b, sizeof b);
    lua_pushfstring(L, "'%s' is %s, over the %s read limit", path, a, b);
  } else {
    lua_pushfstring(L, "'%s' is too large: %s", path, why ? why : "over the limit");
  }
  lash_sandbox_push_error(L, LASH_SB_ERROR, "too_large", lua_tostring(L, -1));
  if (size >= 0) {
    lua_pushinteger(L, size);
    lua_setfield(L, -2, "size");
  }
  if (max_bytes >= 0) {
    lua_pushinteger(L, max_bytes);
    lua_setfield(L, -2, "max_bytes");
  }
  lua_pushstring(L, path);
  lua_setfield(L, -2, "path");
  return lua_error(L);
}

int lash_sandbox_raise_path(lua_State *L, int why, const char *path) {
  static const struct { const char *code, *fmt; } reasons[] = {
    {"not_found", "'%s': No such file or directory"},
    {"is_dir", "'%s' is a directory"},
    {"not_dir", "'%s': Not a directory"},
    {"not_dir", "'%s': a parent is not a directory"},
    {"not_regular", "'%s' is not a regular file"},
  };
  if (why < 0 || why >= (int)(sizeof reasons / sizeof *reasons))
    return luaL_error(L, "lash_sandbox_raise_path: bad reason %d", why);
  return lash_sandbox_raise(L, LASH_SB_ERROR, reasons[why].code,
                            reasons[why].fmt, path);
}

/* ---- the exec result ---------------------------------------------------- */

static void push_ring(lua_State *L, lash_ring *r) {
  size_t n;
  const char *p = lash_ring_view(r, &n);
  lua_pushlstring(L, p ? p : "", n);
}

void lash_sandbox_push_exec_result(lua_State *L, lash_ring *out, lash_ring *err,
                                   lua_Integer exit_code, int timed_out,
                                   lua_Integer applied_timeout) {
  lua_createtable(L, 0, 7);
  push_ring(L, out);
  lua_setfield(L, -2, "stdout");
  push_ring(L, err);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, lash_ring_dropped(out));
  lua_setfield(L, -2, "stdout_truncated");
  lua_pushboolean(L, lash_ring_dropped(err));
  lua_setfield(L, -2, "stderr_truncated");
  lua_pushinteger(L, exit_code);
  lua_setfield(L, -2, "exit_code");
  lua_pushboolean(L, timed_out);
  lua_setfield(L, -2, "timed_out");
  lua_pushinteger(L, applied_timeout);
  lua_setfield(L, -2, "applied_timeout");
}

/* JSON through lash's one codec (json.h), protected: 1 on success with the
** result pushed, 0 with the error message pushed. */
int lash_sandbox_json_encode(lua_State *L, int idx, int canonical) {
  return lash_json_pencode(L, idx, canonical ? LASH_JSON_CANONICAL
                                             : LASH_JSON_HASH_ORDER) == LUA_OK;
}

int lash_sandbox_json_decode(lua_State *L, const char *s, size_t len) {
  return lash_json_pdecode(L, s, len) == LUA_OK;
}

int lash_sandbox_exec_k(lua_State *L, int status, lua_KContext ctx) {
  static const char *const strs[] = {"stdout", "stderr", NULL};
  static const char *const bools[] = {"stdout_truncated", "stderr_truncated",
                                      "timed_out", NULL};
  int i;
  (void)status;
  lua_settop(L, (int)ctx + 1);
  if (!lua_istable(L, -1))
    luaL_error(L, "the sandbox backend's exec returned %s instead of a "
               "result table", luaL_typename(L, -1));
  for (i = 0; strs[i]; i++) {
    if (lua_getfield(L, -1, strs[i]) != LUA_TSTRING)
      luaL_error(L, "the sandbox backend's exec result has no string '%s'",
                 strs[i]);
    lua_pop(L, 1);
  }
  for (i = 0; bools[i]; i++) {
    if (lua_getfield(L, -1, bools[i]) == LUA_TNIL) {
      lua_pushboolean(L, 0);
      lua_setfield(L, -3, bools[i]);
    }
    lua_pop(L, 1);
  }
  if (lua_getfield(L, -1, "exit_code") != LUA_TNUMBER)
    luaL_error(L, "the sandbox backend's exec result has no exit_code");
  lua_pop(L, 1);
  return 1;
}

static int entry_cmp(const void *a, const void *b) {
  const struct { const char *s; size_t n; int i; } *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, n);
  if (c) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* Sort the entries by name, in byte order. */
int lash_sandbox_list_k(lua_State *L, int status, lua_KContext ctx) {
  struct ent { const char *s; size_t n; int i; } *v;
  lua_Integer i, n;
  int src;
  (void)status;
  lua_settop(L, (int)ctx + 1);
  src = lua_gettop(L);
  if (!lua_istable(L, src))
    luaL_error(L, "the sandbox backend's list_dir returned %s", luaL_typename(L, src));
  n = (lua_Integer)lua_rawlen(L, src);
  v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *v, 0);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, src, i);
    if (!lua_istable(L, -1) || lua_getfield(L, -1, "name") != LUA_TSTRING)
      luaL_error(L, "the sandbox backend's list_dir returned an entry without "
                 "a name");
    v[i - 1].s = lua_tolstring(L, -1, &v[i - 1].n);   /* anchored in src */
    v[i - 1].i = (int)i;
    lua_pop(L, 2);
  }
  qsort(v, (size_t)n, sizeof *v, entry_cmp);
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, src, v[i].i);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}
