/*
** loutq.c: lash.core.outq, the Lua face of a command's output queue
** (src/2-runtime/outq.h): a sandbox exec given `on_output = q` pushes each
** chunk of output into q as it arrives; a task takes them.
**
**   local q = outq.new([max_bytes])   bounded (default 1 MiB queued)
**   local stream, text, skipped = q:next([max])
**       waits for output: stream "stdout" or "stderr", up to max bytes
**       (default 64 KiB) of it, and how many bytes of that stream were
**       dropped right before them (the reader fell behind); nil once the
**       queue is closed and drained
**   q:push(stream, text)   what a backend written in Lua (or a test) feeds
**   q:close()              no more output; the reader drains what is left
**   q:totals()             bytes pushed per stream: {stdout =, stderr =}
**
** Prefix: lash_open_outq, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "outq.h"
#include "runtime.h"
#include "modules.h"

#include <stdlib.h>
#include <string.h>

#define WAITER_MT "lash.outq.waiter"
#define TAKE_DEFAULT (64u << 10)

static lash_outq *check_q(lua_State *L) {
  return luaL_checkudata(L, 1, LASH_OUTQ_MT);
}

static int l_new(lua_State *L) {
  lua_Integer max = luaL_optinteger(L, 1, LASH_OUTQ_DEFAULT_MAX);
  lash_outq *q;
  luaL_argcheck(L, max > 0, 1, "the queue's size must be at least 1 byte");
  q = lua_newuserdatauv(L, sizeof *q, 0);
  lash_outq_init(q, (size_t)max);
  luaL_setmetatable(L, LASH_OUTQ_MT);
  return 1;
}

static int stream_arg(lua_State *L, int idx) {
  static const char *const names[] = {"stdout", "stderr", NULL};
  return luaL_checkoption(L, idx, NULL, names) + 1;
}

static int l_push(lua_State *L) {
  lash_outq *q = check_q(L);
  int stream = stream_arg(L, 2);
  size_t n;
  const char *p = luaL_checklstring(L, 3, &n);
  if (q->closed) return luaL_error(L, "lash.outq: push on a closed queue");
  lash_outq_push(q, stream, p, n);
  return 0;
}

static int l_close(lua_State *L) {
  lash_outq_close(check_q(L));
  return 0;
}

static int l_gc(lua_State *L) {
  lash_outq_free(check_q(L));
  return 0;
}

static int l_totals(lua_State *L) {
  lash_outq *q = check_q(L);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)q->total[0]);
  lua_setfield(L, -2, "stdout");
  lua_pushinteger(L, (lua_Integer)q->total[1]);
  lua_setfield(L, -2, "stderr");
  return 1;
}

/* ---- next: take, or wait for a push or the close ------------------------- */

static void waiter_cancel(lash_wait *w) {
  lash_outq_waiter *op = (lash_outq_waiter *)w;
  if (op->q && op->q->waiter == op) op->q->waiter = NULL;
  op->q = NULL;
}

static int waiter_gc(lua_State *L) {
  lash_outq_waiter *op = luaL_checkudata(L, 1, WAITER_MT);
  waiter_cancel(&op->w);
  return 0;
}

static int next_k(lua_State *L, int status, lua_KContext ctx);

/* stack: 1 q, 2 max (an integer) */
static int take_or_wait(lua_State *L) {
  lash_outq *q = check_q(L);
  size_t max = (size_t)lua_tointeger(L, 2), n;
  uint64_t skipped;
  int stream;
  lash_outq_waiter *op;
  if (q->head) {
    luaL_Buffer b;
    char *buf = luaL_buffinitsize(L, &b, max);
    stream = lash_outq_take(q, buf, max, &n, &skipped);
    luaL_pushresultsize(&b, n);
    lua_pushstring(L, stream == 2 ? "stderr" : "stdout");
    lua_insert(L, -2);
    lua_pushinteger(L, (lua_Integer)skipped);
    return 3;
  }
  if (q->closed) {
    lua_pushnil(L);
    return 1;
  }
  if (q->waiter) return luaL_error(L, "lash.outq: another task is reading this queue");
  lua_settop(L, 2);
  op = lua_newuserdatauv(L, sizeof *op, 0);   /* 3: anchored on the stack */
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, WAITER_MT);
  lash_wait_init(&op->w, waiter_cancel);
  op->q = q;
  q->waiter = op;
  return lash_wait_yield(L, &op->w, (lua_KContext)op, next_k);
}

static int next_k(lua_State *L, int status, lua_KContext ctx) {
  lash_outq_waiter *op = (lash_outq_waiter *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  lua_settop(L, 2);
  return take_or_wait(L);
}

static int l_next(lua_State *L) {
  lua_Integer max = luaL_optinteger(L, 2, TAKE_DEFAULT);
  check_q(L);
  luaL_argcheck(L, max > 0, 2, "take at least 1 byte");
  lua_settop(L, 1);
  lua_pushinteger(L, max);
  return take_or_wait(L);
}

int lash_open_outq(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"push", l_push}, {"next", l_next}, {"close", l_close}, {"totals", l_totals},
    {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"new", l_new}, {NULL, NULL}};
  if (luaL_newmetatable(L, LASH_OUTQ_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, WAITER_MT)) {
    lua_pushcfunction(L, waiter_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
