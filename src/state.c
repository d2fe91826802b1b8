/*
** state.c: lash_State, the embedding API of lash.h: a Lua state with a
** budgeted allocator, the standard libraries, lash's module paths, the
** preloaded C core, protected execution with tracebacks, and stepping.
*/
#include "lash.h"
#include "lauxlib.h"
#include "lualib.h"
#include "runtime.h"
#include "task.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef LASH_PREFIX
#define LASH_PREFIX "/usr/local"
#endif

int luaopen_lash_core(lua_State *L);

/* The allocator's bookkeeping; lives in lash_State so the budget can be
** checked and changed from C at any time. */
typedef struct budget {
  lua_Alloc base;
  void *base_ud;
  size_t used;
  size_t limit;          /* 0: none */
  int exceeded;          /* set when a request was refused */
} budget;

struct lash_State {
  lua_State *L;
  budget mem;
  char err[2048];
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
};

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud; (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  budget *b = ud;
  size_t old = ptr ? osize : 0;
  void *np;
  /* Growing past the budget fails like an out-of-memory; shrinking and
  ** freeing always succeed, so Lua can always clean up. */
  if (nsize > old && b->limit && b->used - old + nsize > b->limit) {
    b->exceeded = 1;
    return NULL;
  }
  np = b->base(b->base_ud, ptr, osize, nsize);
  if (nsize == 0) {
    b->used -= old;
    return NULL;
  }
  if (!np) return NULL;
  b->used = b->used - old + nsize;
  return np;
}

void lash_options_init(lash_Options *o) { memset(o, 0, sizeof *o); }

const char *lash_version(void) { return LASH_VERSION_STRING; }

static void set_err(lash_State *S, const char *msg) {
  snprintf(S->err, sizeof S->err, "%s", msg ? msg : "unknown error");
}

/* Message handler: strings and error objects get a traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)",
                            luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Call the function below nargs arguments, protected; on failure record
** the message (with traceback) in S->err. */
static int pcall_traced(lash_State *S, int nargs, int nres) {
  lua_State *L = S->L;
  int base = lua_gettop(L) - nargs, st;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  st = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (st == LUA_OK) return LASH_OK;
  if (st == LUA_ERRMEM || S->mem.exceeded) {
    if (S->mem.limit) {
      snprintf(S->err, sizeof S->err,
               "lash: the memory budget of %zu bytes was exceeded; raise it "
               "(lash_Options.memory_limit, or --memory-limit) or make the "
               "script use less", S->mem.limit);
    } else {
      set_err(S, "lash: out of memory");
    }
    S->mem.exceeded = 0;
    lua_pop(L, 1);
    return LASH_EMEM;
  }
  set_err(S, lua_tostring(L, -1));
  lua_pop(L, 1);
  return LASH_ERUN;
}

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Find the directory holding lash/init.lua: explicit, next to the
** executable (source checkout: build/bin/../../lua; install: bin/../share/lash/lua),
** the install prefix, then the source tree lash was built from. */
static int find_lua_dir(const char *explicit_dir, char *out, size_t n) {
  char exe[PATH_MAX / 2], probe[PATH_MAX];
  ssize_t len;
  const char *cands[4];
  int i, nc = 0;
  if (explicit_dir) {
    snprintf(out, n, "%s", explicit_dir);
    return 1;
  }
  len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    char *slash;
    exe[len] = '\0';
    slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      snprintf(probe, sizeof probe, "%s/../../lua/lash/init.lua", exe);
      if (file_exists(probe)) {
        snprintf(out, n, "%s/../../lua", exe);
        return 1;
      }
      snprintf(probe, sizeof probe, "%s/../share/lash/lua/lash/init.lua", exe);
      if (file_exists(probe)) {
        snprintf(out, n, "%s/../share/lash/lua", exe);
        return 1;
      }
    }
  }
  cands[nc++] = LASH_PREFIX "/share/lash/lua";
#ifdef LASH_SRCDIR
  cands[nc++] = LASH_SRCDIR "/lua";
#endif
  for (i = 0; i < nc; i++) {
    snprintf(probe, sizeof probe, "%s/lash/init.lua", cands[i]);
    if (file_exists(probe)) {
      snprintf(out, n, "%s", cands[i]);
      return 1;
    }
  }
  return 0;
}

typedef struct setup_args {
  const char *lua_dir;
  const char *state_root;
} setup_args;

static int setup(lua_State *L) {
  setup_args *a = lua_touserdata(L, 1);
  char dir[PATH_MAX];
  luaL_openlibs(L);
  /* lash's modules first, then whatever LUA_PATH gave */
  lua_getglobal(L, "package");
  if (find_lua_dir(a->lua_dir, dir, sizeof dir)) {
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir,
                    lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 1);
  }
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_lash_core);
  lua_setfield(L, -2, "lash.core");
  lua_pop(L, 2);
  if (a->state_root) {
    lua_pushstring(L, a->state_root);
    lua_setfield(L, LUA_REGISTRYINDEX, "lash.state_root");
  }
  return 0;
}

static void forward_log(void *ud, int level, const char *msg) {
  lash_State *S = ud;
  S->log(S->log_ud, level, msg);
}

lash_State *lash_open(const lash_Options *opts) {
  lash_Options defaults;
  lash_State *S;
  setup_args args;
  if (!opts) {
    lash_options_init(&defaults);
    opts = &defaults;
  }
  S = calloc(1, sizeof *S);
  if (!S) return NULL;
  S->mem.base = opts->alloc ? opts->alloc : default_alloc;
  S->mem.base_ud = opts->alloc_ud;
  S->mem.limit = opts->memory_limit;
  S->log = opts->log;
  S->log_ud = opts->log_ud;
  S->L = lua_newstate(budget_alloc, &S->mem);
  if (!S->L) {
    free(S);
    return NULL;
  }
  lua_atpanic(S->L, NULL);
  args.lua_dir = opts->lua_dir;
  args.state_root = opts->state_root;
  lua_pushcfunction(S->L, setup);
  lua_pushlightuserdata(S->L, &args);
  if (pcall_traced(S, 1, 0) != LASH_OK) return S;  /* err says why */
  /* open the runtime now so lash_step works before any require */
  lua_getglobal(S->L, "require");
  lua_pushliteral(S->L, "lash.core");
  if (pcall_traced(S, 1, 0) != LASH_OK) return S;
  if (S->log) {
    lash_runtime *rt = lash_runtime_get(S->L);
    rt->log = forward_log;
    rt->log_ud = S;
  }
  return S;
}

static lash_runtime *runtime_of(lash_State *S) {
  lash_runtime *rt;
  lua_getfield(S->L, LUA_REGISTRYINDEX, "lash.runtime");
  rt = lua_touserdata(S->L, -1);
  lua_pop(S->L, 1);
  return rt && rt->loop ? rt : NULL;
}

void lash_close(lash_State *S) {
  lash_runtime *rt;
  if (!S) return;
  if (S->L) {
    rt = runtime_of(S);
    /* Unwind running tasks so their cleanup (destroying owned sandboxes,
    ** closing toolsets) happens while the loop still works. */
    if (rt && rt->ntasks > 0) lash_runtime_cancel_all(rt, 35000);
    lua_close(S->L);
  }
  free(S);
}

lua_State *lash_lua(lash_State *S) { return S ? S->L : NULL; }

const char *lash_errmsg(lash_State *S) {
  if (!S) return "lash: NULL state";
  return S->err[0] ? S->err : "no error";
}

int lash_dostring(lash_State *S, const char *code, const char *chunkname) {
  int st;
  if (!S || !S->L || !code) {
    if (S) set_err(S, "lash_dostring: NULL argument");
    return LASH_EARG;
  }
  st = luaL_loadbufferx(S->L, code, strlen(code),
                        chunkname ? chunkname : "=(lash_dostring)", "t");
  if (st != LUA_OK) {
    set_err(S, lua_tostring(S->L, -1));
    lua_pop(S->L, 1);
    return st == LUA_ERRMEM ? LASH_EMEM : LASH_ERUN;
  }
  return pcall_traced(S, 0, 0);
}

int lash_dofile(lash_State *S, const char *path) {
  int st;
  if (!S || !S->L || !path) {
    if (S) set_err(S, "lash_dofile: NULL argument");
    return LASH_EARG;
  }
  st = luaL_loadfilex(S->L, path, "t");
  if (st != LUA_OK) {
    set_err(S, lua_tostring(S->L, -1));
    lua_pop(S->L, 1);
    return st == LUA_ERRMEM ? LASH_EMEM : LASH_ERUN;
  }
  return pcall_traced(S, 0, 0);
}

static int step_protected(lua_State *L) {
  lash_runtime *rt = lua_touserdata(L, 1);
  int timeout = (int)lua_tointeger(L, 2);
  lua_pushinteger(L, lash_runtime_step(rt, timeout));
  return 1;
}

int lash_step(lash_State *S, int timeout_ms) {
  lash_runtime *rt;
  int rc;
  if (!S || !S->L) return LASH_EARG;
  rt = runtime_of(S);
  if (!rt) {
    set_err(S, "lash_step: the lash runtime failed to open");
    return LASH_EARG;
  }
  /* Task errors are caught by the scheduler; the protected call only
  ** guards against memory errors raised while bookkeeping. */
  lua_pushcfunction(S->L, step_protected);
  lua_pushlightuserdata(S->L, rt);
  lua_pushinteger(S->L, timeout_ms);
  if ((rc = pcall_traced(S, 2, 1)) != LASH_OK) return rc;
  rc = (int)lua_tointeger(S->L, -1);
  lua_pop(S->L, 1);
  if (rc < 0) {
    set_err(S, "lash_step: the event loop failed");
    return LASH_ESYS;
  }
  return rc;
}

int lash_run(lash_State *S) {
  int rc;
  lash_runtime *rt;
  if (!S || !S->L) return LASH_EARG;
  while ((rc = lash_step(S, -1)) > 0) {
    rt = runtime_of(S);
    if (rt && !rt->ready_head && !lash_loop_alive(rt->loop)) {
      set_err(S, "lash_run: tasks wait for something that can no longer happen");
      return LASH_ERUN;
    }
  }
  return rc < 0 ? rc : LASH_OK;
}

int lash_fd(lash_State *S) {
  lash_runtime *rt;
  if (!S || !S->L || !(rt = runtime_of(S))) return LASH_EARG;
  return lash_loop_fd(rt->loop);
}

size_t lash_memory_used(lash_State *S) { return S ? S->mem.used : 0; }

int lash_set_memory_limit(lash_State *S, size_t limit) {
  if (!S) return LASH_EARG;
  S->mem.limit = limit;
  return LASH_OK;
}
