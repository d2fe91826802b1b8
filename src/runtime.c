/*
** runtime.c: the per-lua_State runtime: the loop, the task scheduler
** (tasks are coroutines resumed when the wait they yielded on is done),
** the in-place driver for waits made outside a task, and typed errors.
** The runtime is a userdata anchored in the registry; it is the first
** finalizable object lash creates, so Lua finalizes it last and every op
** that still holds loop resources can release them first.
*/
#include "runtime.h"
#include "task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNTIME_KEY "lash.runtime"        /* registry: the runtime */
#define RUNTIME_MT "lash.runtime.meta"     /* registry: its metatable */

/* ---- runtime ------------------------------------------------------- */

static int runtime_gc(lua_State *L) {
  lash_runtime *rt = luaL_checkudata(L, 1, RUNTIME_MT);
  if (rt->loop) {
    lash_loop_free(rt->loop);
    rt->loop = NULL;
  }
  return 0;
}

static void default_log(void *ud, int level, const char *msg) {
  (void)ud;
  fprintf(stderr, "lash: %s%s\n",
          level >= LASH_LOG_ERROR ? "error: "
          : level == LASH_LOG_WARN ? "warning: " : "", msg);
}

lash_runtime *lash_runtime_open(lua_State *L) {
  lash_runtime *rt;
  if (lua_getfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY) == LUA_TUSERDATA) {
    rt = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return rt;
  }
  lua_pop(L, 1);
  rt = lua_newuserdatauv(L, sizeof *rt, 0);
  memset(rt, 0, sizeof *rt);
  rt->tasks_ref = rt->threads_ref = LUA_NOREF;
  if (luaL_newmetatable(L, RUNTIME_MT)) {
    lua_pushcfunction(L, runtime_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, "lash.runtime");
    lua_setfield(L, -2, "__name");
  }
  lua_setmetatable(L, -2);
  rt->loop = lash_loop_new();
  if (!rt->loop) luaL_error(L, "lash: cannot create the event loop (epoll)");
  lua_setfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
  /* The main thread, not the one that opened lash: that one may be a
  ** coroutine that ends, and tasks are resumed from rt->L. */
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  rt->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_newtable(L);
  rt->tasks_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  rt->threads_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  rt->log = default_log;
  rt->log_is_default = 1;
  return rt;
}

lash_runtime *lash_runtime_get(lua_State *L) {
  lash_runtime *rt;
  lua_getfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
  rt = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!rt || !rt->loop)
    luaL_error(L, "lash runtime is not open in this state (require \"lash\" first)");
  return rt;
}

lash_loop *lash_runtime_loop(lua_State *L) {
  return lash_runtime_get(L)->loop;
}

void lash_runtime_log(lash_runtime *rt, int level, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (rt->log) rt->log(rt->log_ud, level, buf);
}

int lash_runtime_ntasks(lash_runtime *rt) { return rt->ntasks; }

/* ---- ready queue ----------------------------------------------------- */

void lash_task_make_ready(lash_task *t) {
  lash_runtime *rt = t->rt;
  if (t->in_ready || t->status == LASH_TASK_DONE) return;
  t->in_ready = 1;
  t->status = LASH_TASK_READY;
  t->next_ready = NULL;
  if (rt->ready_tail) {
    rt->ready_tail->next_ready = t;
  } else {
    rt->ready_head = t;
    /* The queue just became non-empty: a host waiting on the loop's fd
    ** (lash_fd) must wake up to step (no-op unless it asked for that). */
    lash_loop_wake(rt->loop);
  }
  rt->ready_tail = t;
}

/* ---- waits ----------------------------------------------------------- */

void lash_wait_init(lash_wait *w, void (*cancel)(lash_wait *w)) {
  memset(w, 0, sizeof *w);
  w->cancel = cancel;
}

void lash_wait_done(lash_wait *w) {
  lash_task *t;
  if (w->done) return;
  w->done = 1;
  t = w->task;
  if (t && t->wait == w) {
    t->wait = NULL;
    lash_task_make_ready(t);
  }
}

lash_task *lash_task_current(lua_State *L) {
  lash_runtime *rt;
  lash_task *t = NULL;
  lua_getfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
  rt = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!rt || rt->threads_ref == LUA_NOREF) return NULL;
  lua_rawgeti(L, LUA_REGISTRYINDEX, rt->threads_ref);
  lua_pushthread(L);
  if (lua_rawget(L, -2) == LUA_TUSERDATA) t = lua_touserdata(L, -1);
  lua_pop(L, 2);
  return t;
}

static int raise_cancelled(lua_State *L) {
  return lash_error_raise(L, "cancelled", "task cancelled");
}

void lash_wait_check(lua_State *L, lash_wait *w) {
  lash_task *t = w->task;
  if (w->cancelled || (t && t->cancel_pending)) {
    if (t) t->cancel_pending = 0;
    w->cancelled = 1;
    raise_cancelled(L);
  }
}

/* A wait given up with an error (its continuation never runs): stop what
** the op started now, rather than when the collector finds the op. */
static void abandon(lash_wait *w) {
  if (!w->done && w->cancel) w->cancel(w);
  w->done = 1;
}

/* Step the loop from L until w is done: 0, or 1 loop failure, 2 aborting
** (cancelled), 3 stuck (each with w abandoned). */
static int drive_until(lash_runtime *rt, lash_wait *w, lua_State *L) {
  while (!w->done) {
    if (lash_runtime_step_from(rt, -1, L, 0) < 0) {
      abandon(w);
      return 1;
    }
    if (!w->done && rt->aborting) {
      abandon(w);
      w->cancelled = 1;
      return 2;
    }
    if (!w->done && lash_runtime_stuck(rt)) {
      abandon(w);
      return 3;
    }
  }
  return 0;
}

int lash_wait_yield(lua_State *L, lash_wait *w, lua_KContext ctx,
                    lua_KFunction k) {
  lash_runtime *rt = lash_runtime_get(L);
  lash_task *t = lash_task_current(L);
  w->rt = rt;
  if (t && t->cancel_pending) {
    /* The task was cancelled while running: this wait is the one that
    ** delivers it. Stop whatever the op started, then raise. */
    if (!w->done && w->cancel) w->cancel(w);
    w->done = 1;
    w->cancelled = 1;
    t->cancel_pending = 0;
    return raise_cancelled(L);
  }
  if (w->done) return k(L, LUA_OK, ctx);
  if (rt->aborting) {
    /* the host is on its way out (lash_runtime_abort): nothing waits */
    abandon(w);
    w->cancelled = 1;
    if (t) t->cancel_pending = 0;
    return raise_cancelled(L);
  }
  if (t && t->co == L && lua_isyieldable(L)) {
    w->task = t;
    t->wait = w;
    t->status = LASH_TASK_WAITING;
    return lua_yieldk(L, 0, ctx, k);
  }
  /* Not a task (a plain script, a foreign coroutine, a __close during a
  ** reset): drive the loop, and every task with it, until w is done. A
  ** budget in place is this code's, not the other tasks': off meanwhile. */
  {
    void *b = lash_budget_suspend(L);
    int rc = drive_until(rt, w, L);
    if (b) lash_budget_enter(L, b);
    if (rc == 1) return luaL_error(L, "lash: event loop failure");
    if (rc == 2) return raise_cancelled(L);
    if (rc == 3)
      return lash_error_raise(L, "deadlock",
                              "waiting for something that can no longer "
                              "happen: no task or I/O is left to complete it");
  }
  return k(L, LUA_OK, ctx);
}

/* ---- scheduling ------------------------------------------------------ */

int lash_runtime_step_from(lash_runtime *rt, int timeout_ms, lua_State *from,
                           uint64_t deadline) {
  lash_task *batch;
  int rc;
  if (rt->ready_head) timeout_ms = 0;
  /* Nothing could ever wake an unbounded wait: don't block forever. */
  else if (timeout_ms < 0 && !lash_loop_alive(rt->loop)) timeout_ms = 0;
  rc = lash_loop_run_once(rt->loop, timeout_ms);
  if (rc < 0) return -1;
  /* Resume only what is ready now; tasks made ready while these run wait
  ** for the next step, so one step never runs a task twice. The batch is
  ** detached so that a step nested inside a resumed task (a wait that
  ** drives the loop in place) cannot take it over. */
  batch = rt->ready_head;
  rt->ready_head = rt->ready_tail = NULL;
  while (batch) {
    lash_task *t = batch;
    batch = t->next_ready;
    t->next_ready = NULL;
    t->in_ready = 0;
    lash_task_resume(t, from);
    if (batch && deadline && lash_now_ns() >= deadline) {
      /* Out of time: the rest keep their place ahead of newcomers. */
      lash_task *tail = batch;
      while (tail->next_ready) tail = tail->next_ready;
      tail->next_ready = rt->ready_head;
      if (!rt->ready_head) rt->ready_tail = tail;
      rt->ready_head = batch;
      break;
    }
  }
  return rt->ntasks > 0 || rt->ready_head != NULL;
}

int lash_runtime_step(lash_runtime *rt, int timeout_ms) {
  return lash_runtime_step_from(rt, timeout_ms, rt->L, 0);
}

int lash_runtime_run(lash_runtime *rt) {
  int rc;
  if (rt->ntasks == 0) return 0;
  while ((rc = lash_runtime_step(rt, -1)) > 0) {
    if (lash_runtime_stuck(rt)) {
      lash_runtime_log(rt, LASH_LOG_WARN,
                       "%d task(s) wait for something that can no longer "
                       "happen; giving up on them", rt->ntasks);
      return -2;
    }
  }
  return rc;
}

/* ---- typed errors ---------------------------------------------------- */

static int error_tostring(lua_State *L) {
  const char *kind, *msg;
  lua_getfield(L, 1, "kind");
  lua_getfield(L, 1, "message");
  kind = lua_tostring(L, -2);
  msg = lua_tostring(L, -1);
  if (kind && msg) lua_pushfstring(L, "%s: %s", kind, msg);
  else if (msg) lua_pushstring(L, msg);
  else lua_pushstring(L, kind ? kind : "error");
  return 1;
}

void lash_error_push(lua_State *L, const char *kind, const char *message,
                     int retryable) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  lua_pushboolean(L, retryable);
  lua_setfield(L, -2, "retryable");
  if (luaL_newmetatable(L, LASH_ERROR_MT)) {
    lua_pushcfunction(L, error_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "lash.error");
    lua_setfield(L, -2, "__name");
  }
  lua_setmetatable(L, -2);
}

int lash_error_raise(lua_State *L, const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lash_error_push(L, kind, lua_tostring(L, -1), 0);
  lua_remove(L, -2);
  return lua_error(L);
}

int lash_error_result(lua_State *L, const char *kind, const char *fmt, ...) {
  va_list ap;
  luaL_pushfail(L);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushstring(L, kind);
  return 3;
}

int lash_is_error(lua_State *L, int idx, const char *kind) {
  int ok = 0;
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
  luaL_getmetatable(L, LASH_ERROR_MT);
  ok = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (ok && kind) {
    lua_getfield(L, idx, "kind");
    ok = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), kind) == 0;
    lua_pop(L, 1);
  }
  return ok;
}
