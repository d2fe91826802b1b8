/*
** embed.c: the agent half of lash.h: loading agent specs, template values,
** host tools (C callbacks answered now or frames later), runs and their
** events as JSON, approvals answered from C, and the handles' lifetimes.
**
** The Lua side is lua/lash/embed.lua, one instance per lash_State, made on
** first use; the C functions it calls back are closures over a small
** handle userdata that lash_close clears, so Lua code that outlives the
** state (an attached Lua state) is refused instead of reaching freed
** memory.
**
** A tool call or an approval waits like any lash I/O (runtime.h): an op
** userdata with a lash_wait sits on the waiting task's stack, and the
** host's answer calls lash_wait_done. The host-visible records (lash_Run,
** lash_Call) are malloc'd and owned by the host's run handle, so a late or
** doubled answer meets a record that still exists and gets LASH_EGONE or
** LASH_EARG rather than undefined behaviour. An op and its record point
** at each other; whichever goes first clears the other's pointer.
**
** embed.c sits above state.c: what it keeps on a lash_State (embed_state:
** the glue, the runs, the event handler) hangs off S->ext, made on first
** use, and lash_close lets it go through the hooks registered with it
** (embed_shutdown, embed_release). Prefix: lash_* (lash.h) and static.
*/
#include "lash.h"
#include "state.h"
#include "lauxlib.h"
#include "runtime.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_MT "lash.embed.handle"
#define TOOL_MT "lash.embed.tool"
#define CALLOP_MT "lash.embed.call_op"
#define APPROP_MT "lash.embed.approval_op"

typedef struct lash_handle {
  lash_State *S;          /* NULL once the state is closed */
} lash_handle;

/* What the embedding API keeps on a lash_State (S->ext). */
typedef struct embed_state {
  lash_EventFn on_event;
  void *event_ud;
  int glue_ref;          /* registry ref of the lash.embed instance, or LUA_NOREF */
  lash_handle *handle;   /* what the glue's C functions see; cleared at close */
  lash_Run *runs;        /* every run the host has not freed */
} embed_state;

static void embed_shutdown(lash_State *S, int grace_ms);
static void embed_release(lash_State *S);
static const lashS_hooks embed_hooks = {embed_shutdown, embed_release};

/* S's embed_state, or NULL before the first use. */
static embed_state *embed_of(const lash_State *S) { return S->ext; }

/* S's embed_state, made (and its hooks registered) on first use; NULL with
** the error set when memory is out. */
static embed_state *embed_open(lash_State *S, const char *who) {
  embed_state *E = S->ext;
  if (E) return E;
  if (!(E = calloc(1, sizeof *E))) {
    lashS_seterr(S, "%s: out of memory", who);
    return NULL;
  }
  E->glue_ref = LUA_NOREF;
  S->ext = E;
  S->ext_hooks = &embed_hooks;
  return E;
}

/* A registered host tool; a userdata the tool's Lua handler keeps. */
typedef struct host_tool {
  lash_ToolFn fn;         /* NULL once unregistered */
  void *ud;
} host_tool;

typedef struct call_op call_op;
typedef struct appr_op appr_op;

enum { ANSWER_RETURN, ANSWER_RETRY, ANSWER_FAIL };
static const char *const answer_names[] = {"return", "retry", "fail"};

struct lash_Call {
  lash_Run *run;
  lash_Call *next;        /* run->calls */
  call_op *op;            /* the waiting op, NULL once it took the answer */
  int state;              /* LASH_CALL_* */
  int answer;             /* ANSWER_* */
  char *text;             /* the answer until the task takes it */
  const char *id, *name, *args;  /* stored after the struct */
};

enum { APPR_ASKED, APPR_ANSWERED, APPR_TAKEN, APPR_CANCELLED };

typedef struct approval {
  struct approval *next;
  lash_Run *run;
  appr_op *op;
  int state;
  int allow;
  char *message;
  char id[];
} approval;

struct lash_Run {
  lash_State *S;          /* NULL once the state is closed */
  lash_Run *prev, *next;  /* embed_state.runs */
  int status;             /* LASH_RUN_RUNNING until it ends */
  int host_freed;         /* lash_run_free while it was going */
  int task_ref;           /* registry: the agent task, while it runs */
  int asked;              /* approvals asked and not answered */
  char run_id[48];        /* the agent's run id, once started */
  char *output, *result;
  lash_Call *calls;
  approval *approvals;
};

struct call_op {
  lash_wait w;            /* first: the wait the task yields on */
  lash_Call *call;
};

struct appr_op {
  lash_wait w;
  approval *rec;
};

static char *dupstr(const char *s) {
  size_t n;
  char *p;
  if (!s) return NULL;
  n = strlen(s) + 1;
  if ((p = malloc(n)) != NULL) memcpy(p, s, n);
  return p;
}

static int finished(const lash_Run *run) {
  return run->status >= LASH_RUN_DONE;
}

/* ---- records ----------------------------------------------------------- */

static void settle_records(lash_Run *run) {
  lash_Call *c;
  approval *a;
  for (c = run->calls; c; c = c->next) {
    if (c->state == LASH_CALL_PENDING) c->state = LASH_CALL_CANCELLED;
    if (c->op) {
      c->op->call = NULL;
      c->op = NULL;
    }
  }
  for (a = run->approvals; a; a = a->next) {
    if (a->state == APPR_ASKED) a->state = APPR_CANCELLED;
    if (a->op) {
      a->op->rec = NULL;
      a->op = NULL;
    }
  }
  run->asked = 0;
}

static void free_run(lash_Run *run) {
  lash_Call *c, *cn;
  approval *a, *an;
  settle_records(run);
  for (c = run->calls; c; c = cn) {
    cn = c->next;
    free(c->text);
    free(c);
  }
  for (a = run->approvals; a; a = an) {
    an = a->next;
    free(a->message);
    free(a);
  }
  free(run->output);
  free(run->result);
  free(run);
}

static void unlink_run(lash_Run *run) {
  lash_State *S = run->S;
  if (!S) return;
  if (run->prev) run->prev->next = run->next;
  else embed_of(S)->runs = run->next;
  if (run->next) run->next->prev = run->prev;
  run->prev = run->next = NULL;
}

static approval *find_approval(lash_Run *run, const char *id) {
  approval *a;
  for (a = run->approvals; a; a = a->next)
    if (strcmp(a->id, id) == 0) return a;
  return NULL;
}

static approval *new_approval(lua_State *L, lash_Run *run, const char *id) {
  size_t n = strlen(id) + 1;
  approval *a = calloc(1, sizeof *a + n);
  if (!a) luaL_error(L, "lash: out of memory");
  memcpy(a->id, id, n);
  a->state = APPR_ASKED;
  a->run = run;
  a->next = run->approvals;
  run->approvals = a;
  run->asked++;
  return a;
}

/* ---- the C functions embed.lua calls -------------------------------------- */

static lash_State *hstate(lua_State *L) {
  lash_handle *h = lua_touserdata(L, lua_upvalueindex(1));
  if (!h || !h->S)
    luaL_error(L, "lash: the lash_State of this Lua state was closed");
  return h->S;
}

static lash_Run *check_run(lua_State *L, int idx) {
  lash_Run *run = lua_touserdata(L, idx);
  if (!run) luaL_argerror(L, idx, "a run handle expected");
  return run;
}

/* Tell the host (a tool_cancelled event) that the run no longer waits for
** a call it was given: the run was cancelled, or the call was (a sibling
** call failed, a timeout). Not after lash_run_free or inside lash_close,
** which deliver no events. Runs in the task, from inside lash_step. */
static void tell_cancelled(lua_State *L, lash_Call *c) {
  lash_State *S = c->run->S;
  embed_state *E = S ? embed_of(S) : NULL;
  if (!E || S->closing || !E->on_event || c->run->host_freed ||
      E->glue_ref == LUA_NOREF)
    return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, E->glue_ref);
  lua_getfield(L, -1, "tool_cancelled");
  lua_remove(L, -2);
  lua_pushlightuserdata(L, c->run);
  lua_pushstring(L, c->id);
  lua_pushstring(L, c->name);
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_WARN, "could not send "
                     "tool_cancelled for call %s: %s", c->id,
                     lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static int call_k(lua_State *L, int status, lua_KContext ctx) {
  call_op *op = (call_op *)ctx;
  lash_Call *c = op->call;
  (void)status;
  if (c) {
    c->op = NULL;
    op->call = NULL;
    /* only call_cancel turns a call it still waits for into CANCELLED */
    if (c->state == LASH_CALL_CANCELLED) tell_cancelled(L, c);
  }
  lash_wait_check(L, &op->w);
  if (!c || c->state != LASH_CALL_ANSWERED)
    return lash_error_raise(L, "cancelled", "the host dropped the tool call");
  lua_pushstring(L, answer_names[c->answer]);
  lua_pushstring(L, c->text ? c->text : "");
  free(c->text);
  c->text = NULL;
  return 2;
}

static void call_cancel(lash_wait *w) {
  call_op *op = (call_op *)w;
  if (op->call && op->call->state == LASH_CALL_PENDING)
    op->call->state = LASH_CALL_CANCELLED;
}

static int callop_gc(lua_State *L) {
  call_op *op = lua_touserdata(L, 1);
  if (op->call) {
    if (op->call->state == LASH_CALL_PENDING)
      op->call->state = LASH_CALL_CANCELLED;
    op->call->op = NULL;
    op->call = NULL;
  }
  return 0;
}

/* call_tool(tool, run, call_id, name, args_json) -> kind, text (waits) */
static int l_call_tool(lua_State *L) {
  lash_State *S = hstate(L);
  host_tool *ht = luaL_checkudata(L, 1, TOOL_MT);
  lash_Run *run = check_run(L, 2);
  size_t il, nl, al;
  const char *id = luaL_checklstring(L, 3, &il);
  const char *name = luaL_checklstring(L, 4, &nl);
  const char *args = luaL_checklstring(L, 5, &al);
  call_op *op;
  lash_Call *c;
  char *p;
  if (S->closing || run->host_freed)
    return lash_error_raise(L, "cancelled", "the run was %s",
                            S->closing ? "closed with its state" : "freed");
  if (!ht->fn) {
    lua_pushliteral(L, "retry");
    lua_pushfstring(L, "Tool '%s' is no longer available.", name);
    return 2;
  }
  lua_settop(L, 5);
  op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, CALLOP_MT);
  c = calloc(1, sizeof *c + il + nl + al + 3);
  if (!c) return luaL_error(L, "lash: out of memory");
  p = (char *)(c + 1);
  memcpy(p, id, il + 1);
  c->id = p;
  p += il + 1;
  memcpy(p, name, nl + 1);
  c->name = p;
  p += nl + 1;
  memcpy(p, args, al + 1);
  c->args = p;
  c->run = run;
  c->state = LASH_CALL_PENDING;
  c->next = run->calls;
  run->calls = c;
  c->op = op;
  op->call = c;
  lash_wait_init(&op->w, call_cancel);
  S->depth++;
  ht->fn(c, c->args, ht->ud);
  S->depth--;
  if (c->state == LASH_CALL_PENDING) {
    /* cancelled from inside the callback: the wait below raises at once,
    ** without call_k, so tell the host here */
    lash_task *t = lash_task_current(L);
    if (t && t->cancel_pending) {
      c->state = LASH_CALL_CANCELLED;
      tell_cancelled(L, c);
    }
  }
  return lash_wait_yield(L, &op->w, (lua_KContext)op, call_k);
}

static int appr_k(lua_State *L, int status, lua_KContext ctx) {
  appr_op *op = (appr_op *)ctx;
  approval *a = op->rec;
  (void)status;
  if (a) {
    a->op = NULL;
    op->rec = NULL;
  }
  lash_wait_check(L, &op->w);
  if (!a || a->state != APPR_ANSWERED)
    return lash_error_raise(L, "cancelled", "the approval was dropped");
  a->state = APPR_TAKEN;
  lua_pushboolean(L, a->allow);
  if (a->message) lua_pushstring(L, a->message);
  else lua_pushnil(L);
  return 2;
}

static void appr_drop(approval *a) {
  if (a && a->state == APPR_ASKED) {
    a->state = APPR_CANCELLED;
    a->run->asked--;
  }
}

static void appr_cancel(lash_wait *w) { appr_drop(((appr_op *)w)->rec); }

static int approp_gc(lua_State *L) {
  appr_op *op = lua_touserdata(L, 1);
  if (op->rec) {
    appr_drop(op->rec);
    op->rec->op = NULL;
    op->rec = NULL;
  }
  return 0;
}

/* expect_approval(run, call_id): an approval_request is about to be
** delivered, so the host may answer it from the event callback. */
static int l_expect_approval(lua_State *L) {
  lash_Run *run;
  const char *id;
  hstate(L);
  run = check_run(L, 1);
  id = luaL_checkstring(L, 2);
  if (!find_approval(run, id)) new_approval(L, run, id);
  return 0;
}

/* approval(run, call_id) -> allow, message|nil (waits for lash_run_approve) */
static int l_approval(lua_State *L) {
  lash_State *S = hstate(L);
  lash_Run *run = check_run(L, 1);
  const char *id = luaL_checkstring(L, 2);
  approval *a;
  appr_op *op;
  if (S->closing || run->host_freed)
    return lash_error_raise(L, "cancelled", "the run was %s",
                            S->closing ? "closed with its state" : "freed");
  lua_settop(L, 2);
  a = find_approval(run, id);
  if (!a) {
    a = new_approval(L, run, id);
  } else if (a->state == APPR_TAKEN || a->state == APPR_CANCELLED) {
    /* the same call asked again (a resumed turn): a new question */
    a->state = APPR_ASKED;
    run->asked++;
    free(a->message);
    a->message = NULL;
  }
  if (a->state == APPR_ANSWERED) {
    a->state = APPR_TAKEN;
    lua_pushboolean(L, a->allow);
    if (a->message) lua_pushstring(L, a->message);
    else lua_pushnil(L);
    return 2;
  }
  op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, APPROP_MT);
  lash_wait_init(&op->w, appr_cancel);
  op->rec = a;
  a->op = op;
  return lash_wait_yield(L, &op->w, (lua_KContext)op, appr_k);
}

/* emit(run, event_json) */
static int l_emit(lua_State *L) {
  lash_State *S = hstate(L);
  lash_Run *run = check_run(L, 1);
  const char *json = luaL_checkstring(L, 2);
  embed_state *E = embed_of(S);
  if (S->closing || !E->on_event || run->host_freed) return 0;
  S->depth++;
  E->on_event(run, json, E->event_ud);
  S->depth--;
  return 0;
}

static int l_wants_events(lua_State *L) {
  lash_State *S = hstate(L);
  lua_pushboolean(L, embed_of(S)->on_event != NULL && !S->closing);
  return 1;
}

/* started(run, agent_run_id) */
static int l_started(lua_State *L) {
  lash_Run *run;
  hstate(L);
  run = check_run(L, 1);
  snprintf(run->run_id, sizeof run->run_id, "%s", luaL_checkstring(L, 2));
  return 0;
}

static int l_run_id(lua_State *L) {
  lash_Run *run;
  hstate(L);
  run = check_run(L, 1);
  if (run->run_id[0]) lua_pushstring(L, run->run_id);
  else lua_pushnil(L);
  return 1;
}

/* finish(run, "done"|"failed"|"cancelled", output|nil, result_json) */
static int l_finish(lua_State *L) {
  static const char *const names[] = {"done", "failed", "cancelled", NULL};
  static const int codes[] = {LASH_RUN_DONE, LASH_RUN_FAILED, LASH_RUN_CANCELLED};
  lash_State *S = hstate(L);
  lash_Run *run = check_run(L, 1);
  int st = luaL_checkoption(L, 2, NULL, names);
  const char *output = luaL_optstring(L, 3, NULL);
  const char *json = luaL_checkstring(L, 4);
  if (finished(run)) return 0;
  run->output = dupstr(output);
  run->result = dupstr(json);
  if ((output && !run->output) || !run->result)
    lash_runtime_log(lash_runtime_get(L), LASH_LOG_ERROR,
                     "out of memory keeping the result of run %s", run->run_id);
  run->status = codes[st];
  luaL_unref(L, LUA_REGISTRYINDEX, run->task_ref);
  run->task_ref = LUA_NOREF;
  settle_records(run);
  if (run->host_freed) {
    unlink_run(run);
    free_run(run);
  }
  (void)S;
  return 0;
}

/* ---- the glue instance ------------------------------------------------- */

static void make_meta(lua_State *L, const char *name, lua_CFunction gc) {
  if (luaL_newmetatable(L, name) && gc) {
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
}

/* Push the state's lash.embed instance, making it on first use. */
static void push_glue(lua_State *L, lash_State *S) {
  static const luaL_Reg core[] = {
    {"call_tool", l_call_tool}, {"approval", l_approval},
    {"expect_approval", l_expect_approval}, {"emit", l_emit},
    {"wants_events", l_wants_events}, {"started", l_started},
    {"run_id", l_run_id}, {"finish", l_finish}, {NULL, NULL}};
  embed_state *E = embed_of(S);
  lash_handle *h;
  if (E->glue_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, E->glue_ref);
    return;
  }
  make_meta(L, HANDLE_MT, NULL);
  make_meta(L, TOOL_MT, NULL);
  make_meta(L, CALLOP_MT, callop_gc);
  make_meta(L, APPROP_MT, approp_gc);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lash.embed");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "new");
  lua_remove(L, -2);
  lua_newtable(L);
  h = lua_newuserdatauv(L, sizeof *h, 0);
  h->S = NULL;
  luaL_setmetatable(L, HANDLE_MT);
  luaL_setfuncs(L, core, 1);
  lua_call(L, 1, 1);
  lua_pushvalue(L, -1);
  E->glue_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  h->S = S;
  E->handle = h;
}

/* One call into the glue, run protected by glue_call. */
typedef struct gcall {
  lash_State *S;
  const char *method;
  lash_Run *run;          /* passed first, as light userdata, when set */
  lash_ToolFn fn;         /* register: make the tool record, pass it first */
  void *fn_ud;
  int nstr;
  const char *str[4];     /* string arguments (NULL: nil) */
  int has_int;            /* then one integer argument */
  lua_Integer ival;
  int keep;               /* keep the result in the registry (ref) */
  int ref;
  int kill_tool;          /* unregister: the result is the tool record */
} gcall;

static int p_glue(lua_State *L) {
  gcall *g = lua_touserdata(L, 1);
  int nargs = 0, i;
  lua_settop(L, 0);
  push_glue(L, g->S);
  lua_getfield(L, -1, g->method);
  lua_remove(L, -2);
  if (g->fn) {
    host_tool *t = lua_newuserdatauv(L, sizeof *t, 0);
    t->fn = g->fn;
    t->ud = g->fn_ud;
    luaL_setmetatable(L, TOOL_MT);
    nargs++;
  }
  if (g->run) {
    lua_pushlightuserdata(L, g->run);
    nargs++;
  }
  for (i = 0; i < g->nstr; i++) {
    if (g->str[i]) lua_pushstring(L, g->str[i]);
    else lua_pushnil(L);
    nargs++;
  }
  if (g->has_int) {
    lua_pushinteger(L, g->ival);
    nargs++;
  }
  lua_call(L, nargs, 1);
  if (g->kill_tool) {
    host_tool *t = luaL_testudata(L, -1, TOOL_MT);
    if (t) t->fn = NULL;
  }
  if (g->keep) g->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

static int glue_call(gcall *g) {
  lash_State *S = g->S;
  if (!embed_open(S, g->method)) return LASH_EMEM;
  lua_pushcfunction(S->L, p_glue);
  lua_pushlightuserdata(S->L, g);
  return lashS_pcall(S, 1, 0);
}

static void gcall_init(gcall *g, lash_State *S, const char *method) {
  memset(g, 0, sizeof *g);
  g->S = S;
  g->method = method;
  g->ref = LUA_NOREF;
}

/* ---- agents, values, tools ------------------------------------------------ */

int lash_load_spec_file(lash_State *S, const char *path) {
  gcall g;
  int st;
  if ((st = lashS_check(S, "lash_load_spec_file")) != LASH_OK) return st;
  if (!path) {
    lashS_seterr(S, "lash_load_spec_file: NULL path");
    return LASH_EARG;
  }
  gcall_init(&g, S, "load_file");
  g.nstr = 1;
  g.str[0] = path;
  return glue_call(&g);
}

static int load_string(lash_State *S, const char *text, const char *name,
                       int safe, const char *who) {
  gcall g;
  int st;
  if ((st = lashS_check(S, who)) != LASH_OK) return st;
  if (!text) {
    lashS_seterr(S, "%s: NULL text", who);
    return LASH_EARG;
  }
  gcall_init(&g, S, "load_string");
  g.nstr = 2;
  g.str[0] = text;
  g.str[1] = name;
  g.has_int = 1;
  g.ival = safe;
  return glue_call(&g);
}

int lash_load_spec_string(lash_State *S, const char *text, const char *name) {
  return load_string(S, text, name, 0, "lash_load_spec_string");
}

int lash_load_spec_string_safe(lash_State *S, const char *text,
                               const char *name) {
  return load_string(S, text, name, 1, "lash_load_spec_string_safe");
}

int lash_set_value(lash_State *S, const char *key, const char *value) {
  gcall g;
  int st;
  if ((st = lashS_check(S, "lash_set_value")) != LASH_OK) return st;
  if (!key) {
    lashS_seterr(S, "lash_set_value: NULL key");
    return LASH_EARG;
  }
  gcall_init(&g, S, "set_value");
  g.nstr = 2;
  g.str[0] = key;
  g.str[1] = value;
  return glue_call(&g);
}

#define TOOL_FLAGS LASH_TOOL_REQUIRES_APPROVAL

static int register_tool(lash_State *S, const char *name,
                         const char *description, const char *json_schema,
                         unsigned flags, lash_ToolFn fn, void *ud,
                         const char *who) {
  gcall g;
  int st;
  if ((st = lashS_check(S, who)) != LASH_OK) return st;
  if (!name || !fn) {
    lashS_seterr(S, "%s: NULL %s", who, name ? "callback" : "name");
    return LASH_EARG;
  }
  if (flags & ~(unsigned)TOOL_FLAGS) {
    lashS_seterr(S, "%s '%s': unknown flags 0x%x (this lash knows "
                 "LASH_TOOL_REQUIRES_APPROVAL)", who, name,
                 flags & ~(unsigned)TOOL_FLAGS);
    return LASH_EARG;
  }
  gcall_init(&g, S, "register_tool");
  g.fn = fn;
  g.fn_ud = ud;
  g.nstr = 3;
  g.str[0] = name;
  g.str[1] = description;
  g.str[2] = json_schema;
  g.has_int = 1;
  g.ival = (lua_Integer)flags;
  return glue_call(&g);
}

int lash_register_tool(lash_State *S, const char *name,
                       const char *description, const char *json_schema,
                       lash_ToolFn fn, void *ud) {
  return register_tool(S, name, description, json_schema, 0, fn, ud,
                       "lash_register_tool");
}

int lash_register_tool_ex(lash_State *S, const char *name,
                          const char *description, const char *json_schema,
                          unsigned flags, lash_ToolFn fn, void *ud) {
  return register_tool(S, name, description, json_schema, flags, fn, ud,
                       "lash_register_tool_ex");
}

int lash_unregister_tool(lash_State *S, const char *name) {
  gcall g;
  int st;
  if ((st = lashS_check(S, "lash_unregister_tool")) != LASH_OK) return st;
  if (!name) {
    lashS_seterr(S, "lash_unregister_tool: NULL name");
    return LASH_EARG;
  }
  gcall_init(&g, S, "unregister_tool");
  g.nstr = 1;
  g.str[0] = name;
  g.kill_tool = 1;
  return glue_call(&g);
}

int lash_register_hook(lash_State *S, const char *hook, lash_HookFn fn,
                       void *ud) {
  gcall g;
  int st;
  if ((st = lashS_check(S, "lash_register_hook")) != LASH_OK) return st;
  if (!hook) {
    lashS_seterr(S, "lash_register_hook: NULL hook name");
    return LASH_EARG;
  }
  gcall_init(&g, S, fn ? "register_hook" : "unregister_hook");
  g.fn = fn;        /* the hook's record, like a tool's (same signature) */
  g.fn_ud = ud;
  g.nstr = 1;
  g.str[0] = hook;
  g.kill_tool = 1;  /* the result is the record it replaced, if any */
  return glue_call(&g);
}

/* ---- calls -------------------------------------------------------------- */

static int answer(lash_Call *c, int kind, const char *text, const char *who) {
  lash_State *S;
  char *copy;
  if (!c) return LASH_EARG;
  S = c->run->S;
  if (c->state == LASH_CALL_ANSWERED) {
    lashS_seterr(S, "%s: call %s (%s) was answered already; answer each call "
                 "exactly once", who, c->id, c->name);
    return LASH_EARG;
  }
  if (c->state == LASH_CALL_CANCELLED || !S) {
    lashS_seterr(S, "%s: call %s (%s) is no longer waited for (its run was "
                 "cancelled or ended)", who, c->id, c->name);
    return LASH_EGONE;
  }
  if (kind != ANSWER_RETURN && !text) {
    lashS_seterr(S, "%s: NULL message", who);
    return LASH_EARG;
  }
  if (!(copy = dupstr(text ? text : ""))) {
    lashS_seterr(S, "%s: out of memory", who);
    return LASH_EMEM;
  }
  c->state = LASH_CALL_ANSWERED;
  c->answer = kind;
  c->text = copy;
  if (c->op) lash_wait_done(&c->op->w);
  return LASH_OK;
}

int lash_call_return(lash_Call *call, const char *text) {
  return answer(call, ANSWER_RETURN, text, "lash_call_return");
}

int lash_call_retry(lash_Call *call, const char *message) {
  return answer(call, ANSWER_RETRY, message, "lash_call_retry");
}

int lash_call_fail(lash_Call *call, const char *message) {
  return answer(call, ANSWER_FAIL, message, "lash_call_fail");
}

int lash_call_status(const lash_Call *call) {
  return call ? call->state : LASH_EARG;
}

const char *lash_call_id(const lash_Call *call) { return call ? call->id : NULL; }
const char *lash_call_name(const lash_Call *call) { return call ? call->name : NULL; }
const char *lash_call_args(const lash_Call *call) { return call ? call->args : NULL; }
lash_Run *lash_call_run(const lash_Call *call) { return call ? call->run : NULL; }

/* ---- runs --------------------------------------------------------------- */

int lash_set_event_handler(lash_State *S, lash_EventFn fn, void *ud) {
  int st;
  embed_state *E;
  if ((st = lashS_check(S, "lash_set_event_handler")) != LASH_OK) return st;
  if (!(E = embed_open(S, "lash_set_event_handler"))) return LASH_EMEM;
  E->on_event = fn;
  E->event_ud = ud;
  return LASH_OK;
}

int lash_run_start(lash_State *S, const char *prompt,
                   const char *options_json, lash_Run **out) {
  gcall g;
  lash_Run *run;
  embed_state *E;
  int st;
  if (out) *out = NULL;
  if ((st = lashS_check(S, "lash_run_start")) != LASH_OK) return st;
  if (!(E = embed_open(S, "lash_run_start"))) return LASH_EMEM;
  if (!out) {
    lashS_seterr(S, "lash_run_start: NULL run pointer (where the handle goes)");
    return LASH_EARG;
  }
  if (!(run = calloc(1, sizeof *run))) {
    lashS_seterr(S, "lash_run_start: out of memory");
    return LASH_EMEM;
  }
  run->S = S;
  run->status = LASH_RUN_RUNNING;
  run->task_ref = LUA_NOREF;
  run->next = E->runs;
  if (E->runs) E->runs->prev = run;
  E->runs = run;
  gcall_init(&g, S, "start");
  g.run = run;
  g.nstr = 2;
  g.str[0] = prompt;
  g.str[1] = options_json;
  g.keep = 1;
  if ((st = glue_call(&g)) != LASH_OK) {
    unlink_run(run);
    free_run(run);
    return st;
  }
  run->task_ref = g.ref;
  *out = run;
  return LASH_OK;
}

int lash_run_status(const lash_Run *run) {
  if (!run) return LASH_EARG;
  if (finished(run)) return run->status;
  return run->asked > 0 ? LASH_RUN_APPROVAL : LASH_RUN_RUNNING;
}

int lash_run_result(const lash_Run *run, const char **output,
                    const char **result_json) {
  if (!run) return LASH_EARG;
  if (!finished(run)) {
    lashS_seterr(run->S, "lash_run_result: the run is still going (wait for "
                 "lash_run_status to say it ended, or for its run_end event)");
    return LASH_EBUSY;
  }
  if (output) *output = run->output;
  if (result_json) *result_json = run->result;
  return LASH_OK;
}

static void cancel_task(lash_Run *run) {
  lua_State *L = run->S->L;
  if (run->task_ref == LUA_NOREF || !L) return;
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, run->task_ref) == LUA_TUSERDATA)
    lash_task_cancel(lua_touserdata(L, -1));
  lua_pop(L, 1);
}

int lash_run_cancel(lash_Run *run) {
  if (!run) return LASH_EARG;
  if (!run->S || finished(run)) {
    lashS_seterr(run->S, "lash_run_cancel: the run has ended");
    return LASH_EGONE;
  }
  cancel_task(run);
  return LASH_OK;
}

int lash_run_approve(lash_Run *run, const char *call_id, int allow,
                     const char *message) {
  approval *a;
  char *copy = NULL;
  if (!run) return LASH_EARG;
  if (!call_id) {
    lashS_seterr(run->S, "lash_run_approve: NULL call id");
    return LASH_EARG;
  }
  a = find_approval(run, call_id);
  if (!a) {
    lashS_seterr(run->S, "lash_run_approve: run %s asked for no approval of a "
                 "call '%s' (use the id of its approval_request event)",
                 run->run_id, call_id);
    return LASH_EARG;
  }
  if (a->state == APPR_ANSWERED || a->state == APPR_TAKEN) {
    lashS_seterr(run->S, "lash_run_approve: the approval of call '%s' was "
                 "answered already", call_id);
    return LASH_EARG;
  }
  if (!run->S || finished(run) || a->state == APPR_CANCELLED) {
    lashS_seterr(run->S, "lash_run_approve: run %s no longer waits for call "
                 "'%s'", run->run_id, call_id);
    return LASH_EGONE;
  }
  if (message && !(copy = dupstr(message))) {
    lashS_seterr(run->S, "lash_run_approve: out of memory");
    return LASH_EMEM;
  }
  a->state = APPR_ANSWERED;
  a->allow = allow != 0;
  a->message = copy;
  run->asked--;
  if (a->op) lash_wait_done(&a->op->w);
  return LASH_OK;
}

int lash_run_free(lash_Run *run) {
  if (!run) return LASH_EARG;
  if (!run->S || finished(run)) {
    unlink_run(run);
    free_run(run);
    return LASH_OK;
  }
  /* Still going: cancel it; l_finish frees it once it has unwound. */
  run->host_freed = 1;
  cancel_task(run);
  return LASH_OK;
}

/* ---- shutdown ------------------------------------------------------------ */

/* Cancel the runs started from C, and (attached: grace_ms > 0) drive them
** until they end or grace_ms pass; then cut the glue from the state. */
static void embed_shutdown(lash_State *S, int grace_ms) {
  embed_state *E = embed_of(S);
  lash_Run *run;
  if (grace_ms > 0 && S->L && E->glue_ref != LUA_NOREF) {
    lash_runtime *rt = lash_runtime_get(S->L);
    uint64_t deadline = lash_now_ns() + (uint64_t)grace_ms * 1000000u;
    int going = 0;
    for (run = E->runs; run; run = run->next)
      if (!finished(run)) {
        cancel_task(run);
        going = 1;
      }
    while (going && lash_now_ns() < deadline) {
      if (lash_runtime_step(rt, 50) < 0) break;
      going = 0;
      for (run = E->runs; run; run = run->next)
        if (!finished(run)) going = 1;
      if (going && lash_runtime_stuck(rt)) break;
    }
  }
  if (E->handle) {
    E->handle->S = NULL;
    E->handle = NULL;
  }
  if (S->L && E->glue_ref != LUA_NOREF)
    luaL_unref(S->L, LUA_REGISTRYINDEX, E->glue_ref);
  E->glue_ref = LUA_NOREF;
}

static const char closed_result[] =
  "{\"status\":\"cancelled\",\"error\":{\"kind\":\"cancelled\",\"message\":"
  "\"the lash state was closed before the run ended\"}}";

/* After the Lua state is gone (or detached): settle every run the host
** still holds (they stay readable until lash_run_free), then free E. */
static void embed_release(lash_State *S) {
  embed_state *E = embed_of(S);
  lash_Run *run, *next;
  for (run = E->runs; run; run = next) {
    next = run->next;
    run->prev = run->next = NULL;
    run->S = NULL;
    run->task_ref = LUA_NOREF;
    if (!finished(run)) {
      run->status = LASH_RUN_CANCELLED;
      run->result = dupstr(closed_result);
    }
    settle_records(run);
    if (run->host_freed) free_run(run);
  }
  E->runs = NULL;
  free(E);
  S->ext = NULL;
}
