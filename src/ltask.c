/*
** ltask.c: the Lua face of the runtime: lash.spawn and task handles,
** futures, sleep, now, run/step, and typed error constructors.
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

struct future_waiter {
  lash_wait w;
  future_waiter *prev, *next;
  lash_future *f;
  int fidx;               /* stack index of the future while waiting */
  int raise;              /* re-raise a failure (join, wait) */
};

static void waiter_unlink(future_waiter *fw) {
  if (!fw->f) return;
  if (fw->prev) fw->prev->next = fw->next;
  else fw->f->waiters = fw->next;
  if (fw->next) fw->next->prev = fw->prev;
  fw->prev = fw->next = NULL;
  fw->f = NULL;
}

static void waiter_cancel(lash_wait *w) { waiter_unlink((future_waiter *)w); }

static int waiter_gc(lua_State *L) {
  waiter_unlink(lua_touserdata(L, 1));
  return 0;
}

static lash_future *check_future(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, LASH_FUTURE_MT);
}

static lash_future *future_new(lua_State *L) {
  lash_future *f = lua_newuserdatauv(L, sizeof *f, 1);
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, LASH_FUTURE_MT);
  return f;
}

/* Settle the future at idx with the n values on top of the stack. */
static void future_settle(lua_State *L, int idx, int state, int n) {
  lash_future *f = lua_touserdata(L, idx);
  future_waiter *fw;
  int i, base = lua_gettop(L) - n;
  idx = lua_absindex(L, idx);
  lua_createtable(L, n, 0);
  for (i = 1; i <= n; i++) {
    lua_pushvalue(L, base + i);
    lua_rawseti(L, -2, i);
  }
  lua_setiuservalue(L, idx, 1);
  lua_settop(L, base);
  f->state = state;
  f->nvalues = n;
  while ((fw = f->waiters) != NULL) {
    waiter_unlink(fw);
    lash_wait_done(&fw->w);
  }
}

/* Push the outcome of a settled future: its values, or (raise) raise its
** error; with raise == 0, pcall style: true, values... or false, err. */
static int future_push(lua_State *L, int idx, int raise) {
  lash_future *f = lua_touserdata(L, idx);
  int i;
  lua_getiuservalue(L, idx, 1);
  if (f->state != LASH_OUT_OK) {
    if (!raise) lua_pushboolean(L, 0);
    lua_rawgeti(L, raise ? -1 : -2, 1);
    if (raise) return lua_error(L);
    return 2;
  }
  luaL_checkstack(L, f->nvalues + 1, "too many results");
  if (!raise) lua_pushboolean(L, 1);
  for (i = 1; i <= f->nvalues; i++) lua_rawgeti(L, raise ? -i : -i - 1, i);
  return f->nvalues + (raise ? 0 : 1);
}

static int future_wait_k(lua_State *L, int status, lua_KContext ctx) {
  future_waiter *fw = (future_waiter *)ctx;
  (void)status;
  waiter_unlink(fw);
  lash_wait_check(L, &fw->w);
  return future_push(L, fw->fidx, fw->raise);
}

static int future_wait_at(lua_State *L, int fidx, int raise) {
  lash_future *f = lua_touserdata(L, fidx);
  future_waiter *fw;
  if (f->state != LASH_OUT_NONE) {
    lash_task *t = lash_task_current(L);
    if (t && t->cancel_pending) {
      t->cancel_pending = 0;
      return lash_error_raise(L, "cancelled", "task cancelled");
    }
    return future_push(L, fidx, raise);
  }
  fw = lua_newuserdatauv(L, sizeof *fw, 1);
  memset(fw, 0, sizeof *fw);
  luaL_setmetatable(L, "lash.future_waiter");
  /* The waiter's __gc unlinks it from f: f must outlive it, even when both
  ** become garbage at once (a wait abandoned by an error). */
  lua_pushvalue(L, fidx);
  lua_setiuservalue(L, -2, 1);
  lash_wait_init(&fw->w, waiter_cancel);
  fw->f = f;
  fw->fidx = fidx;
  fw->raise = raise;
  fw->next = f->waiters;
  if (f->waiters) f->waiters->prev = fw;
  f->waiters = fw;
  return lash_wait_yield(L, &fw->w, (lua_KContext)fw, future_wait_k);
}

/*** Wait for the future and return its values (raises its error).
@function future:wait */
static int l_future_wait(lua_State *L) {
  check_future(L, 1);
  lua_settop(L, 1);
  return future_wait_at(L, 1, 1);
}

/*** Resolve the future with the given values. Returns false if it was settled already. */
static int l_future_set(lua_State *L) {
  lash_future *f = check_future(L, 1);
  if (f->state != LASH_OUT_NONE) {
    lua_pushboolean(L, 0);
    return 1;
  }
  future_settle(L, 1, LASH_OUT_OK, lua_gettop(L) - 1);
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
  future_settle(L, 1, LASH_OUT_ERROR, 1);
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
  return future_push(L, 1, 0);
}

static int l_future_new(lua_State *L) {
  future_new(L);
  return 1;
}

/* ---- tasks ---------------------------------------------------------- */

static lash_task *check_task(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, LASH_TASK_MT);
}

static void unregister_task(lash_runtime *rt, lua_State *L, lash_task *t,
                            int tidx) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->tasks_ref);
  lua_pushvalue(L, tidx);
  lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->threads_ref);
  lua_pushthread(t->co);
  lua_xmove(t->co, L, 1);
  lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Finish t with the n values on top of L; called with the task userdata at
** tidx. Wakes joiners. */
static void task_finish(lua_State *L, lash_task *t, int tidx, int outcome,
                        int n) {
  lash_runtime *rt = t->rt;
  int base = lua_gettop(L) - n;
  tidx = lua_absindex(L, tidx);
  t->status = LASH_TASK_DONE;
  t->wait = NULL;
  rt->ntasks--;
  lua_getiuservalue(L, tidx, 2);  /* future */
  lua_insert(L, base + 1);
  future_settle(L, base + 1, outcome, n);
  lua_settop(L, base);
  unregister_task(rt, L, t, tidx);
}

/* Give a string error a traceback; a table error gets a traceback field. */
static void decorate_error(lua_State *L, lua_State *co) {
  if (lua_type(L, -1) == LUA_TSTRING) {
    luaL_traceback(L, co, lua_tostring(L, -1), 0);
    lua_remove(L, -2);
  } else if (lua_istable(L, -1) && !lash_is_error(L, -1, "cancelled")) {
    if (lua_getfield(L, -1, "traceback") == LUA_TNIL) {
      lua_pop(L, 1);
      luaL_traceback(L, co, NULL, 0);
      lua_setfield(L, -2, "traceback");
    } else {
      lua_pop(L, 1);
    }
  }
}

void lash_task_resume(lash_task *t, lua_State *from) {
  lash_runtime *rt = t->rt;
  lua_State *L = rt->L, *co = t->co;
  int nargs = 0, nres = 0, st, tidx;
  if (t->status == LASH_TASK_DONE || t->status == LASH_TASK_RUNNING) return;
  /* L is the main thread, and it may be deep in nested steps: a wait where
  ** a task cannot yield (a table.sort comparator, a metamethod, a require)
  ** drives the loop in place, which resumes other tasks that may do the
  ** same, each level keeping a slot here. Make room rather than write past
  ** the stack; if there is none, the task runs on a later step. */
  if (!lua_checkstack(L, LUA_MINSTACK)) {
    lash_task_make_ready(t);
    return;
  }
  /* Keep the handle on L's stack while the task runs, so it stays alive
  ** and we can finish it afterwards. */
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->threads_ref);
  lua_pushthread(co);
  lua_xmove(co, L, 1);
  lua_rawget(L, -2);
  lua_remove(L, -2);
  tidx = lua_gettop(L);
  if (!t->started) {
    t->started = 1;
    if (t->cancel_pending) {
      t->cancel_pending = 0;
      lua_settop(co, 0);
      lash_error_push(L, "cancelled", "task cancelled before it started", 0);
      task_finish(L, t, tidx, LASH_OUT_CANCELLED, 1);
      lua_settop(L, tidx - 1);
      return;
    }
    nargs = t->nargs;
  }
  t->status = LASH_TASK_RUNNING;
  /* a budget.call the task is inside counts only its own stretches */
  if (t->budget) lash_budget_enter(co, t->budget);
  st = lua_resume(co, from, nargs, &nres);
  if (t->budget) lash_budget_leave(co, t->budget);
  if (st == LUA_YIELD) {
    if (t->wait == NULL && t->status == LASH_TASK_RUNNING) {
      /* A bare coroutine.yield(): give others a turn, run again next step. */
      lua_pop(co, nres);
      t->status = LASH_TASK_READY;
      lash_task_make_ready(t);
    }
  } else if (st == LUA_OK) {
    /* Not luaL_checkstack: L is not the running thread, it must not raise. */
    if (lua_checkstack(L, nres + LUA_MINSTACK)) {
      lua_xmove(co, L, nres);
      task_finish(L, t, tidx, LASH_OUT_OK, nres);
    } else {
      lua_settop(co, 0);
      lash_error_push(L, "error", "the task returned too many results", 0);
      task_finish(L, t, tidx, LASH_OUT_ERROR, 1);
    }
  } else {
    int outcome;
    lua_xmove(co, L, 1);
    decorate_error(L, co);
    outcome = lash_is_error(L, -1, "cancelled") ? LASH_OUT_CANCELLED
                                                : LASH_OUT_ERROR;
    /* Run the to-be-closed variables the error left pending. */
    lua_resetthread(co);
    task_finish(L, t, tidx, outcome, 1);
  }
  lua_settop(L, tidx - 1);
}

int lash_task_cancel(lash_task *t) {
  if (t->status == LASH_TASK_DONE) return 0;
  t->cancel_pending = 1;
  if (t->status == LASH_TASK_WAITING && t->wait) {
    lash_wait *w = t->wait;
    t->wait = NULL;
    w->cancelled = 1;
    if (w->cancel) w->cancel(w);
    w->done = 1;
    lash_task_make_ready(t);
  }
  return 1;
}

void lash_runtime_cancel_tasks(lash_runtime *rt) {
  lua_State *L = rt->L;
  /* lash_task_cancel only marks and queues (it resumes nothing), so the
  ** table is not changed while we walk it */
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->tasks_ref);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lash_task_cancel(lua_touserdata(L, -2));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

void lash_runtime_abort(lash_runtime *rt) {
  rt->aborting = 1;
  lash_runtime_cancel_tasks(rt);
}

int lash_runtime_aborting(const lash_runtime *rt) { return rt->aborting; }

void lash_runtime_cancel_all(lash_runtime *rt, int grace_ms) {
  uint64_t deadline = lash_now_ns() + (uint64_t)grace_ms * 1000000u;
  lash_runtime_cancel_tasks(rt);
  while (rt->ntasks > 0) {
    /* one reading of the clock: a second one past the deadline would wrap
    ** deadline - now, and a negative timeout waits without a bound */
    uint64_t now = lash_now_ns();
    int left;
    if (now >= deadline) break;
    left = (int)((deadline - now) / 1000000u);
    if (lash_runtime_step(rt, left < 50 ? left : 50) < 0) break;
    if (lash_runtime_stuck(rt)) break;
  }
}

/*** Start fn(...) as a task on the loop.
@function spawn
@treturn task */
static int l_spawn(lua_State *L) {
  lash_runtime *rt = lash_runtime_get(L);
  int nargs = lua_gettop(L) - 1;
  lua_State *co;
  lash_task *t;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  t = lua_newuserdatauv(L, sizeof *t, 2);
  memset(t, 0, sizeof *t);
  luaL_setmetatable(L, LASH_TASK_MT);
  co = lua_newthread(L);
  lua_setiuservalue(L, -2, 1);
  future_new(L);
  t->fut = lua_touserdata(L, -1);
  lua_setiuservalue(L, -2, 2);
  t->rt = rt;
  t->co = co;
  t->id = ++rt->next_id;
  t->status = LASH_TASK_READY;
  /* the function and its arguments wait on the new thread's stack */
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  for (int i = 2; i <= nargs + 1; i++) {
    lua_pushvalue(L, i);
    lua_xmove(L, co, 1);
  }
  t->nargs = nargs;
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->tasks_ref);
  lua_pushvalue(L, -2);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->threads_ref);
  lua_pushthread(co);
  lua_xmove(co, L, 1);
  lua_pushvalue(L, -3);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  rt->ntasks++;
  lash_task_make_ready(t);
  return 1;
}

/* join and wait: mark the task joined and wait on its result future. */
static int task_wait_result(lua_State *L, int raise, const char *self_error) {
  lash_task *t = check_task(L, 1);
  if (t->co == L) return luaL_error(L, "%s", self_error);
  t->joined = 1;
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 2);
  return future_wait_at(L, 2, raise);
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

static int l_task_gc(lua_State *L) {
  lash_task *t = lua_touserdata(L, 1);
  /* An error nobody will ever see is a bug waiting to be lost: say so. */
  if (t->status == LASH_TASK_DONE && !t->joined && t->fut &&
      t->fut->state == LASH_OUT_ERROR && t->rt && t->rt->loop) {
    const char *msg;
    lua_getiuservalue(L, 1, 2);
    lua_getiuservalue(L, -1, 1);
    lua_rawgeti(L, -1, 1);
    msg = luaL_tolstring(L, -1, NULL);
    lash_runtime_log(t->rt, LASH_LOG_WARN, "task %d failed and nobody joined it: %s",
                     (int)t->id, msg);
    lua_pop(L, 4);
  }
  return 0;
}

/* ---- sleep ------------------------------------------------------------ */

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
  luaL_setmetatable(L, "lash.sleep_op");
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

static void make_meta(lua_State *L, const char *name, const luaL_Reg *methods,
                      lua_CFunction gc, lua_CFunction tostring) {
  luaL_newmetatable(L, name);
  if (methods) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
  }
  if (gc) {
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
  }
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
  make_meta(L, LASH_TASK_MT, task_methods, l_task_gc, l_task_tostring);
  make_meta(L, LASH_FUTURE_MT, future_methods, NULL, NULL);
  make_meta(L, "lash.future_waiter", NULL, waiter_gc, NULL);
  make_meta(L, "lash.sleep_op", NULL, sleep_gc, NULL);
  luaL_newlib(L, funcs);
  return 1;
}
