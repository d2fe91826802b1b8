/*
** ltask.c: the Lua face of the runtime (runtime.c): lash.spawn and task
** handles, futures, sleep, now, run/step, log, and typed error
** constructors. The scheduler, futures' settling and the metatables of the
** objects the runtime makes are runtime.c's; this file adds their methods
** at luaopen. Prefix: lash_open_task, the rest static (l_*).
*/
#include "runtime.h"
#include "task.h"
#include "modules.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- futures ---------------------------------------------------------- */

static lash_future *check_future(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, LASH_FUTURE_MT);
}

/*** Wait for the future and return its values (raises its error).
@function future:wait */
static int l_future_wait(lua_State *L) {
  check_future(L, 1);
  lua_settop(L, 1);
  return lash_future_wait(L, 1, 1);
}

/*** Resolve the future with the given values. Returns false if it was settled already. */
static int l_future_set(lua_State *L) {
  lash_future *f = check_future(L, 1);
  if (f->state != LASH_OUT_NONE) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lash_future_settle(L, 1, LASH_OUT_OK, lua_gettop(L) - 1);
  lua_pushboolean(L, 1);
  return 1;
}

/*** Reject the future with an error value. */
static int l_future_fail(lua_State *L) {
  lash_future *f = check_future(L, 1);
  luaL_checkany(L, 2);
  if (f->state != LASH_OUT_NONE) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_settop(L, 2);
  lash_future_settle(L, 1, LASH_OUT_ERROR, 1);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_future_done(lua_State *L) {
  lua_pushboolean(L, check_future(L, 1)->state != LASH_OUT_NONE);
  return 1;
}

/*** Non-waiting peek: true, values... / false, err, or nothing while pending. */
static int l_future_result(lua_State *L) {
  lash_future *f = check_future(L, 1);
  lua_settop(L, 1);
  if (f->state == LASH_OUT_NONE) return 0;
  return lash_future_push(L, 1, 0);
}

static int l_future_new(lua_State *L) {
  lash_future_new(L);
  return 1;
}

/* ---- tasks ---------------------------------------------------------- */

static lash_task *check_task(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, LASH_TASK_MT);
}

/*** Start fn(...) as a task on the loop.
@function spawn
@treturn task */
static int l_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lash_task_spawn(L, 1, lua_gettop(L) - 1);
  return 1;
}

/* join and wait: mark the task joined and wait on its result future. */
static int task_wait_result(lua_State *L, int raise, const char *self_error) {
  lash_task *t = check_task(L, 1);
  if (t->co == L) return luaL_error(L, "%s", self_error);
  t->joined = 1;
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 2);
  return lash_future_wait(L, 2, raise);
}

/*** Wait for the task; return its results or re-raise its error.
@function task:join */
static int l_task_join(lua_State *L) {
  return task_wait_result(L, 1, "a task cannot join itself (it would wait forever)");
}

/*** Like join, but returns true, results... / false, err instead of raising. */
static int l_task_wait(lua_State *L) {
  return task_wait_result(L, 0, "a task cannot wait for itself (it would wait forever)");
}

/*** Cancel the task: its current (or next) wait raises {kind="cancelled"}.
@treturn boolean whether the task was still running */
static int l_task_cancel(lua_State *L) {
  lua_pushboolean(L, lash_task_cancel(check_task(L, 1)));
  return 1;
}

static int l_task_status(lua_State *L) {
  lash_task *t = check_task(L, 1);
  const char *s = "ready";
  switch (t->status) {
    case LASH_TASK_RUNNING: s = "running"; break;
    case LASH_TASK_WAITING: s = "waiting"; break;
    case LASH_TASK_DONE:
      s = t->fut->state == LASH_OUT_OK ? "done"
        : t->fut->state == LASH_OUT_CANCELLED ? "cancelled" : "failed";
      break;
    default: break;
  }
  lua_pushstring(L, s);
  return 1;
}

static int l_task_done(lua_State *L) {
  lua_pushboolean(L, check_task(L, 1)->status == LASH_TASK_DONE);
  return 1;
}

static int l_task_id(lua_State *L) {
  lua_pushinteger(L, check_task(L, 1)->id);
  return 1;
}

static int l_task_tostring(lua_State *L) {
  lash_task *t = check_task(L, 1);
  lua_pushfstring(L, "lash.task %d (%p)", (int)t->id, (void *)t);
  return 1;
}

/* ---- sleep ------------------------------------------------------------ */

#define SLEEP_MT "lash.sleep_op"

typedef struct sleep_op {
  lash_wait w;
  lash_timer timer;
  lash_loop *loop;
} sleep_op;

static void sleep_fire(lash_loop *loop, lash_timer *tm) {
  sleep_op *op = tm->data;
  (void)loop;
  lash_wait_done(&op->w);
}

static void sleep_cancel(lash_wait *w) {
  sleep_op *op = (sleep_op *)w;
  lash_timer_stop(op->loop, &op->timer);
}

static int sleep_gc(lua_State *L) {
  sleep_op *op = lua_touserdata(L, 1);
  if (op->loop) lash_timer_stop(op->loop, &op->timer);
  op->loop = NULL;
  return 0;
}

static int sleep_k(lua_State *L, int status, lua_KContext ctx) {
  sleep_op *op = (sleep_op *)ctx;
  (void)status;
  lash_timer_stop(op->loop, &op->timer);
  lash_wait_check(L, &op->w);
  return 0;
}

/*** Wait `seconds` (yields inside a task, drives the loop outside one). */
static int l_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  sleep_op *op;
  uint64_t ns;
  luaL_argcheck(L, s >= 0 && isfinite(s), 1,
                "seconds must be a finite number >= 0");
  op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, SLEEP_MT);
  lash_wait_init(&op->w, sleep_cancel);
  lash_timer_init(&op->timer);
  op->loop = lash_runtime_loop(L);
  /* Past 2^64 ns (584 years) the conversion is undefined (x86 gives 0, so
  ** a very long sleep ended at once): saturate, the loop does the rest. */
  ns = s * 1e9 >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)(s * 1e9);
  if (lash_timer_start(op->loop, &op->timer, ns, sleep_fire, op) != 0)
    return luaL_error(L, "lash.sleep: out of memory");
  return lash_wait_yield(L, &op->w, (lua_KContext)op, sleep_k);
}

/* ---- misc ----------------------------------------------------------- */

static int l_now(lua_State *L) {
  lua_pushnumber(L, (double)lash_now_ns() / 1e9);
  return 1;
}

static int l_current(lua_State *L) {
  lash_task *t = lash_task_current(L);
  if (!t) return 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->rt->threads_ref);
  lua_pushthread(L);
  lua_rawget(L, -2);
  return 1;
}

/*** Run the loop until no task is left. */
static int l_run(lua_State *L) {
  lash_runtime *rt = lash_runtime_get(L);
  if (lash_task_current(L))
    return luaL_error(L, "lash.run() called from inside a task; use task:join() instead");
  lua_pushboolean(L, lash_runtime_run(rt) >= 0);
  return 1;
}

/*** Advance every ready task once, waiting at most `timeout` seconds for I/O.
@treturn boolean whether tasks remain */
static int l_step(lua_State *L) {
  lash_runtime *rt = lash_runtime_get(L);
  double s = luaL_optnumber(L, 1, 0);
  int rc;
  luaL_argcheck(L, !isnan(s), 1, "timeout must be a number of seconds");
  /* A negative timeout waits until something happens, and so does one
  ** past INT_MAX ms, where the conversion would be undefined. */
  rc = lash_runtime_step_from(rt, s < 0 || s * 1000 >= (double)INT_MAX ? -1
                              : (int)(s * 1000), L, 0);
  if (rc < 0) return luaL_error(L, "lash: event loop failure");
  lua_pushboolean(L, rc > 0);
  return 1;
}

/*** Send a diagnostic to the host's log (lash_Options.log; stderr by
** default): lash.log(level, message), level one of "debug", "info",
** "warning", "error". Debug and info lines reach stderr only when
** LASH_LOG is "debug" or "info"; a host's callback gets them all. */
static int l_log(lua_State *L) {
  static const char *const levels[] = {"debug", "info", "warning", "error",
                                       "warn", NULL};
  static const int values[] = {LASH_LOG_DEBUG, LASH_LOG_INFO, LASH_LOG_WARN,
                               LASH_LOG_ERROR, LASH_LOG_WARN};
  int level = values[luaL_checkoption(L, 1, NULL, levels)];
  const char *msg = luaL_checkstring(L, 2);
  lash_runtime *rt = lash_runtime_get(L);
  if (level < LASH_LOG_WARN && rt->log_is_default) {
    const char *want = getenv("LASH_LOG");
    if (!want || (strcmp(want, "debug") != 0 &&
                  !(strcmp(want, "info") == 0 && level == LASH_LOG_INFO)))
      return 0;
  }
  lash_runtime_log(rt, level, "%s", msg);
  return 0;
}

static int l_ntasks(lua_State *L) {
  lua_pushinteger(L, lash_runtime_get(L)->ntasks);
  return 1;
}

/*** Make a typed error object: lash.error(kind, message [, fields]). */
static int l_error(lua_State *L) {
  const char *kind = luaL_checkstring(L, 1);
  const char *msg = luaL_optstring(L, 2, kind);
  int retry = 0;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "retryable");
    retry = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lash_error_push(L, kind, msg, retry);
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    }
  }
  return 1;
}

static int l_is_error(lua_State *L) {
  lua_pushboolean(L, lash_is_error(L, 1, luaL_optstring(L, 2, NULL)));
  return 1;
}

/* Give a metatable the runtime made (lash_runtime_open) its Lua methods. */
static void add_methods(lua_State *L, const char *name, const luaL_Reg *methods,
                        lua_CFunction tostring) {
  luaL_getmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  if (tostring) {
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
}

int lash_open_task(lua_State *L) {
  static const luaL_Reg task_methods[] = {
    {"join", l_task_join}, {"wait", l_task_wait}, {"cancel", l_task_cancel},
    {"status", l_task_status}, {"done", l_task_done}, {"id", l_task_id},
    {NULL, NULL}};
  static const luaL_Reg future_methods[] = {
    {"wait", l_future_wait}, {"set", l_future_set}, {"fail", l_future_fail},
    {"done", l_future_done}, {"result", l_future_result}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {
    {"spawn", l_spawn}, {"sleep", l_sleep}, {"now", l_now},
    {"future", l_future_new}, {"current", l_current}, {"run", l_run},
    {"step", l_step}, {"ntasks", l_ntasks}, {"error", l_error},
    {"is_error", l_is_error}, {"log", l_log}, {NULL, NULL}};
  lash_runtime_open(L);
  add_methods(L, LASH_TASK_MT, task_methods, l_task_tostring);
  add_methods(L, LASH_FUTURE_MT, future_methods, NULL);
  if (luaL_newmetatable(L, SLEEP_MT)) {
    lua_pushcfunction(L, sleep_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
