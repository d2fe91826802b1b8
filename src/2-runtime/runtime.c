/*
** runtime.c: the per-lua_State runtime: the loop, the task scheduler
** (tasks are coroutines resumed when the wait they yielded on is done, and
** the futures that carry their results), the in-place driver for waits
** made outside a task, and typed errors. Its Lua face is ltask.c.
** The runtime is a userdata anchored in the registry; it is the first
** finalizable object lash creates, so Lua finalizes it last and every op
** that still holds loop resources can release them first.
** Prefix lash_ by concern (runtime.h, task.h): lash_runtime_, lash_task_,
** lash_wait_, lash_future_, lash_error_ (and lash_is_error).
*/
#include "runtime.h"
#include "task.h"
#include "budget.h"
#include "output.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char RUNTIME_KEY = 0;        /* registry: the runtime */
#define LASH_LOG_MAX 1024                  /* a log line, bytes */
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

static int task_gc(lua_State *L);
static int waiter_gc(lua_State *L);
static void error_meta(lua_State *L);

/* The metatables of what the runtime makes, once per state; ltask.c adds
** the Lua methods of tasks and futures at luaopen. */
static void make_metatables(lua_State *L) {
  if (luaL_newmetatable(L, LASH_TASK_MT)) {
    lua_pushcfunction(L, task_gc);
    lua_setfield(L, -2, "__gc");
  }
  luaL_newmetatable(L, LASH_FUTURE_MT);
  if (luaL_newmetatable(L, LASH_WAITER_MT)) {
    lua_pushcfunction(L, waiter_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 3);
  error_meta(L);
  lua_pop(L, 1);
}

/* stderr: on a terminal, what a log line carries from outside (an MCP
** server's log, a command's path) cannot drive it (lash_term_visible) */
static void default_log(void *ud, int level, const char *msg) {
  char safe[3 * LASH_LOG_MAX + 1];
  (void)ud;
  if (isatty(2)) {
    size_t n = strnlen(msg, LASH_LOG_MAX);
    safe[lash_term_visible(msg, n, safe)] = '\0';
    msg = safe;
  }
  fprintf(stderr, "lash: %s%s\n",
          level >= LASH_LOG_ERROR ? "error: "
          : level == LASH_LOG_WARN ? "warning: " : "", msg);
}

lash_runtime *lash_runtime_open(lua_State *L) {
  lash_runtime *rt;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &RUNTIME_KEY) == LUA_TUSERDATA) {
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
  make_metatables(L);
  rt->loop = lash_loop_new();
  if (!rt->loop) luaL_error(L, "lash: cannot create the event loop (epoll)");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &RUNTIME_KEY);
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

lash_runtime *lash_runtime_find(lua_State *L) {
  lash_runtime *rt;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &RUNTIME_KEY);
  rt = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return rt && rt->loop ? rt : NULL;
}

lash_runtime *lash_runtime_get(lua_State *L) {
  lash_runtime *rt = lash_runtime_find(L);
  if (!rt)
    luaL_error(L, "lash runtime is not open in this state (require \"lash\" first)");
  return rt;
}

lash_loop *lash_runtime_loop(lua_State *L) {
  return lash_runtime_get(L)->loop;
}

void lash_runtime_log(lash_runtime *rt, int level, const char *fmt, ...) {
  char buf[LASH_LOG_MAX];
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
  lua_rawgetp(L, LUA_REGISTRYINDEX, &RUNTIME_KEY);
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
    lash_code_budget *b = lash_budget_suspend(L);
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

/* ---- futures ----------------------------------------------------------- */

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

lash_future *lash_future_new(lua_State *L) {
  lash_future *f = lua_newuserdatauv(L, sizeof *f, 1);
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, LASH_FUTURE_MT);
  return f;
}

/* Settle the future at idx with the n values on top of the stack. */
void lash_future_settle(lua_State *L, int idx, int state, int n) {
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
int lash_future_push(lua_State *L, int idx, int raise) {
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
  return lash_future_push(L, fw->fidx, fw->raise);
}

int lash_future_wait(lua_State *L, int fidx, int raise) {
  lash_future *f = lua_touserdata(L, fidx);
  future_waiter *fw;
  if (f->state != LASH_OUT_NONE) {
    lash_task *t = lash_task_current(L);
    if (t && t->cancel_pending) {
      t->cancel_pending = 0;
      return lash_error_raise(L, "cancelled", "task cancelled");
    }
    return lash_future_push(L, fidx, raise);
  }
  fw = lua_newuserdatauv(L, sizeof *fw, 1);
  memset(fw, 0, sizeof *fw);
  luaL_setmetatable(L, LASH_WAITER_MT);
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

/* ---- tasks ------------------------------------------------------------- */

lash_task *lash_task_spawn(lua_State *L, int fidx, int nargs) {
  lash_runtime *rt = lash_runtime_get(L);
  lua_State *co;
  lash_task *t;
  fidx = lua_absindex(L, fidx);
  t = lua_newuserdatauv(L, sizeof *t, 2);
  memset(t, 0, sizeof *t);
  luaL_setmetatable(L, LASH_TASK_MT);
  co = lua_newthread(L);
  lua_setiuservalue(L, -2, 1);
  t->fut = lash_future_new(L);
  lua_setiuservalue(L, -2, 2);
  t->rt = rt;
  t->co = co;
  t->id = ++rt->next_id;
  t->status = LASH_TASK_READY;
  /* the function and its arguments wait on the new thread's stack */
  for (int i = fidx; i <= fidx + nargs; i++) {
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
  return t;
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
  lash_future_settle(L, base + 1, outcome, n);
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

static int task_gc(lua_State *L) {
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

/* Push the metatable of error objects: made with the runtime, or here on
** first use in a state that has none (a codec used without lash.core). */
static void error_meta(lua_State *L) {
  if (luaL_newmetatable(L, LASH_ERROR_MT)) {
    lua_pushcfunction(L, error_tostring);
    lua_setfield(L, -2, "__tostring");
  }
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
  error_meta(L);
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
