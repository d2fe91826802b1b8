/*
** state.c: lash_State, the state half of lash.h: a Lua state with a
** budgeted allocator (or a host's Lua state, attached), the standard
** libraries, lash's module paths, the preloaded C core, protected
** execution with tracebacks, frame-budgeted stepping, the host's fd, and
** closing. Prefix lashS_ (state.h) beside lash.h's lash_*. Runs, tools
** and specs are in embed.c, which sits above this file: it registers
** hooks on the state (state.h) for lash_close to call, and nothing here
** calls into it.
*/
#include "lash_lua.h"
#include "state.h"
#include "budget.h"
#include "lauxlib.h"
#include "lualib.h"
#include "lmodules.h"
#include "runtime.h"
#include "task.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dlfcn.h>
#include <unistd.h>

/* How long lash_close lets cancelled tasks unwind (sandbox teardown). */
#define CLOSE_GRACE_MS 35000

static const char ATTACHED_KEY = 0;   /* registry: set while attached */

/* The frame-budgeted collector (see gc_pay). */
#define GC_STEPSIZE 9           /* log2 bytes: basic steps of ~0.1 ms */
#define GC_DEFAULT_STEPSIZE 13
#define GC_OWED_MAX (4u << 20)


int luaopen_lash_core(lua_State *L);
int lash_bytecode_install(lua_State *L, const char *lua_dir,
                          const char *bc_dir);

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud; (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

void lash_options_init(lash_Options *o) {
  if (o) memset(o, 0, sizeof *o);
}

const char *lash_version(void) { return LASH_VERSION_STRING; }

void lashS_seterr(lash_State *S, const char *fmt, ...) {
  va_list ap;
  if (!S) return;
  va_start(ap, fmt);
  vsnprintf(S->err, sizeof S->err, fmt, ap);
  va_end(ap);
}

static void set_err(lash_State *S, const char *msg) {
  snprintf(S->err, sizeof S->err, "%s", msg ? msg : "unknown error");
}

int lashS_check(lash_State *S, const char *who) {
  if (!S) return LASH_EARG;
  if (S->failed) {
    /* keep the message of the failure that broke the state */
    return S->failed;
  }
  if (!S->L || S->closing) {
    lashS_seterr(S, "%s: the lash state is closing", who);
    return LASH_EARG;
  }
  return LASH_OK;
}

/* Errors about the host's input ("arg": bad arguments, "spec": a broken
** agent spec) say all there is to say; a traceback would only show lash's
** insides. */
static int plain_error(lua_State *L, int idx) {
  return lash_is_error(L, idx, "arg") || lash_is_error(L, idx, "spec");
}

/* Message handler: strings and error objects get a traceback, except the
** plain errors above, which stay the objects they are. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (plain_error(L, 1)) return 1;
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
int lashS_pcall(lash_State *S, int nargs, int nres) {
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
  if (plain_error(L, -1)) {
    st = lash_is_error(L, -1, "arg") ? LASH_EARG : LASH_ERUN;
    lua_getfield(L, -1, "message");
    set_err(S, lua_tostring(L, -1));
    lua_pop(L, 2);
    return st;
  }
  set_err(S, lua_tostring(L, -1));
  lua_pop(L, 1);
  return LASH_ERUN;
}

static int pcall_traced(lash_State *S, int nargs, int nres) {
  return lashS_pcall(S, nargs, nres);
}

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Find the precompiled twin of lua_dir (lbytecode.c): next to the
** executable (build/bin/../luac), next to the library (build/luac, or an
** install's share/lash/luac), or beside lua_dir itself; an explicit
** lua_dir only ever gets its own sibling. */
static int find_bc_dir(const char *lua_dir, int explicit_dir, char *out,
                       size_t n) {
  char base[PATH_MAX / 2], probe[PATH_MAX];
  const char *cands[4];
  char c0[PATH_MAX / 2 + 16], c1[PATH_MAX / 2 + 32], c2[PATH_MAX / 2 + 16];
  char c3[PATH_MAX / 2 + 32];
  int i, nc = 0;
  if (!explicit_dir) {
    ssize_t len = readlink("/proc/self/exe", base, sizeof base - 1);
    char *slash;
    Dl_info info;
    if (len > 0) {
      base[len] = '\0';
      if ((slash = strrchr(base, '/')) != NULL) {
        *slash = '\0';
        snprintf(c0, sizeof c0, "%s/../luac", base);
        cands[nc++] = c0;
      }
    }
    if (dladdr((void *)lash_open, &info) && info.dli_fname) {
      snprintf(base, sizeof base, "%s", info.dli_fname);
      if ((slash = strrchr(base, '/')) != NULL) {
        *slash = '\0';
        snprintf(c1, sizeof c1, "%s/luac", base);
        cands[nc++] = c1;
      }
    }
  }
  snprintf(c2, sizeof c2, "%.*s/../luac", (int)(sizeof c2 - 16), lua_dir);
  cands[nc++] = c2;
  /* a source tree's lua/ (the CLI run from build/bin): its build's twins */
  snprintf(c3, sizeof c3, "%.*s/../build/luac", (int)(sizeof c3 - 32), lua_dir);
  cands[nc++] = c3;
  for (i = 0; i < nc; i++) {
    snprintf(probe, sizeof probe, "%s/lash/init.luac", cands[i]);
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
  int attach;
} setup_args;

/* Make lash loadable in L: its modules (lua_dir or $LASH_LUA_DIR first,
** then those compiled in) found before package.path, lash.core preloaded
** (unless the host already loaded one), and its runtime open so lash_step
** works before any require. */
static int setup(lua_State *L) {
  setup_args *a = lua_touserdata(L, 1);
  const char *dir = a->lua_dir;
  if (!a->attach) luaL_openlibs(L);
  if (lua_getglobal(L, "package") != LUA_TTABLE)
    return luaL_error(L, "lash_attach: the Lua state has no 'package' library; "
                      "open the standard libraries (luaL_openlibs) first");
  if (dir && *dir) {
    if (!is_dir(dir))
      return luaL_error(L, "lash_Options.lua_dir '%s' is not a directory", dir);
  } else if ((dir = getenv("LASH_LUA_DIR")) != NULL && *dir) {
    if (!is_dir(dir))
      return luaL_error(L, "LASH_LUA_DIR '%s' is not a directory (unset it to use "
                        "the modules compiled into lash)", dir);
  }
  lash_modules_install(L, dir && *dir ? dir : NULL, a->attach);
  if (dir && *dir) {
    /* modules from a directory load from their precompiled twins while
    ** those are up to date (a faster start; lbytecode.c) */
    char bc[PATH_MAX];
    if (find_bc_dir(dir, a->lua_dir != NULL, bc, sizeof bc))
      lash_bytecode_install(L, dir, bc);
  }
  lua_getfield(L, -1, "preload");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, luaopen_lash_core);
    lua_setfield(L, -2, "lash.core");
  }
  lua_pop(L, 2);
  if (a->state_root) {
    lua_pushstring(L, a->state_root);
    lua_setfield(L, LUA_REGISTRYINDEX, "lash.state_root");
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lash.core");
  lua_call(L, 1, 0);
  if (a->attach) {
    lua_pushboolean(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &ATTACHED_KEY);
  }
  return 0;
}

static void forward_log(void *ud, int level, const char *msg) {
  lash_State *S = ud;
  S->log(S->log_ud, level, msg);
}

static lash_State *new_state(const lash_Options *opts) {
  lash_State *S = calloc(1, sizeof *S);
  if (!S) return NULL;
  S->log = opts->log;
  S->log_ud = opts->log_ud;
  S->gc_step = (size_t)1 << GC_DEFAULT_STEPSIZE;
  return S;
}

/* Run setup on S->L; on failure S stays broken with the reason. */
static void finish_open(lash_State *S, const lash_Options *opts, int attach) {
  setup_args args;
  int st;
  args.lua_dir = opts->lua_dir;
  args.state_root = opts->state_root;
  args.attach = attach;
  lua_pushcfunction(S->L, setup);
  lua_pushlightuserdata(S->L, &args);
  if ((st = pcall_traced(S, 1, 0)) != LASH_OK) {
    S->failed = st;
    return;
  }
  if (S->log) {
    lash_runtime *rt = lash_runtime_get(S->L);
    S->prev_log = rt->log;
    S->prev_log_ud = rt->log_ud;
    S->prev_log_is_default = rt->log_is_default;
    rt->log = forward_log;
    rt->log_is_default = 0;
    rt->log_ud = S;
  }
}

/* The Lua lash runs on must be the release its objects were compiled
** against (the headers' LUA_RELEASE in the implementation's lua_ident):
** a mismatch (a system liblua5.4 of another 5.4.x than the headers, a
** build mixing trees) would corrupt memory instead of failing. */
static int lua_matches(lash_State *S) {
  if (strstr(lua_ident, LUA_RELEASE "  ") != NULL) return 1;
  lashS_seterr(S, "lash was compiled against %s's headers but runs on another "
               "Lua (%s); rebuild lash against the Lua it links", LUA_RELEASE,
               lua_ident);
  S->failed = LASH_ERUN;
  return 0;
}

lash_State *lash_open(const lash_Options *opts) {
  lash_Options defaults;
  lash_State *S;
  if (!opts) {
    lash_options_init(&defaults);
    opts = &defaults;
  }
  if (!(S = new_state(opts))) return NULL;
  if (!lua_matches(S)) return S;
  S->mem.base = opts->alloc ? opts->alloc : default_alloc;
  S->mem.base_ud = opts->alloc_ud;
  S->mem.limit = opts->memory_limit;
  S->L = lua_newstate(lash_budget_alloc, &S->mem);
  if (!S->L) {
    free(S);
    return NULL;
  }
  lua_atpanic(S->L, NULL);
  finish_open(S, opts, 0);
  return S;
}

lash_State *lash_attach_release(lua_State *L, const lash_Options *opts,
                                int lua_release) {
  lash_Options defaults;
  lash_State *S;
  if (!opts) {
    lash_options_init(&defaults);
    opts = &defaults;
  }
  if (!(S = new_state(opts))) return NULL;
  S->attached = 1;
  if (!lua_matches(S)) return S;
  /* lash's Lua functions work on the host's state: only the same release
  ** lays out lua_State, tables and strings the same way */
  if (lua_release != LUA_VERSION_RELEASE_NUM) {
    lashS_seterr(S, "lash_attach: the host's Lua is %d.%d.%d and lash carries "
                 "%s; attach needs the same release (build the host against "
                 "it, or let lash_open make a state of lash's own)",
                 lua_release / 10000, lua_release / 100 % 100, lua_release % 100,
                 LUA_RELEASE);
    S->failed = LASH_EARG;
    return S;
  }
  if (!L) {
    set_err(S, "lash_attach: NULL lua_State");
    S->failed = LASH_EARG;
    return S;
  }
  if (opts->memory_limit || opts->alloc) {
    set_err(S, "lash_attach: memory_limit and alloc do not apply to an attached "
               "Lua state (its own allocator rules); leave them 0/NULL");
    S->failed = LASH_EARG;
    return S;
  }
  /* Work on the main thread whatever thread we were given: tasks and the
  ** runtime hang off it. */
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  S->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  if (lua_rawgetp(S->L, LUA_REGISTRYINDEX, &ATTACHED_KEY) != LUA_TNIL) {
    lua_pop(S->L, 1);
    set_err(S, "lash_attach: this Lua state is attached already (lash_close the "
               "other lash_State first)");
    S->failed = LASH_EARG;
    S->L = NULL;
    return S;
  }
  lua_pop(S->L, 1);
  finish_open(S, opts, 1);
  return S;
}

static lash_runtime *runtime_of(lash_State *S) {
  return lash_runtime_find(S->L);
}

/* What an upper unit keeps on S (embed.c's runs) lets go through the hooks
** it registered; the state knows nothing else about it. */
static void ext_shutdown(lash_State *S, int grace_ms) {
  if (S->ext_hooks && S->ext_hooks->shutdown) S->ext_hooks->shutdown(S, grace_ms);
}

static void ext_release(lash_State *S) {
  if (S->ext_hooks && S->ext_hooks->release) S->ext_hooks->release(S);
  S->ext = NULL;
  S->ext_hooks = NULL;
}

int lash_close(lash_State *S) {
  lash_runtime *rt;
  if (!S) return LASH_OK;
  if (S->depth > 0) {
    set_err(S, "lash_close: called from inside a lash callback; close the "
               "state after lash_step returns");
    return LASH_EBUSY;
  }
  if (S->closing) return LASH_OK;
  S->closing = 1;
  if (S->L && !(S->attached && S->failed)) {
    rt = runtime_of(S);
    if (S->attached) {
      /* Only what this API started is ours to stop; the host's own Lua
      ** tasks, and the runtime they use, live on in its state. */
      ext_shutdown(S, CLOSE_GRACE_MS);
      lua_pushnil(S->L);
      lua_rawsetp(S->L, LUA_REGISTRYINDEX, &ATTACHED_KEY);
      /* the runtime outlives S: it must not log through it any more */
      if (rt && rt->log == forward_log && rt->log_ud == S) {
        rt->log = S->prev_log;
        rt->log_ud = S->prev_log_ud;
        rt->log_is_default = S->prev_log_is_default;
      }
    } else {
      /* Unwind running tasks so their cleanup (destroying owned
      ** sandboxes, closing toolsets) happens while the loop still works;
      ** runs record how they ended as they go. */
      if (rt && rt->ntasks > 0) lash_runtime_cancel_all(rt, CLOSE_GRACE_MS);
      ext_shutdown(S, 0);
      lua_close(S->L);
    }
  }
  S->L = NULL;
  ext_release(S);
  free(S);
  return LASH_OK;
}

lua_State *lash_lua(lash_State *S) { return S ? S->L : NULL; }

const char *lash_errmsg(lash_State *S) {
  if (!S) return "lash: NULL state";
  return S->err[0] ? S->err : "no error";
}

int lash_dostring(lash_State *S, const char *code, const char *chunkname) {
  int st;
  if ((st = lashS_check(S, "lash_dostring")) != LASH_OK) return st;
  if (!code) {
    set_err(S, "lash_dostring: NULL code");
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
  if ((st = lashS_check(S, "lash_dofile")) != LASH_OK) return st;
  if (!path) {
    set_err(S, "lash_dofile: NULL path");
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

/* ---- the frame-budgeted collector ----------------------------------------
** Left alone, Lua's incremental collector does its work inside whichever
** resume allocates when work is due: a task that builds a big request pays
** for everyone's garbage and one resume takes milliseconds. In a budgeted
** step the collector is held while tasks run; the work they owe (one basic
** step per 2^stepsize bytes allocated, Lua's own pace) is done at the end of
** the step in basic steps, checking the deadline between them, with part
** of the budget reserved for it by what it cost before. What does not fit
** carries over; past GC_OWED_MAX it is paid regardless, so memory stays
** bounded when every budget is spent.
**
** A basic step pays for 2^stepsize bytes of allocation, and in the sweep
** phase frees that many objects' worth (thousands at Lua's default of
** 2^13: about 2 ms here), so the first budgeted step of a state lash_open
** made sets GC_STEPSIZE to make the units small (not before: for the CLI
** and other unbudgeted use, bigger steps are a little cheaper). An
** attached state keeps its host's setting; lash assumes Lua's default. */


static size_t heap_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024u +
         (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
}

/* Time to keep for the collector in a step of budget_ns. */
static uint64_t gc_reserve(lash_State *S, uint64_t budget_ns) {
  double want = (double)(S->gc_owed / S->gc_step) * S->gc_ns_per_step;
  if (S->gc_paused && heap_bytes(S->L) < S->gc_threshold) return 0;
  return want < (double)budget_ns / 2 ? (uint64_t)want : budget_ns / 2;
}

static void gc_pay(lash_State *S, uint64_t deadline) {
  lua_State *L = S->L;
  while (S->gc_owed >= S->gc_step) {
    uint64_t t0 = lash_now_ns(), t1;
    int ended;
    if (S->gc_owed < GC_OWED_MAX && t0 >= deadline) return;
    /* Between cycles, begin the next one only once the heap has doubled
    ** since the last one ended (Lua's default pause, 200%). */
    if (S->gc_paused && heap_bytes(L) < S->gc_threshold) {
      S->gc_owed = 0;
      return;
    }
    S->gc_paused = 0;
    S->gc_owed -= S->gc_step;
    ended = lua_gc(L, LUA_GCSTEP, 0);
    t1 = lash_now_ns();
    S->gc_ns_per_step += ((double)(t1 - t0) - S->gc_ns_per_step) / 8;
    if (ended) {
      S->gc_paused = 1;
      S->gc_threshold = heap_bytes(L) * 2;
      S->gc_owed = 0;
    }
  }
}

/* ---- stepping ---------------------------------------------------------- */

/* The frame-budgeted scheduler step: a runtime step that stops resuming
** at the deadline (0: none), then keeps the host's fd readable (lash_fd)
** while tasks are left ready. */
static int step_budget(lash_runtime *rt, int timeout_ms, uint64_t deadline) {
  int rc = lash_runtime_step_from(rt, timeout_ms, rt->L, deadline);
  if (rc >= 0 && rt->ready_head) lash_loop_wake(rt->loop);
  return rc;
}

static int step_protected(lua_State *L) {
  lash_State *S = lua_touserdata(L, 1);
  lash_runtime *rt = lua_touserdata(L, 2);
  int budget = (int)lua_tointeger(L, 3), rc;
  uint64_t start, deadline, budget_ns, reserve;
  size_t before, after;
  /* Hold the collector only in budgeted steps, and only if it runs (a host
  ** may have stopped it). */
  if (budget <= 0 || !lua_gc(L, LUA_GCISRUNNING, 0)) {
    rc = step_budget(rt, budget, 0);
    lua_pushinteger(L, rc);
    return 1;
  }
  if (!S->attached && S->gc_step != ((size_t)1 << GC_STEPSIZE)) {
    lua_gc(L, LUA_GCINC, 0, 0, GC_STEPSIZE);
    S->gc_step = (size_t)1 << GC_STEPSIZE;
  }
  start = lash_now_ns();
  budget_ns = (uint64_t)budget * 1000000u;
  deadline = start + budget_ns;
  reserve = gc_reserve(S, budget_ns);
  before = heap_bytes(L);
  lua_gc(L, LUA_GCSTOP, 0);
  rc = step_budget(rt, (int)((budget_ns - reserve) / 1000000u),
                   deadline - reserve);
  after = heap_bytes(L);
  if (after > before) S->gc_owed += after - before;
  gc_pay(S, deadline);
  lua_gc(L, LUA_GCRESTART, 0);
  lua_pushinteger(L, rc);
  return 1;
}

int lash_step(lash_State *S, int budget_ms) {
  lash_runtime *rt;
  int rc;
  if ((rc = lashS_check(S, "lash_step")) != LASH_OK) return rc;
  if (S->depth > 0) {
    set_err(S, "lash_step: called from inside a lash callback (it would "
               "re-enter the scheduler); step from the host's loop");
    return LASH_EBUSY;
  }
  rt = runtime_of(S);
  if (!rt) {
    set_err(S, "lash_step: the lash runtime failed to open");
    return LASH_EARG;
  }
  /* Task errors are caught by the scheduler; the protected call only
  ** guards against memory errors raised while bookkeeping. */
  lua_pushcfunction(S->L, step_protected);
  lua_pushlightuserdata(S->L, S);
  lua_pushlightuserdata(S->L, rt);
  lua_pushinteger(S->L, budget_ms);
  if ((rc = pcall_traced(S, 3, 1)) != LASH_OK) {
    lua_gc(S->L, LUA_GCRESTART, 0);  /* a memory error while held */
    return rc;
  }
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
  if ((rc = lashS_check(S, "lash_run")) != LASH_OK) return rc;
  while ((rc = lash_step(S, -1)) > 0) {
    rt = runtime_of(S);
    if (rt && lash_runtime_stuck(rt)) {
      set_err(S, "lash_run: tasks wait for something that can no longer happen "
                 "(a host tool call or an approval nobody answers?)");
      return LASH_ERUN;
    }
  }
  return rc < 0 ? rc : LASH_OK;
}

int lash_fd(lash_State *S) {
  lash_runtime *rt;
  int rc;
  if ((rc = lashS_check(S, "lash_fd")) != LASH_OK) return rc;
  if (!(rt = runtime_of(S))) {
    set_err(S, "lash_fd: the lash runtime failed to open");
    return LASH_EARG;
  }
  if ((rc = lash_loop_notify_enable(rt->loop)) != 0) {
    lashS_seterr(S, "lash_fd: cannot create the notification fds: %s",
                 strerror(-rc));
    return LASH_ESYS;
  }
  if (rt->ready_head) lash_loop_wake(rt->loop);
  return lash_loop_fd(rt->loop);
}

size_t lash_memory_used(lash_State *S) {
  if (!S || !S->L) return 0;
  if (S->attached)
    return (size_t)lua_gc(S->L, LUA_GCCOUNT, 0) * 1024u +
           (size_t)lua_gc(S->L, LUA_GCCOUNTB, 0);
  return S->mem.used;
}

int lash_set_memory_limit(lash_State *S, size_t limit) {
  if (!S) return LASH_EARG;
  if (S->attached) {
    set_err(S, "lash_set_memory_limit: an attached Lua state uses the host's "
               "allocator; budget it there");
    return LASH_EARG;
  }
  S->mem.limit = limit;
  return LASH_OK;
}
