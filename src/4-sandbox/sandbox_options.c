/*
** sandbox_options.c: the options of the sandbox core (prefix
** lash_sandbox_opt_, plus the clock and deadline of sandbox.h): the
** defaults (LASH_SB_DEFAULT_*, shown by describe), the checks of strings,
** seconds, counts and string maps, the backend options a call may carry
** (unknown and creation-only ones refused by name), the normalized create
** spec with its reserved tags, and exec's and spawn's command and options.
** Only checks and builds tables: it never calls a backend.
*/
#include "sandbox.h"
#include "sandbox_core.h"
#include "outq.h"
#include "laux.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Creation-only settings every backend understands. */
const char *const lash_sandbox_opt_generic[] = {
  "workdir", "env", "timeout", "network", "owner", "tags", "idle_timeout",
  "from_snapshot", NULL
};

int lash_sandbox_opt_in(const char *const *list, const char *s) {
  if (!list) return 0;
  for (; *list; list++)
    if (strcmp(*list, s) == 0) return 1;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Push "a, b, c" from the names (sorted in place). */
void lash_sandbox_opt_push_names(lua_State *L, const char **names, int n) {
  luaL_Buffer b;
  int i;
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  luaL_buffinit(L, &b);
  for (i = 0; i < n; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, names[i]);
  }
  luaL_pushresult(&b);
}

/* Push the option names of a backend's set field (e.g. "create_options")
** joined, for messages. */
static void push_option_set(lua_State *L, int fns, const char *field) {
  const char *names[64];
  int n = 0;
  lua_getfield(L, fns, field);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2) && n < 64) {
      if (lua_type(L, -2) == LUA_TSTRING) names[n++] = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  }
  if (n == 0) {
    lua_pop(L, 1);
    lua_pushliteral(L, "none");
    return;
  }
  lash_sandbox_opt_push_names(L, names, n);
  lua_remove(L, -2);
}

static int set_has(lua_State *L, int fns, const char *field, const char *key) {
  int has = 0;
  if (lua_getfield(L, fns, field) == LUA_TTABLE) {
    has = lua_getfield(L, -1, key) != LUA_TNIL;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return has;
}

lua_Integer lash_sandbox_deadline(lua_Integer requested, double expires_at,
                                  lua_Integer ceiling) {
  lua_Integer t = requested;
  if (ceiling > 0 && t > ceiling) t = ceiling;
  if (expires_at > 0) {
    double left = ceil(expires_at - lash_wall_now());
    if (left < (double)t) t = (lua_Integer)left;
  }
  if (t > LASH_SB_MAX_SECONDS) t = LASH_SB_MAX_SECONDS;
  return t < 1 ? 1 : t;
}

/* A string without NUL bytes (for paths, argv, env). */
const char *lash_sandbox_opt_cstring(lua_State *L, int idx, const char *what) {
  size_t len;
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "%s must be a string, got %s", what, luaL_typename(L, idx));
  s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) luaL_error(L, "%s must not contain NUL bytes", what);
  return s;
}

/* Whole seconds >= 1 from a positive finite number (rounded up). */
static lua_Integer check_seconds(lua_State *L, int idx, const char *what) {
  lua_Number n;
  if (!lua_isnumber(L, idx) || lua_type(L, idx) == LUA_TSTRING)
    luaL_error(L, "%s must be a number of seconds, got %s", what,
               luaL_typename(L, idx));
  n = lua_tonumber(L, idx);
  if (!(n > 0) || isinf(n))
    luaL_error(L, "%s must be a positive finite number of seconds, got %s",
               what, lua_tostring(L, idx));
  n = ceil(n);
  if (n < 1) n = 1;
  if (n > 1e9) luaL_error(L, "%s is too large (at most 1e9 seconds)", what);
  return (lua_Integer)n;
}

lua_Integer lash_sandbox_opt_count(lua_State *L, int idx, const char *what) {
  lua_Integer v;
  if (!lua_isinteger(L, idx)) {
    lua_Number n = lua_tonumber(L, idx);
    if (lua_type(L, idx) != LUA_TNUMBER || n != floor(n) || isinf(n))
      luaL_error(L, "%s must be a non-negative integer, got %s", what,
                 lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx)
                                                 : luaL_typename(L, idx));
    v = (lua_Integer)n;
  } else {
    v = lua_tointeger(L, idx);
  }
  if (v < 0) luaL_error(L, "%s must be a non-negative integer, got %I", what, v);
  return v;
}

/* Copy a {string = string} table at idx into a new table (pushed), checking
** keys and values. env: keys must be environment variable names. tags:
** keys must not use the reserved prefix. */
void lash_sandbox_opt_string_map(lua_State *L, int idx, const char *what, int env,
                            int user_tags) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx))
    luaL_error(L, "%s must be a table of strings, got %s", what,
               luaL_typename(L, idx));
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k;
    size_t kl, vl;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s keys must be strings, got %s", what,
                 luaL_typename(L, -2));
    k = lua_tolstring(L, -2, &kl);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s['%s'] must be a string, got %s (convert it with "
                 "tostring)", what, k, luaL_typename(L, -1));
    lua_tolstring(L, -1, &vl);
    if (kl == 0 || strlen(k) != kl)
      luaL_error(L, "%s has an empty key or a key with a NUL byte", what);
    if (env) {
      if (strchr(k, '=')) luaL_error(L, "%s name '%s' contains '='", what, k);
      if (strlen(lua_tostring(L, -1)) != vl)
        luaL_error(L, "%s['%s'] contains a NUL byte", what, k);
    }
    if (user_tags && strncmp(k, LASH_SB_TAG_PREFIX,
                             sizeof LASH_SB_TAG_PREFIX - 1) == 0)
      luaL_error(L, "tag '%s' uses the reserved prefix '" LASH_SB_TAG_PREFIX
                 "' (lash stamps owner, holder, expiry, network and workdir "
                 "itself); rename the tag", k);
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
}

/* Check every key of the options table at opts against what the backend at
** fns takes. For LASH_SB_OPT_EXISTING, creation-only settings are refused all
** together, named. Then push cfg: {backend = name, <config options>}. */
void lash_sandbox_opt_check(lua_State *L, int opts, int fns, int kind,
                          const char *context) {
  const char *unknown[64], *creation[64];
  int nu = 0, nc = 0;
  const char *bname;
  lua_getfield(L, fns, "name");
  bname = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (opts) {
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      const char *k;
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: option names must be strings", context);
      k = lua_tostring(L, -1);
      if (strcmp(k, "backend") == 0 || set_has(L, fns, "config_options", k))
        continue;
      if (kind == LASH_SB_OPT_EXISTING && (strcmp(k, "id") == 0 ||
                                   strcmp(k, "sandbox_id") == 0))
        continue;
      if (lash_sandbox_opt_in(lash_sandbox_opt_generic, k) || set_has(L, fns, "create_options", k)) {
        if (kind == LASH_SB_OPT_EXISTING && nc < 64) creation[nc++] = k;
        continue;
      }
      if (nu < 64) unknown[nu++] = k;
    }
  }
  if (nu) {
    lash_sandbox_opt_push_names(L, unknown, nu);
    push_option_set(L, fns, "create_options");
    push_option_set(L, fns, "config_options");
    luaL_error(L, "%s: the %s backend does not take %s %s (besides the "
               "generic workdir, env, timeout, network, owner and tags it "
               "takes: %s; and to reach it: %s)", context, bname,
               nu > 1 ? "the options" : "the option", lua_tostring(L, -3),
               lua_tostring(L, -2), lua_tostring(L, -1));
  }
  if (nc) {
    lash_sandbox_opt_push_names(L, creation, nc);
    luaL_error(L, "%s: %s only appl%s when a sandbox is created, not to an "
               "existing one given by id; drop %s, or create a new sandbox "
               "instead", context, lua_tostring(L, -1), nc > 1 ? "y" : "ies",
               nc > 1 ? "them" : "it");
  }
  lua_createtable(L, 0, 4);
  lua_pushstring(L, bname);
  lua_setfield(L, -2, "backend");
  if (opts) {
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      const char *k = lua_tostring(L, -2);
      if (set_has(L, fns, "config_options", k)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
      } else {
        lua_pop(L, 1);
      }
    }
  }
}

/* Backend name from an options table at idx (0: none): default "local". */
const char *lash_sandbox_opt_backend(lua_State *L, int idx) {
  const char *name = "local";
  if (idx && lua_getfield(L, idx, "backend") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "backend must be a string (e.g. \"local\", \"modal\")");
    name = lua_tostring(L, -1);
  }
  if (idx) lua_pop(L, 1);
  return name;
}

/* Build the create spec from the user's table at `spec`, for the backend at
** fns: pushes the normalized spec (see sandbox.h). */
void lash_sandbox_opt_spec(lua_State *L, int spec, int fns) {
  lua_Integer lifetime = LASH_SB_DEFAULT_LIFETIME;
  lua_Integer expires;
  int out, tags, net;
  lua_newtable(L);
  out = lua_gettop(L);
  /* backend options pass through unchecked: the backend validates them */
  lua_pushnil(L);
  while (lua_next(L, spec)) {
    const char *k = lua_tostring(L, -2);
    if (set_has(L, fns, "create_options", k) ||
        set_has(L, fns, "config_options", k)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, out);
    } else {
      lua_pop(L, 1);
    }
  }
  /* workdir */
  if (lua_getfield(L, spec, "workdir") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_getfield(L, fns, "default_workdir");
  } else {
    char norm[LASH_SB_PATH_MAX];
    const char *w = lash_sandbox_opt_cstring(L, -1, "workdir");
    if (w[0] != '/')
      luaL_error(L, "workdir must be an absolute path, got '%s'", w);
    if (lash_sandbox_path_normalize(w, norm, sizeof norm) != 0)
      luaL_error(L, "workdir is too long (at most %d bytes): pick a shorter path",
                 LASH_SB_PATH_MAX - 1);
    lua_pop(L, 1);
    lua_pushstring(L, norm);
  }
  lua_setfield(L, out, "workdir");
  /* env */
  if (lua_getfield(L, spec, "env") == LUA_TNIL) lua_newtable(L);
  else lash_sandbox_opt_string_map(L, -1, "env", 1, 0);
  lua_setfield(L, out, "env");
  lua_pop(L, lua_gettop(L) - out);
  /* timeout */
  if (lua_getfield(L, spec, "timeout") != LUA_TNIL)
    lifetime = check_seconds(L, -1, "timeout (the sandbox's lifetime)");
  lua_pop(L, 1);
  lua_pushinteger(L, lifetime);
  lua_setfield(L, out, "timeout");
  expires = (lua_Integer)floor(lash_wall_now()) + lifetime;
  lua_pushinteger(L, expires);
  lua_setfield(L, out, "expires_at");
  /* network */
  lua_getfield(L, spec, "network");
  lash_sandbox_network_normalize(L, -1);
  net = lua_gettop(L);
  lua_pushvalue(L, net);
  lua_setfield(L, out, "network");
  /* owner */
  if (lua_getfield(L, spec, "owner") != LUA_TNIL) {
    const char *o = lash_sandbox_opt_cstring(L, -1, "owner");
    if (!*o) luaL_error(L, "owner must not be empty (leave it out for no owner)");
    if (lua_getfield(L, spec, "idle_timeout") != LUA_TNIL &&
        lua_toboolean(L, -1))
      luaL_error(L, "a sandbox with an owner cannot have an idle_timeout: the "
                 "owner means a later step attaches to it, and the idle "
                 "timeout would reclaim it while it waits between steps. "
                 "Leave idle_timeout unset and size timeout to cover the wait");
    lua_pop(L, 1);
  }
  lua_setfield(L, out, "owner");
  /* idle_timeout: only a backend that enforces it may take it */
  if (lua_getfield(L, spec, "idle_timeout") != LUA_TNIL &&
      !set_has(L, fns, "create_options", "idle_timeout")) {
    lua_getfield(L, fns, "name");
    luaL_error(L, "the %s backend cannot enforce idle_timeout; leave it out (the "
               "sandbox's timeout bounds its life)", lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  /* from_snapshot: a backend that can snapshot can start from one */
  if (lua_getfield(L, spec, "from_snapshot") != LUA_TNIL) {
    const char *snap = lash_sandbox_opt_cstring(L, -1, "from_snapshot");
    if (!*snap) luaL_error(L, "from_snapshot must not be empty (leave it out to start empty)");
    if (lua_getfield(L, fns, "snapshot") != LUA_TFUNCTION) {
      lua_getfield(L, fns, "name");
      luaL_error(L, "the %s backend cannot start from a snapshot; leave from_snapshot out",
                 lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    lua_setfield(L, out, "from_snapshot");
  } else {
    lua_pop(L, 1);
  }
  /* tags: the user's, then the reserved stamps */
  if (lua_getfield(L, spec, "tags") == LUA_TNIL) lua_newtable(L);
  else lash_sandbox_opt_string_map(L, -1, "tags", 0, 1);
  tags = lua_gettop(L);
  lua_getfield(L, out, "owner");
  if (!lua_isnil(L, -1)) lua_setfield(L, tags, LASH_SB_TAG_OWNER);
  else lua_pop(L, 1);
  lua_pushfstring(L, "%I", expires);
  lua_setfield(L, tags, LASH_SB_TAG_EXPIRES_AT);
  lash_sandbox_network_encode(L, net);
  lua_setfield(L, tags, LASH_SB_TAG_NETWORK);
  lua_getfield(L, out, "workdir");
  if (!lua_isnil(L, -1)) lua_setfield(L, tags, LASH_SB_TAG_WORKDIR);
  else lua_pop(L, 1);
  lua_pushvalue(L, tags);
  lua_setfield(L, out, "tags");
  lua_settop(L, out);
}

/* Push the defaults the core applies (the one place they are set), by the
** names describe shows. */
void lash_sandbox_opt_push_defaults(lua_State *L) {
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, LASH_SB_DEFAULT_LIFETIME);
  lua_setfield(L, -2, "lifetime");
  lua_pushinteger(L, LASH_SB_DEFAULT_EXEC_TIMEOUT);
  lua_setfield(L, -2, "exec_timeout");
  lua_pushinteger(L, LASH_SB_DEFAULT_MAX_OUTPUT);
  lua_setfield(L, -2, "max_output_bytes");
  lua_pushinteger(L, LASH_SB_DEFAULT_MAX_READ);
  lua_setfield(L, -2, "max_read_bytes");
  lua_pushinteger(L, LASH_SB_DEFAULT_DESTROY);
  lua_setfield(L, -2, "destroy_timeout");
}

/* Push the option names of the set t.field as a sorted list. */
void lash_sandbox_opt_push_list(lua_State *L, int t, const char *field) {
  const char *names[64];
  int n = 0, i;
  if (lua_getfield(L, t, field) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2) && n < 64) {
      if (lua_type(L, -2) == LUA_TSTRING) names[n++] = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  }
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);   /* the names stay anchored in the set */
    lua_rawseti(L, -2, i + 1);
  }
  lua_remove(L, -2);
}

/* exec and spawn take a command the same way and share cwd and env. */
static const char *const exec_options[] = {"timeout", "max_output_bytes", "cwd",
                                           "env", "stdin", "on_output", NULL};

static const char *const spawn_options[] = {"cwd", "env", NULL};

void lash_sandbox_opt_command(lua_State *L, int is_exec) {
  const char *who = is_exec ? "exec" : "spawn";
  const char *const *known = is_exec ? exec_options : spawn_options;
  int opts;
  lua_settop(L, 3);
  if (lua_type(L, 2) == LUA_TSTRING) {
    lash_sandbox_opt_cstring(L, 2, "command");
    lua_createtable(L, 3, 0);
    lua_pushliteral(L, "sh");
    lua_rawseti(L, -2, 1);
    lua_pushliteral(L, "-c");
    lua_rawseti(L, -2, 2);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 3);
  } else {
    lua_Integer i, n;
    luaL_argexpected(L, lua_istable(L, 2), 2, "argv table or command string");
    n = (lua_Integer)lua_rawlen(L, 2);
    if (n == 0) luaL_argerror(L, 2, "argv is empty");
    lua_createtable(L, (int)n, 0);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, 2, i);
      lash_sandbox_opt_cstring(L, -1, "argv element");
      lua_rawseti(L, -2, i);
    }
  }
  lua_createtable(L, 0, 5);
  opts = lua_gettop(L);
  lashA_checkoptions(L, 3, who, known);
  if (!lua_isnil(L, 3)) {
    if (lua_getfield(L, 3, "cwd") != LUA_TNIL) {
      if (!*lash_sandbox_opt_cstring(L, -1, "cwd"))
        luaL_error(L, "cwd is empty (leave it out to run in the workdir)");
      lua_setfield(L, opts, "cwd");
    } else {
      lua_pop(L, 1);
    }
    if (lua_getfield(L, 3, "env") != LUA_TNIL) {
      lash_sandbox_opt_string_map(L, -1, "env", 1, 0);
      lua_setfield(L, opts, "env");
    }
    lua_settop(L, opts);
  }
  if (is_exec) {
    lua_Integer timeout = LASH_SB_DEFAULT_EXEC_TIMEOUT, maxout = LASH_SB_DEFAULT_MAX_OUTPUT;
    if (!lua_isnil(L, 3)) {
      if (lua_getfield(L, 3, "timeout") != LUA_TNIL)
        timeout = check_seconds(L, -1, "exec timeout");
      if (lua_getfield(L, 3, "max_output_bytes") != LUA_TNIL)
        maxout = lash_sandbox_opt_count(L, -1, "max_output_bytes");
      if (lua_getfield(L, 3, "stdin") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
          luaL_error(L, "stdin must be a string, got %s", luaL_typename(L, -1));
        lua_setfield(L, opts, "stdin");
      }
      if (lua_getfield(L, 3, "on_output") != LUA_TNIL) {
        /* a queue (outq.h) each chunk of output goes into as it arrives;
        ** the backend finds it in the normalized options, which the call
        ** keeps on its stack, so it outlives every chunk */
        if (!lash_outq_test(L, -1))
          luaL_error(L, "on_output must be an output queue (lash.core.outq.new()), got %s",
                     luaL_typename(L, -1));
        lua_setfield(L, opts, "on_output");
      }
      lua_settop(L, opts);
    }
    lua_pushinteger(L, timeout);
    lua_setfield(L, opts, "timeout");
    lua_pushinteger(L, maxout);
    lua_setfield(L, opts, "max_output_bytes");
  }
  lua_replace(L, 3);
  lua_replace(L, 2);
}

const char *lash_sandbox_opt_path(lua_State *L, int idx) {
  const char *p = lash_sandbox_opt_cstring(L, idx, "path");
  if (!*p) luaL_argerror(L, idx, "empty path");
  return p;
}

void lash_sandbox_opt_identity(lua_State *L, int idx, const char *what) {
  const char *s = lash_sandbox_opt_cstring(L, idx, what);
  if (!*s) luaL_error(L, "%s must not be empty", what);
}

void lash_sandbox_opt_sort(const char **names, int n) {
  qsort(names, (size_t)n, sizeof *names, cmp_str);
}
