/*
** sandbox.c: the sandbox core's lifecycle (prefix lash_sandbox_): the
** registry of backends (C vtables of sandbox.h and Lua tables alike),
** sandbox objects and their modes (owned: destroyed on close; attached:
** never destroyed; session: destroyed on close only when it created the
** sandbox), create, open by id, close and detach, and the one path every
** backend call takes (lua_callk, so any backend may wait). The claims are
** sandbox_claim.c, the policy sandbox_policy.c, the options and defaults
** sandbox_options.c; lsandbox.c exposes it all as `lash.sandbox`.
*/
#include "sandbox.h"
#include "sandbox_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BACKENDS_KEY "lash.sandbox.backends"

const char *const lash_sandbox_mode_names[] = {"owned", "attached", "session"};

static const char *const required_slots[] = {
  "create", "exec", "stat", "read_file", "write_file", "list_dir", "poll",
  "destroy", NULL
};

static const char *const optional_slots[] = {
  "read_tags", "write_tags", "cas_tags", "list", "gc", "probe", "snapshot",
  "drop_snapshot", "spawn", "persist", NULL
};

static void push_backends(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, BACKENDS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, BACKENDS_KEY);
  }
}

static void set_option_list(lua_State *L, const char *const *names,
                            const char *field) {
  lua_newtable(L);
  if (names)
    for (; *names; names++) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, *names);
    }
  lua_setfield(L, -2, field);
}

void lash_sandbox_register_c(lua_State *L, const lash_sandbox_backend *b) {
  struct { const char *name; lua_CFunction f; } slots[] = {
    {"create", b->create}, {"exec", b->exec}, {"stat", b->stat},
    {"read_file", b->read_file}, {"write_file", b->write_file},
    {"list_dir", b->list_dir}, {"read_tags", b->read_tags},
    {"write_tags", b->write_tags}, {"poll", b->poll},
    {"destroy", b->destroy}, {"cas_tags", b->cas_tags}, {"list", b->list},
    {"gc", b->gc}, {"probe", b->probe}, {"snapshot", b->snapshot},
    {"spawn", b->spawn}, {"persist", b->persist}, {"connect", b->connect},
    {"drop_snapshot", b->drop_snapshot},
    {"tunnels", b->tunnels},
  };
  size_t i;
  push_backends(L);
  lua_newtable(L);
  for (i = 0; i < sizeof slots / sizeof *slots; i++) {
    if (!slots[i].f) continue;
    lua_pushcfunction(L, slots[i].f);
    lua_setfield(L, -2, slots[i].name);
  }
  set_option_list(L, b->create_options, "create_options");
  set_option_list(L, b->config_options, "config_options");
  if (b->default_workdir) {
    lua_pushstring(L, b->default_workdir);
    lua_setfield(L, -2, "default_workdir");
  }
  lua_pushstring(L, b->name);
  lua_setfield(L, -2, "name");
  lua_setfield(L, -2, b->name);
  lua_pop(L, 1);
}

/* Copy a list of option names (array of strings) at t.field into a set. */
static void copy_option_names(lua_State *L, int t, const char *field) {
  lua_Integer i, n;
  lua_newtable(L);
  if (lua_getfield(L, t, field) != LUA_TNIL) {
    if (!lua_istable(L, -1))
      luaL_error(L, "register_backend: %s must be a list of option names",
                 field);
    n = (lua_Integer)lua_rawlen(L, -1);
    for (i = 1; i <= n; i++) {
      if (lua_rawgeti(L, -1, i) != LUA_TSTRING)
        luaL_error(L, "register_backend: %s[%I] must be a string", field, i);
      if (lash_sandbox_opt_in(lash_sandbox_opt_generic, lua_tostring(L, -1)) ||
          strcmp(lua_tostring(L, -1), "backend") == 0 ||
          strcmp(lua_tostring(L, -1), "id") == 0)
        luaL_error(L, "register_backend: option '%s' is generic; do not list "
                   "it", lua_tostring(L, -1));
      lua_pushboolean(L, 1);
      lua_rawset(L, -4);
    }
  }
  lua_pop(L, 1);
  lua_setfield(L, -2, field);
}

int lash_sandbox_register_lua(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  int i;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!*name) luaL_argerror(L, 1, "empty backend name");
  lua_newtable(L);   /* 3: fns */
  for (i = 0; required_slots[i]; i++) {
    if (lua_getfield(L, 2, required_slots[i]) != LUA_TFUNCTION)
      luaL_error(L, "register_backend: '%s' needs a function '%s'", name,
                 required_slots[i]);
    lua_setfield(L, 3, required_slots[i]);
  }
  for (i = 0; optional_slots[i]; i++) {
    int t = lua_getfield(L, 2, optional_slots[i]);
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
      luaL_error(L, "register_backend: '%s' must be a function", optional_slots[i]);
    lua_setfield(L, 3, optional_slots[i]);
  }
  if ((lua_getfield(L, 2, "read_tags") == LUA_TNIL) !=
      (lua_getfield(L, 2, "write_tags") == LUA_TNIL))
    luaL_error(L, "register_backend: read_tags and write_tags go together");
  lua_pop(L, 2);
  copy_option_names(L, 2, "create_options");
  copy_option_names(L, 2, "config_options");
  if (lua_getfield(L, 2, "default_workdir") != LUA_TNIL) {
    const char *w = luaL_checkstring(L, -1);
    if (w[0] != '/') luaL_error(L, "register_backend: default_workdir must be absolute");
  }
  lua_setfield(L, 3, "default_workdir");
  lua_pushvalue(L, 1);
  lua_setfield(L, 3, "name");
  push_backends(L);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_rawset(L, -3);
  return 0;
}

/* Push the fns table of backend `name`, or raise naming the known ones. */
void lash_sandbox_push_backend(lua_State *L, const char *name) {
  push_backends(L);
  if (lua_getfield(L, -1, name) == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  {
    const char *names[32];
    int n = 0;
    lua_pop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, -2) && n < 32) {
      names[n++] = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
    lash_sandbox_opt_push_names(L, names, n);
    luaL_error(L, "unknown sandbox backend '%s' (known: %s)", name,
               lua_tostring(L, -1));
  }
}

int lash_sandbox_backend_names(lua_State *L) {
  const char *names[32];
  int n = 0, i;
  push_backends(L);
  lua_pushnil(L);
  while (lua_next(L, -2) && n < 32) {
    names[n++] = lua_tostring(L, -2);
    lua_pop(L, 1);
  }
  lash_sandbox_opt_sort(names, n);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

lash_sandbox_obj *lash_sandbox_checkobj(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, LASH_SB_MT);
}

lash_sandbox_obj *lash_sandbox_checkopen(lua_State *L, int idx) {
  lash_sandbox_obj *o = lash_sandbox_checkobj(L, idx);
  if (o->closed)
    luaL_error(L, "this sandbox handle is closed: use it before :close(), or reopen a "
                  "sandbox that still exists with lash.sandbox.open(id)");
  return o;
}

/* Push field of the object's uservalue. */
int lash_sandbox_field(lua_State *L, int idx, const char *field) {
  int t;
  lua_getiuservalue(L, idx, 1);
  t = lua_getfield(L, -1, field);
  lua_remove(L, -2);
  return t;
}

/* Push a new object: fns, cfg and id on the stack at the given indexes. */
static void push_object(lua_State *L, int fns, int cfg, int id, int mode,
                        int owns) {
  lash_sandbox_obj *o;
  fns = lua_absindex(L, fns);
  cfg = lua_absindex(L, cfg);
  id = lua_absindex(L, id);
  o = lua_newuserdatauv(L, sizeof *o, 1);
  o->closed = 0;
  o->mode = mode;
  o->owns = owns;
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, fns);
  lua_setfield(L, -2, "fns");
  lua_pushvalue(L, cfg);
  lua_setfield(L, -2, "cfg");
  lua_pushvalue(L, id);
  lua_setfield(L, -2, "id");
  lua_getfield(L, fns, "name");
  lua_setfield(L, -2, "backend");
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, LASH_SB_MT);
}

/* Push the slot function of the object at 1 and its first two arguments,
** cfg and id: the start of every call into its backend. */
void lash_sandbox_push_call(lua_State *L, const char *slot) {
  lash_sandbox_push_slot(L, 1, slot);
  lash_sandbox_field(L, 1, "cfg");
  lash_sandbox_field(L, 1, "id");
}

/* Push the slot function of the object at idx, or raise. */
void lash_sandbox_push_slot(lua_State *L, int idx, const char *slot) {
  lash_sandbox_field(L, idx, "fns");
  if (lua_getfield(L, -1, slot) != LUA_TFUNCTION) {
    lua_getfield(L, -2, "name");
    luaL_error(L, "the %s backend has no '%s' operation", lua_tostring(L, -1),
               slot);
  }
  lua_remove(L, -2);
}

int lash_sandbox_has_slot(lua_State *L, int idx, const char *slot) {
  int t;
  lash_sandbox_field(L, idx, "fns");
  t = lua_getfield(L, -1, slot);
  lua_pop(L, 2);
  return t == LUA_TFUNCTION;
}

int lash_sandbox_finish_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return lua_gettop(L) - (int)ctx;
}

int lash_sandbox_true_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  lua_settop(L, (int)ctx);
  lua_pushboolean(L, 1);
  return 1;
}

/* Call slot of the object at 1 with (cfg, id, <the nargs values on top>);
** its results are returned by k (ctx = the base below them). */
int lash_sandbox_call(lua_State *L, const char *slot, int nargs,
                    lua_KFunction k) {
  int base = lua_gettop(L) - nargs;
  lash_sandbox_push_slot(L, 1, slot);
  lua_insert(L, base + 1);
  lash_sandbox_field(L, 1, "cfg");
  lua_insert(L, base + 2);
  lash_sandbox_field(L, 1, "id");
  lua_insert(L, base + 3);
  lua_callk(L, nargs + 2, LUA_MULTRET, base, k);
  return k(L, LUA_OK, base);
}

static int create_k(lua_State *L, int status, lua_KContext ctx) {
  /* stack: spec, fns, cfg, nspec, id */
  int mode = (int)(ctx & 0xff);
  (void)status;
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "the sandbox backend's create returned %s instead of an id",
               luaL_typename(L, -1));
  push_object(L, 2, 3, -1, mode, 1);
  return 1;
}

/* The option checks raise with luaL_error, which names the Lua line that
** called the running C function: a bad option would read as a line of
** lash's CLI or capability rather than as the caller's mistake. So they run
** in a C function that C calls (check_create, check_existing), whose caller
** has no line to name. */
static int check_create(lua_State *L) {
  /* 1 spec, 2 context -> fns, cfg, normalized spec */
  const char *context = lua_touserdata(L, 2);
  lua_settop(L, 1);
  lash_sandbox_push_backend(L, lash_sandbox_opt_backend(L, 1));  /* 2 fns */
  lash_sandbox_opt_check(L, 1, 2, LASH_SB_OPT_CREATE, context);     /* 3 cfg */
  lash_sandbox_opt_spec(L, 1, 2);                                 /* 4 spec */
  return 3;
}

static int check_existing(lua_State *L) {
  /* 1 id or nil, 2 options or nil, 3 context -> fns, cfg */
  const char *context = lua_touserdata(L, 3);
  int opts = lua_isnil(L, 2) ? 0 : 2;
  lua_settop(L, 2);
  if (!lua_isnil(L, 1) &&
      !*lash_sandbox_opt_cstring(L, 1, "sandbox id"))
    luaL_error(L, "%s: the sandbox id is empty", context);
  lash_sandbox_push_backend(L, lash_sandbox_opt_backend(L, opts));  /* 3 */
  lash_sandbox_opt_check(L, opts, 3, LASH_SB_OPT_EXISTING, context);  /* 4 */
  return 2;
}

static void call_check(lua_State *L, lua_CFunction check, int id, int opts,
                       const char *context, int nresults) {
  lua_pushcfunction(L, check);
  if (check == check_existing) {
    if (id) lua_pushvalue(L, id); else lua_pushnil(L);
  }
  if (opts) lua_pushvalue(L, opts); else lua_pushnil(L);
  lua_pushlightuserdata(L, (void *)context);
  lua_call(L, check == check_existing ? 3 : 2, nresults);
}

int lash_sandbox_create(lua_State *L, int mode, const char *context) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  call_check(L, check_create, 0, 1, context, 3);   /* 2 fns, 3 cfg, 4 spec */
  /* a sandbox this object will destroy ends with this process (or sooner):
  ** the backend may skip what only a sandbox that outlives it needs, such
  ** as syncing its records to disk; detach asks it to persist them first */
  lua_pushboolean(L, 1);
  lua_setfield(L, 4, "ephemeral");
  lua_getfield(L, 2, "create");
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  lua_callk(L, 2, 1, mode, create_k);
  return create_k(L, LUA_OK, mode);
}

/* Wrap an existing id (at idx) with options at opts (0: none). */
int lash_sandbox_wrap(lua_State *L, int idx, int opts, int mode,
                         const char *context) {
  idx = lua_absindex(L, idx);
  call_check(L, check_existing, idx, opts, context, 2);   /* fns, cfg */
  push_object(L, -2, -1, idx, mode, 0);
  return 1;
}

/* Module-level operations that need only a backend: list, gc, probe. */
int lash_sandbox_backend_call(lua_State *L, const char *slot, const char *what) {
  int opts = 0;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    opts = 1;
  }
  lua_settop(L, 1);
  call_check(L, check_existing, 0, opts, what, 2);                /* 2, 3 */
  if (lua_getfield(L, 2, slot) != LUA_TFUNCTION) {
    lua_getfield(L, 2, "name");
    return lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                              "the %s backend cannot %s", lua_tostring(L, -1),
                              what);
  }
  lua_pushvalue(L, 3);
  lua_callk(L, 1, LUA_MULTRET, 3, lash_sandbox_finish_k);
  return lash_sandbox_finish_k(L, LUA_OK, 3);
}

int lash_sandbox_backend_call_arg(lua_State *L, const char *slot, const char *what) {
  int opts = 0;
  luaL_checkany(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    opts = 2;
  }
  lua_settop(L, 2);
  call_check(L, check_existing, 0, opts, what, 2);                /* 3, 4 */
  if (lua_getfield(L, 3, slot) != LUA_TFUNCTION) {
    lua_getfield(L, 3, "name");
    return lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                              "the %s backend cannot %s", lua_tostring(L, -1),
                              what);
  }
  lua_pushvalue(L, 4);
  lua_pushvalue(L, 1);
  lua_callk(L, 2, LUA_MULTRET, 4, lash_sandbox_finish_k);
  return lash_sandbox_finish_k(L, LUA_OK, 4);
}

/* Raise "unsupported" unless the backend of the object at 1 has slot. */
void lash_sandbox_need_slot(lua_State *L, const char *slot, const char *cannot) {
  if (!lash_sandbox_has_slot(L, 1, slot)) {
    lash_sandbox_field(L, 1, "backend");
    lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported", "the %s backend cannot %s",
                       lua_tostring(L, -1), cannot);
  }
}

static int close_k(lua_State *L, int status, lua_KContext ctx) {
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;   /* nil, the error */
  }
  lua_settop(L, (int)ctx);
  lua_pushboolean(L, 1);
  return 1;
}

/* Start closing the object at 1: destroy it when it owns it (pcall'd, so a
** failure comes back to k as an error status). */
static int start_close(lua_State *L, lua_KFunction k) {
  lash_sandbox_obj *o = lash_sandbox_checkobj(L, 1);
  lua_settop(L, 1);
  if (o->closed || !o->owns) {
    o->closed = 1;
    return k(L, LUA_OK, 1);
  }
  o->closed = 1;
  lash_sandbox_push_call(L, "destroy");
  lua_pushnumber(L, LASH_SB_DEFAULT_DESTROY);
  return k(L, lua_pcallk(L, 3, 0, 0, 1, k), 1);
}

static int gc_warn(lua_State *L, const char *what) {
  lash_sandbox_field(L, 1, "id");
  lua_warning(L, "lash: sandbox ", 1);
  lua_warning(L, lua_tostring(L, -1), 1);
  lua_warning(L, what, 0);
  lua_pop(L, 1);
  return 0;
}

int lash_sandbox_collect(lua_State *L) {
  lash_sandbox_obj *o = lash_sandbox_checkobj(L, 1);
  if (!o->closed && o->owns) {
    o->closed = 1;
    return gc_warn(L, " was garbage-collected without close(); it stays "
                   "until its lifetime ends (lash sandbox gc removes "
                   "expired ones)");
  }
  o->closed = 1;
  return 0;
}

static int tbc_k(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  if (status != LUA_OK && status != LUA_YIELD) {
    const char *msg = luaL_tolstring(L, -1, NULL);
    lua_warning(L, "lash: closing a sandbox failed: ", 1);
    lua_warning(L, msg, 0);
  }
  return 0;
}

static int detach_k(lua_State *L, int status, lua_KContext ctx) {
  lash_sandbox_obj *o = lash_sandbox_checkopen(L, 1);
  (void)status;
  (void)ctx;
  o->owns = 0;
  o->mode = LASH_SB_MODE_ATTACHED;
  lash_sandbox_field(L, 1, "id");
  return 1;
}

/* A detached sandbox outlives this process: a backend that skipped making
** an ephemeral sandbox's records durable (the optional persist slot) makes
** them so before the object lets go of it. */
int lash_sandbox_detach(lua_State *L) {
  lash_sandbox_obj *o = lash_sandbox_checkopen(L, 1);
  lua_settop(L, 1);
  if (o->owns && lash_sandbox_has_slot(L, 1, "persist")) {
    lash_sandbox_push_call(L, "persist");
    lua_callk(L, 2, 0, 0, detach_k);
  }
  return detach_k(L, LUA_OK, 0);
}

int lash_sandbox_close(lua_State *L) {
  return start_close(L, close_k);
}

int lash_sandbox_close_quiet(lua_State *L) {
  return start_close(L, tbc_k);
}
