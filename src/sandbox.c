/*
** sandbox.c: `lash.sandbox`, the generic half of sandboxes (the backends
** are in sandbox_local.c and the Modal files; the contract is sandbox.h).
** Owns: the backend registry (C vtables and Lua tables alike), argument
** checks and defaults, the reserved lash_ tags stamped at create, sandbox
** objects and their lifecycle (owned: destroyed on close; attached: never
** destroyed; session: destroyed on close only when the session created
** it), and attach/release with owner and holder marks -- one
** implementation for every backend, atomic where the backend can
** compare-and-set. Every backend call goes through lua_callk so that any
** of them may wait.
*/
#include "sandbox.h"
#include "modules.h"
#include "runtime.h"
#include "json.h"
#include "laux.h"
#include "output.h"

#include <errno.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SB_MT        "lash.sandbox"
#define BACKENDS_KEY "lash.sandbox.backends"

#define DEFAULT_LIFETIME      LASH_SB_DEFAULT_LIFETIME
#define DEFAULT_EXEC_TIMEOUT  LASH_SB_DEFAULT_EXEC_TIMEOUT
#define DEFAULT_MAX_OUTPUT    LASH_SB_DEFAULT_MAX_OUTPUT
#define DEFAULT_MAX_READ      LASH_SB_DEFAULT_MAX_READ
#define DESTROY_TIMEOUT       LASH_SB_DEFAULT_DESTROY

enum { MODE_OWNED, MODE_ATTACHED, MODE_SESSION };
static const char *const mode_names[] = {"owned", "attached", "session"};

/* The userdata; uservalue 1 is {id =, backend =, cfg =, fns =}. */
typedef struct sbobj {
  int closed;
  int mode;
  int owns;        /* close() destroys it */
} sbobj;

/* Creation-only settings every backend understands. */
static const char *const generic_create[] = {
  "workdir", "env", "timeout", "network", "owner", "tags", "idle_timeout",
  "from_snapshot", NULL
};

static const char *const required_slots[] = {
  "create", "exec", "stat", "read_file", "write_file", "list_dir", "poll",
  "destroy", NULL
};
static const char *const optional_slots[] = {
  "read_tags", "write_tags", "cas_tags", "list", "gc", "probe", "snapshot",
  "spawn", NULL
};

/* ---- errors ------------------------------------------------------------ */

void lash_sandbox_push_error(lua_State *L, const char *kind, const char *code,
                             const char *message) {
  int recoverable = strcmp(kind, LASH_SB_ERROR) == 0;
  lash_error_push(L, kind, message, recoverable);
  lua_pushboolean(L, !recoverable);
  lua_setfield(L, -2, "terminal");
  if (code) {
    lua_pushstring(L, code);
    lua_setfield(L, -2, "code");
  }
}

int lash_sandbox_raise(lua_State *L, const char *kind, const char *code,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lash_sandbox_push_error(L, kind, code, lua_tostring(L, -1));
  lua_remove(L, -2);
  return lua_error(L);
}

int lash_sandbox_raise_too_large(lua_State *L, const char *path,
                                 lua_Integer size, lua_Integer max_bytes,
                                 const char *why) {
  if (size >= 0 && max_bytes >= 0) {
    char a[32], b[32];
    lash_format_size((uint64_t)size, a, sizeof a);
    lash_format_size((uint64_t)max_bytes, b, sizeof b);
    lua_pushfstring(L, "'%s' is %s, over the %s read limit", path, a, b);
  } else {
    lua_pushfstring(L, "'%s' is too large: %s", path, why ? why : "over the limit");
  }
  lash_sandbox_push_error(L, LASH_SB_ERROR, "too_large", lua_tostring(L, -1));
  if (size >= 0) {
    lua_pushinteger(L, size);
    lua_setfield(L, -2, "size");
  }
  if (max_bytes >= 0) {
    lua_pushinteger(L, max_bytes);
    lua_setfield(L, -2, "max_bytes");
  }
  lua_pushstring(L, path);
  lua_setfield(L, -2, "path");
  return lua_error(L);
}

/* ---- the exec result ---------------------------------------------------------- */

static void push_ring(lua_State *L, lash_ring *r) {
  size_t n;
  const char *p = lash_ring_view(r, &n);
  lua_pushlstring(L, p ? p : "", n);
}

void lash_sandbox_push_exec_result(lua_State *L, lash_ring *out, lash_ring *err,
                                   lua_Integer exit_code, int timed_out,
                                   lua_Integer applied_timeout) {
  lua_createtable(L, 0, 7);
  push_ring(L, out);
  lua_setfield(L, -2, "stdout");
  push_ring(L, err);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, lash_ring_dropped(out));
  lua_setfield(L, -2, "stdout_truncated");
  lua_pushboolean(L, lash_ring_dropped(err));
  lua_setfield(L, -2, "stderr_truncated");
  lua_pushinteger(L, exit_code);
  lua_setfield(L, -2, "exit_code");
  lua_pushboolean(L, timed_out);
  lua_setfield(L, -2, "timed_out");
  lua_pushinteger(L, applied_timeout);
  lua_setfield(L, -2, "applied_timeout");
}

/* ---- JSON ------------------------------------------------------------------ */

static int json_encode_f(lua_State *L) {
  lash_json_encode(L, 1, (int)lua_tointeger(L, 2));
  return 1;
}

static int json_decode_f(lua_State *L) {
  size_t n;
  const char *s = lua_tolstring(L, 1, &n);
  lash_json_decode(L, s, n);
  return 1;
}

int lash_sandbox_json_encode(lua_State *L, int idx, int canonical) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, json_encode_f);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, canonical ? LASH_JSON_CANONICAL : LASH_JSON_HASH_ORDER);
  return lua_pcall(L, 2, 1, 0) == LUA_OK;
}

int lash_sandbox_json_decode(lua_State *L, const char *s, size_t len) {
  lua_pushcfunction(L, json_decode_f);
  lua_pushlstring(L, s, len);
  return lua_pcall(L, 1, 1, 0) == LUA_OK;
}

/* ---- small helpers ------------------------------------------------------- */

static int in_list(const char *const *list, const char *s) {
  if (!list) return 0;
  for (; *list; list++)
    if (strcmp(*list, s) == 0) return 1;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Push "a, b, c" from the names (sorted in place). */
static void push_names(lua_State *L, const char **names, int n) {
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
  push_names(L, names, n);
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

double lash_sandbox_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define wall_now lash_sandbox_wall_now

lua_Integer lash_sandbox_deadline(lua_Integer requested, double expires_at,
                                  lua_Integer ceiling) {
  lua_Integer t = requested;
  if (ceiling > 0 && t > ceiling) t = ceiling;
  if (expires_at > 0) {
    double left = ceil(expires_at - wall_now());
    if (left < (double)t) t = (lua_Integer)left;
  }
  if (t > LASH_SB_MAX_SECONDS) t = LASH_SB_MAX_SECONDS;
  return t < 1 ? 1 : t;
}

/* A string without NUL bytes (for paths, argv, env). */
static const char *check_cstring(lua_State *L, int idx, const char *what) {
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

static lua_Integer check_count(lua_State *L, int idx, const char *what) {
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
static void copy_string_map(lua_State *L, int idx, const char *what, int env,
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

/* ---- the network policy ------------------------------------------------- */

/* Normalize the network option at idx (nil, "off", "on", or a table) into
** {block_network =, allow_egress_to =, allow_egress_to_cidrs =} (pushed). */
static void normalize_network(lua_State *L, int idx) {
  int block = 1;
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  lua_newtable(L);
  lua_setfield(L, -2, "allow_egress_to");
  lua_newtable(L);
  lua_setfield(L, -2, "allow_egress_to_cidrs");
  if (lua_isnil(L, idx)) {
    block = 1;
  } else if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "off") == 0 || strcmp(s, "none") == 0) block = 1;
    else if (strcmp(s, "on") == 0 || strcmp(s, "full") == 0) block = 0;
    else luaL_error(L, "network must be \"off\", \"on\" or a policy table, "
                    "got \"%s\"", s);
  } else if (lua_istable(L, idx)) {
    static const char *const known[] = {"block_network", "allow_egress_to",
                                        "allow_egress_to_cidrs", NULL};
    int lists = 0;
    const char *fields[2] = {"allow_egress_to", "allow_egress_to_cidrs"};
    int f;
    lashA_checkoptions(L, idx, "network policy", known);
    if (lua_getfield(L, idx, "block_network") != LUA_TNIL) {
      if (!lua_isboolean(L, -1))
        luaL_error(L, "network.block_network must be a boolean");
      block = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    for (f = 0; f < 2; f++) {
      lua_Integer i, n;
      if (lua_getfield(L, idx, fields[f]) == LUA_TNIL) {
        lua_pop(L, 1);
        continue;
      }
      if (!lua_istable(L, -1))
        luaL_error(L, "network.%s must be a list of strings", fields[f]);
      n = (lua_Integer)lua_rawlen(L, -1);
      lua_getfield(L, -2, fields[f]);          /* the normalized list */
      for (i = 1; i <= n; i++) {
        lua_rawgeti(L, -2, i);
        if (lua_type(L, -1) != LUA_TSTRING)
          luaL_error(L, "network.%s[%I] must be a string", fields[f], i);
        lua_rawseti(L, -2, i);
        lists++;
      }
      lua_pop(L, 2);
    }
    if (lists && !block)
      luaL_error(L, "an egress allow-list only means something with "
                 "block_network = true (everything else blocked); set "
                 "block_network = true or drop the lists");
  } else {
    luaL_error(L, "network must be \"off\", \"on\" or a policy table, got %s",
               luaL_typename(L, idx));
  }
  lua_pushboolean(L, block);
  lua_setfield(L, -2, "block_network");
}

/* The lash_network stamp of the normalized policy at idx: lash's canonical
** JSON (compact, sorted keys), e.g. {"allow_egress_to":[],
** "allow_egress_to_cidrs":[],"block_network":true}. Pushed. */
static void encode_network(lua_State *L, int idx) {
  const char *fields[2] = {"allow_egress_to", "allow_egress_to_cidrs"};
  int f;
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  for (f = 0; f < 2; f++) {
    lua_Integer i, n;
    lua_getfield(L, idx, fields[f]);
    n = (lua_Integer)lua_rawlen(L, -1);
    lua_createtable(L, (int)n, 0);     /* marked an array: [] when empty */
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, -2, i);
      lua_rawseti(L, -2, i);
    }
    lash_json_push_array_mt(L);
    lua_setmetatable(L, -2);
    lua_setfield(L, -3, fields[f]);
    lua_pop(L, 1);
  }
  lua_getfield(L, idx, "block_network");
  lua_pushboolean(L, lua_toboolean(L, -1));
  lua_setfield(L, -3, "block_network");
  lua_pop(L, 1);
  lash_json_encode(L, -1, LASH_JSON_CANONICAL);
  lua_remove(L, -2);
}

/* Decode a lash_network stamp at idx: pushes the policy table, or nil when
** it is not exactly the three-key shape. */
static void decode_network(lua_State *L, int idx) {
  int top = lua_gettop(L), ok = 0;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TSTRING) {
    lua_pushnil(L);
    return;
  }
  {
    size_t len;
    const char *text = lua_tolstring(L, idx, &len);
    if (!lash_sandbox_json_decode(L, text, len)) lua_settop(L, top);
  }
  if (lua_gettop(L) == top + 1 && lua_istable(L, -1)) {
    int t = lua_gettop(L), n = 0, good = 1;
    lua_pushnil(L);
    while (lua_next(L, t)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
      n++;
      if (strcmp(k, "block_network") == 0) good &= lua_isboolean(L, -1);
      else if (strcmp(k, "allow_egress_to") == 0 ||
               strcmp(k, "allow_egress_to_cidrs") == 0) {
        if (lua_istable(L, -1)) {
          lua_Integer i, len = (lua_Integer)lua_rawlen(L, -1);
          for (i = 1; i <= len; i++) {
            lua_rawgeti(L, -1, i);
            good &= lua_type(L, -1) == LUA_TSTRING;
            lua_pop(L, 1);
          }
        } else {
          good = 0;
        }
      } else {
        good = 0;
      }
      lua_pop(L, 1);
    }
    ok = good && n == 3;
    if (ok) {
      normalize_network(L, t);
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return;
    }
  }
  lua_settop(L, top);
  lua_pushnil(L);
}

/* ---- the registry of backends ------------------------------------------- */

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

static void register_c_backend(lua_State *L, const lash_sandbox_backend *b) {
  struct { const char *name; lua_CFunction f; } slots[] = {
    {"create", b->create}, {"exec", b->exec}, {"stat", b->stat},
    {"read_file", b->read_file}, {"write_file", b->write_file},
    {"list_dir", b->list_dir}, {"read_tags", b->read_tags},
    {"write_tags", b->write_tags}, {"poll", b->poll},
    {"destroy", b->destroy}, {"cas_tags", b->cas_tags}, {"list", b->list},
    {"gc", b->gc}, {"probe", b->probe}, {"snapshot", b->snapshot},
    {"spawn", b->spawn},
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
      if (in_list(generic_create, lua_tostring(L, -1)) ||
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

/*** Register a backend written in Lua.
** @function register_backend
** @tparam string name
** @tparam table t the slots of sandbox.h as functions (create, exec, stat,
**   read_file, write_file, list_dir, poll, destroy required; read_tags,
**   write_tags, cas_tags, list, gc, probe optional), create_options and
**   config_options (lists of names), default_workdir (string). */
static int l_register_backend(lua_State *L) {
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
static void push_backend(lua_State *L, const char *name) {
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
    push_names(L, names, n);
    luaL_error(L, "unknown sandbox backend '%s' (known: %s)", name,
               lua_tostring(L, -1));
  }
}

/*** The names of the registered backends, sorted.
** @function backends */
static int l_backends(lua_State *L) {
  const char *names[32];
  int n = 0, i;
  push_backends(L);
  lua_pushnil(L);
  while (lua_next(L, -2) && n < 32) {
    names[n++] = lua_tostring(L, -2);
    lua_pop(L, 1);
  }
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---- options ----------------------------------------------------------- */

enum { OPT_CREATE, OPT_EXISTING };

/* Check every key of the options table at opts against what the backend at
** fns takes. For OPT_EXISTING, creation-only settings are refused all
** together, named. Then push cfg: {backend = name, <config options>}. */
static void check_options(lua_State *L, int opts, int fns, int kind,
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
      if (kind == OPT_EXISTING && (strcmp(k, "id") == 0 ||
                                   strcmp(k, "sandbox_id") == 0))
        continue;
      if (in_list(generic_create, k) || set_has(L, fns, "create_options", k)) {
        if (kind == OPT_EXISTING && nc < 64) creation[nc++] = k;
        continue;
      }
      if (nu < 64) unknown[nu++] = k;
    }
  }
  if (nu) {
    push_names(L, unknown, nu);
    push_option_set(L, fns, "create_options");
    push_option_set(L, fns, "config_options");
    luaL_error(L, "%s: the %s backend does not take %s %s (besides the "
               "generic workdir, env, timeout, network, owner and tags it "
               "takes: %s; and to reach it: %s)", context, bname,
               nu > 1 ? "the options" : "the option", lua_tostring(L, -3),
               lua_tostring(L, -2), lua_tostring(L, -1));
  }
  if (nc) {
    push_names(L, creation, nc);
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
static const char *backend_name(lua_State *L, int idx) {
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
static void normalize_spec(lua_State *L, int spec, int fns) {
  lua_Integer lifetime = DEFAULT_LIFETIME;
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
    const char *w = check_cstring(L, -1, "workdir");
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
  else copy_string_map(L, -1, "env", 1, 0);
  lua_setfield(L, out, "env");
  lua_pop(L, lua_gettop(L) - out);
  /* timeout */
  if (lua_getfield(L, spec, "timeout") != LUA_TNIL)
    lifetime = check_seconds(L, -1, "timeout (the sandbox's lifetime)");
  lua_pop(L, 1);
  lua_pushinteger(L, lifetime);
  lua_setfield(L, out, "timeout");
  expires = (lua_Integer)floor(wall_now()) + lifetime;
  lua_pushinteger(L, expires);
  lua_setfield(L, out, "expires_at");
  /* network */
  lua_getfield(L, spec, "network");
  normalize_network(L, -1);
  net = lua_gettop(L);
  lua_pushvalue(L, net);
  lua_setfield(L, out, "network");
  /* owner */
  if (lua_getfield(L, spec, "owner") != LUA_TNIL) {
    const char *o = check_cstring(L, -1, "owner");
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
    const char *snap = check_cstring(L, -1, "from_snapshot");
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
  else copy_string_map(L, -1, "tags", 0, 1);
  tags = lua_gettop(L);
  lua_getfield(L, out, "owner");
  if (!lua_isnil(L, -1)) lua_setfield(L, tags, LASH_SB_TAG_OWNER);
  else lua_pop(L, 1);
  lua_pushfstring(L, "%I", expires);
  lua_setfield(L, tags, LASH_SB_TAG_EXPIRES_AT);
  encode_network(L, net);
  lua_setfield(L, tags, LASH_SB_TAG_NETWORK);
  lua_getfield(L, out, "workdir");
  if (!lua_isnil(L, -1)) lua_setfield(L, tags, LASH_SB_TAG_WORKDIR);
  else lua_pop(L, 1);
  lua_pushvalue(L, tags);
  lua_setfield(L, out, "tags");
  lua_settop(L, out);
}

/* ---- sandbox objects ------------------------------------------------------ */

static sbobj *check_sb(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, SB_MT);
}

static sbobj *check_open(lua_State *L, int idx) {
  sbobj *o = check_sb(L, idx);
  if (o->closed)
    luaL_error(L, "this sandbox handle is closed: use it before :close(), or reopen a "
                  "sandbox that still exists with lash.sandbox.open(id)");
  return o;
}

/* Push field of the object's uservalue. */
static int sb_field(lua_State *L, int idx, const char *field) {
  int t;
  lua_getiuservalue(L, idx, 1);
  t = lua_getfield(L, -1, field);
  lua_remove(L, -2);
  return t;
}

/* Push a new object: fns, cfg and id on the stack at the given indexes. */
static void push_object(lua_State *L, int fns, int cfg, int id, int mode,
                        int owns) {
  sbobj *o;
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
  luaL_setmetatable(L, SB_MT);
}

/* Push the slot function of the object at idx, or raise. */
static void push_slot(lua_State *L, int idx, const char *slot) {
  sb_field(L, idx, "fns");
  if (lua_getfield(L, -1, slot) != LUA_TFUNCTION) {
    lua_getfield(L, -2, "name");
    luaL_error(L, "the %s backend has no '%s' operation", lua_tostring(L, -1),
               slot);
  }
  lua_remove(L, -2);
}

static int has_slot(lua_State *L, int idx, const char *slot) {
  int t;
  sb_field(L, idx, "fns");
  t = lua_getfield(L, -1, slot);
  lua_pop(L, 2);
  return t == LUA_TFUNCTION;
}

static int finish_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return lua_gettop(L) - (int)ctx;
}

static int true_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  lua_settop(L, (int)ctx);
  lua_pushboolean(L, 1);
  return 1;
}

/* Call slot of the object at 1 with (cfg, id, <the nargs values on top>);
** its results are returned by k (ctx = the base below them). */
static int dispatch(lua_State *L, const char *slot, int nargs,
                    lua_KFunction k) {
  int base = lua_gettop(L) - nargs;
  push_slot(L, 1, slot);
  lua_insert(L, base + 1);
  sb_field(L, 1, "cfg");
  lua_insert(L, base + 2);
  sb_field(L, 1, "id");
  lua_insert(L, base + 3);
  lua_callk(L, nargs + 2, LUA_MULTRET, base, k);
  return k(L, LUA_OK, base);
}

/* ---- constructors -------------------------------------------------------- */

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

static int do_create(lua_State *L, int mode, const char *context) {
  const char *name;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  name = backend_name(L, 1);
  push_backend(L, name);                          /* 2 fns */
  check_options(L, 1, 2, OPT_CREATE, context);    /* 3 cfg */
  normalize_spec(L, 1, 2);                        /* 4 spec */
  lua_getfield(L, 2, "create");
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  lua_callk(L, 2, 1, mode, create_k);
  return create_k(L, LUA_OK, mode);
}

/*** Create a sandbox owned by the returned object: close() destroys it.
** @function create
** @tparam table spec backend ("local"), workdir, env, timeout (lifetime,
**   seconds, default 300), network ("off" (default), "on", or {block_network,
**   allow_egress_to, allow_egress_to_cidrs}), owner, tags, idle_timeout
**   (backends that enforce it: modal), from_snapshot (an id from
**   sandbox:snapshot()), and the backend's own options (local: rootfs,
**   limits, isolation, state_root; modal: image, app_name, cpu, memory, gpu).
** @treturn lash.sandbox */
static int l_create(lua_State *L) {
  return do_create(L, MODE_OWNED, "lash.sandbox.create");
}

/* Wrap an existing id (at idx) with options at opts (0: none). */
static int wrap_existing(lua_State *L, int idx, int opts, int mode,
                         const char *context) {
  const char *name, *id;
  id = check_cstring(L, idx, "sandbox id");
  if (!*id) luaL_error(L, "%s: the sandbox id is empty", context);
  name = backend_name(L, opts);
  push_backend(L, name);
  check_options(L, opts, lua_gettop(L), OPT_EXISTING, context);
  push_object(L, -2, -1, idx, mode, 0);
  return 1;
}

/*** An existing sandbox by id (attached mode: never destroyed by close).
** @function open
** @tparam string id
** @tparam[opt] table opts backend and its config options only */
static int l_open(lua_State *L) {
  int opts = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    opts = 2;
  }
  return wrap_existing(L, 1, opts, MODE_ATTACHED, "lash.sandbox.open");
}

/*** A shared session: hand it to several runs, close it yourself
** (`local s <close> = lash.sandbox.session{...}`). With `id` it wraps an
** existing sandbox (close leaves it); otherwise it creates one (close
** destroys it). Runs never destroy a session.
** @function session */
static int l_session(lua_State *L) {
  int t;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  t = lua_getfield(L, 1, "id");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    t = lua_getfield(L, 1, "sandbox_id");
  }
  if (t != LUA_TNIL) return wrap_existing(L, 2, 1, MODE_SESSION,
                                          "lash.sandbox.session");
  lua_pop(L, 1);
  return do_create(L, MODE_SESSION, "lash.sandbox.session");
}

/* Module-level operations that need only a backend: list, gc, probe. */
static int backend_call(lua_State *L, const char *slot, const char *what) {
  int opts = 0;
  const char *name;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    opts = 1;
  }
  lua_settop(L, 1);
  name = backend_name(L, opts);
  push_backend(L, name);                                  /* 2 */
  check_options(L, opts, 2, OPT_EXISTING, what);          /* 3 */
  if (lua_getfield(L, 2, slot) != LUA_TFUNCTION)
    return lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported",
                              "the %s backend cannot %s", name, what);
  lua_pushvalue(L, 3);
  lua_callk(L, 1, LUA_MULTRET, 3, finish_k);
  return finish_k(L, LUA_OK, 3);
}

/*** The backend's sandboxes (local: those under the state root).
** @function list */
static int l_list(lua_State *L) { return backend_call(L, "list", "list sandboxes"); }
/*** Remove expired sandboxes; returns the removed ids.
** @function gc */
static int l_gc(lua_State *L) { return backend_call(L, "gc", "collect expired sandboxes"); }
/*** Whether the backend can run here: true, or false and the reason.
** @function probe */
static int l_probe(lua_State *L) { return backend_call(L, "probe", "probe"); }

/* ---- operations -------------------------------------------------------------- */

static const char *check_path(lua_State *L, int idx) {
  const char *p = check_cstring(L, idx, "path");
  if (!*p) luaL_argerror(L, idx, "empty path");
  return p;
}

static int exec_k(lua_State *L, int status, lua_KContext ctx) {
  static const char *const strs[] = {"stdout", "stderr", NULL};
  static const char *const bools[] = {"stdout_truncated", "stderr_truncated",
                                      "timed_out", NULL};
  int i;
  (void)status;
  lua_settop(L, (int)ctx + 1);
  if (!lua_istable(L, -1))
    luaL_error(L, "the sandbox backend's exec returned %s instead of a "
               "result table", luaL_typename(L, -1));
  for (i = 0; strs[i]; i++) {
    if (lua_getfield(L, -1, strs[i]) != LUA_TSTRING)
      luaL_error(L, "the sandbox backend's exec result has no string '%s'",
                 strs[i]);
    lua_pop(L, 1);
  }
  for (i = 0; bools[i]; i++) {
    if (lua_getfield(L, -1, bools[i]) == LUA_TNIL) {
      lua_pushboolean(L, 0);
      lua_setfield(L, -3, bools[i]);
    }
    lua_pop(L, 1);
  }
  if (lua_getfield(L, -1, "exit_code") != LUA_TNUMBER)
    luaL_error(L, "the sandbox backend's exec result has no exit_code");
  lua_pop(L, 1);
  return 1;
}

/* exec and spawn take a command the same way and share cwd and env. */
static const char *const exec_options[] = {"timeout", "max_output_bytes", "cwd",
                                           "env", "stdin", NULL};
static const char *const spawn_options[] = {"cwd", "env", NULL};

/* The command at 2 (a list of strings, or a string run with sh -c) and the
** options at 3, checked against known (exec's or spawn's) and defaulted:
** leaves argv and opts as arguments 2 and 3 of the backend's slot. */
static void push_command(lua_State *L, const char *who,
                         const char *const *known, int is_exec) {
  int opts;
  lua_settop(L, 3);
  if (lua_type(L, 2) == LUA_TSTRING) {
    check_cstring(L, 2, "command");
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
      check_cstring(L, -1, "argv element");
      lua_rawseti(L, -2, i);
    }
  }
  lua_createtable(L, 0, 5);
  opts = lua_gettop(L);
  lashA_checkoptions(L, 3, who, known);
  if (!lua_isnil(L, 3)) {
    if (lua_getfield(L, 3, "cwd") != LUA_TNIL) {
      if (!*check_cstring(L, -1, "cwd"))
        luaL_error(L, "cwd is empty (leave it out to run in the workdir)");
      lua_setfield(L, opts, "cwd");
    } else {
      lua_pop(L, 1);
    }
    if (lua_getfield(L, 3, "env") != LUA_TNIL) {
      copy_string_map(L, -1, "env", 1, 0);
      lua_setfield(L, opts, "env");
    }
    lua_settop(L, opts);
  }
  if (is_exec) {
    lua_Integer timeout = DEFAULT_EXEC_TIMEOUT, maxout = DEFAULT_MAX_OUTPUT;
    if (!lua_isnil(L, 3)) {
      if (lua_getfield(L, 3, "timeout") != LUA_TNIL)
        timeout = check_seconds(L, -1, "exec timeout");
      if (lua_getfield(L, 3, "max_output_bytes") != LUA_TNIL)
        maxout = check_count(L, -1, "max_output_bytes");
      if (lua_getfield(L, 3, "stdin") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
          luaL_error(L, "stdin must be a string, got %s", luaL_typename(L, -1));
        lua_setfield(L, opts, "stdin");
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

/* Raise "unsupported" unless the backend of the object at 1 has slot. */
static void need_slot(lua_State *L, const char *slot, const char *cannot) {
  if (!has_slot(L, 1, slot)) {
    sb_field(L, 1, "backend");
    lash_sandbox_raise(L, LASH_SB_ERROR, "unsupported", "the %s backend cannot %s",
                       lua_tostring(L, -1), cannot);
  }
}

/*** Run a command. argv is a list of strings, or a string run with sh -c.
** @function sandbox:exec
** @tparam[opt] table opts timeout (seconds, default 60, rounded up, at least
**   1), max_output_bytes (per stream, default 1 MiB; the tail is kept), cwd,
**   env, stdin (string)
** @treturn table stdout, stderr, stdout_truncated, stderr_truncated,
**   exit_code, timed_out, applied_timeout */
static int m_exec(lua_State *L) {
  check_open(L, 1);
  push_command(L, "exec", exec_options, 1);
  return dispatch(L, "exec", 2, exec_k);
}

/*** Start a long-lived process in the sandbox with its stdin, stdout and
** stderr as streams (an MCP server run jailed): the same jail as exec's,
** no deadline. argv is a list of strings, or a string run with sh -c.
** @function sandbox:spawn
** @tparam[opt] table opts cwd, env (as exec's)
** @return a lash.proc handle (read, write, close_stdin, wait, kill, close);
**   closing it ends the process, and so does destroying the sandbox */
static int m_spawn(lua_State *L) {
  check_open(L, 1);
  need_slot(L, "spawn", "run a long-lived process with streams (sandbox:spawn, "
            "used for MCP servers inside a sandbox): not supported on this "
            "backend yet; use the local backend");
  push_command(L, "spawn", spawn_options, 0);
  return dispatch(L, "spawn", 2, finish_k);
}

/*** @function sandbox:stat
** @treturn table kind ("file", "dir", "symlink", "other"), size, mode, mtime */
static int m_stat(lua_State *L) {
  check_open(L, 1);
  check_path(L, 2);
  lua_settop(L, 2);
  return dispatch(L, "stat", 1, finish_k);
}

/*** Read a whole file.
** @function sandbox:read_file
** @tparam string path
** @tparam[opt] table|integer opts max_bytes (default 5 MiB): a bigger file is
**   refused with a "sandbox" error of code "too_large" (fields size,
**   max_bytes, path)
** @treturn string */
static int m_read_file(lua_State *L) {
  lua_Integer max = DEFAULT_MAX_READ;
  check_open(L, 1);
  check_path(L, 2);
  lua_settop(L, 3);
  if (lua_istable(L, 3)) {
    if (lua_getfield(L, 3, "max_bytes") != LUA_TNIL)
      max = check_count(L, -1, "max_bytes");
  } else if (!lua_isnil(L, 3)) {
    max = check_count(L, 3, "max_bytes");
  }
  lua_settop(L, 2);
  lua_pushinteger(L, max);
  return dispatch(L, "read_file", 2, finish_k);
}

/*** Write a file (parents created).
** @function sandbox:write_file */
static int m_write_file(lua_State *L) {
  check_open(L, 1);
  check_path(L, 2);
  luaL_checktype(L, 3, LUA_TSTRING);
  lua_settop(L, 3);
  return dispatch(L, "write_file", 2, true_k);
}

static int entry_cmp(const void *a, const void *b) {
  const struct { const char *s; size_t n; int i; } *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, n);
  if (c) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* Sort the entries by name, in byte order. */
static int list_k(lua_State *L, int status, lua_KContext ctx) {
  struct ent { const char *s; size_t n; int i; } *v;
  lua_Integer i, n;
  int src;
  (void)status;
  lua_settop(L, (int)ctx + 1);
  src = lua_gettop(L);
  if (!lua_istable(L, src))
    luaL_error(L, "the sandbox backend's list_dir returned %s", luaL_typename(L, src));
  n = (lua_Integer)lua_rawlen(L, src);
  v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *v, 0);
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, src, i);
    if (!lua_istable(L, -1) || lua_getfield(L, -1, "name") != LUA_TSTRING)
      luaL_error(L, "the sandbox backend's list_dir returned an entry without "
                 "a name");
    v[i - 1].s = lua_tolstring(L, -1, &v[i - 1].n);   /* anchored in src */
    v[i - 1].i = (int)i;
    lua_pop(L, 2);
  }
  qsort(v, (size_t)n, sizeof *v, entry_cmp);
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, src, v[i].i);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/*** List a directory: entries {name, kind}, sorted by name (bytes).
** @function sandbox:list_dir */
static int m_list_dir(lua_State *L) {
  check_open(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_pushliteral(L, ".");
  }
  check_path(L, 2);
  lua_settop(L, 2);
  return dispatch(L, "list_dir", 1, list_k);
}

static void need_tags(lua_State *L) {
  need_slot(L, "read_tags", "hold tags");
}

/*** The sandbox's tags (including the reserved lash_ ones).
** @function sandbox:read_tags */
static int m_read_tags(lua_State *L) {
  check_open(L, 1);
  need_tags(L);
  lua_settop(L, 1);
  return dispatch(L, "read_tags", 0, finish_k);
}

/*** Snapshot the sandbox's files: returns an id that
** `lash.sandbox.create{from_snapshot = id}` starts a new sandbox from
** (Modal: an image id; local: a copy of the workspace). The sandbox itself
** is untouched.
** @function sandbox:snapshot */
static int m_snapshot(lua_State *L) {
  check_open(L, 1);
  need_slot(L, "snapshot", "snapshot a sandbox");
  lua_settop(L, 1);
  return dispatch(L, "snapshot", 0, finish_k);
}

/*** Running, or how it ended: {running, status, exit_code, expires_at}.
** @function sandbox:poll */
static int m_poll(lua_State *L) {
  check_open(L, 1);
  lua_settop(L, 1);
  return dispatch(L, "poll", 0, finish_k);
}

/*** Destroy the sandbox now (idempotent), whatever the mode.
** @function sandbox:destroy
** @tparam[opt] table opts timeout: seconds to wait for confirmation (30) */
static int m_destroy(lua_State *L) {
  lua_Number t = DESTROY_TIMEOUT;
  check_open(L, 1);
  if (lua_istable(L, 2) && lua_getfield(L, 2, "timeout") != LUA_TNIL) {
    t = luaL_checknumber(L, -1);
    if (!(t > 0) || isinf(t)) luaL_error(L, "destroy timeout must be positive");
  }
  lua_settop(L, 1);
  lua_pushnumber(L, t);
  return dispatch(L, "destroy", 1, true_k);
}

/* ---- tags: write, attach, release ------------------------------------------ */

/* Copy the table at idx into a new table (pushed). */
static void copy_table(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
}

static const char *tag(lua_State *L, int tags, const char *key) {
  const char *v = NULL;
  if (lua_istable(L, tags) && lua_getfield(L, tags, key) == LUA_TSTRING)
    v = lua_tostring(L, -1);   /* anchored in tags */
  if (lua_istable(L, tags)) lua_pop(L, 1);
  return v && *v ? v : NULL;
}

/* write_tags: 1 self, 2 user tags (checked copy), then per attempt:
** 3 current, 4 new, [5 ok, 6 cur]. ctx: attempt*4 + step. */
static int wtags_k(lua_State *L, int status, lua_KContext ctx) {
  int attempt = (int)(ctx / 4), step = (int)(ctx % 4);
  (void)status;
  for (;;) {
    if (step == 0) {
      lua_settop(L, 2);
      push_slot(L, 1, "read_tags");
      sb_field(L, 1, "cfg");
      sb_field(L, 1, "id");
      lua_callk(L, 2, 1, attempt * 4 + 1, wtags_k);
      step = 1;
    }
    if (step == 1) {
      const char *holder;
      lua_settop(L, 3);
      if (!lua_istable(L, 3)) luaL_error(L, "read_tags returned no table");
      copy_table(L, 2);                                  /* 4 new */
      lua_pushnil(L);
      while (lua_next(L, 3)) {
        if (lua_type(L, -2) == LUA_TSTRING &&
            strncmp(lua_tostring(L, -2), LASH_SB_TAG_PREFIX,
                    sizeof LASH_SB_TAG_PREFIX - 1) == 0) {
          lua_pushvalue(L, -2);
          lua_insert(L, -2);
          lua_rawset(L, 4);
        } else {
          lua_pop(L, 1);
        }
      }
      if (has_slot(L, 1, "cas_tags")) {
        holder = tag(L, 3, LASH_SB_TAG_HOLDER);
        push_slot(L, 1, "cas_tags");
        sb_field(L, 1, "cfg");
        sb_field(L, 1, "id");
        lua_createtable(L, 0, 1);
        if (holder) lua_pushstring(L, holder);
        else lua_pushboolean(L, 0);
        lua_setfield(L, -2, LASH_SB_TAG_HOLDER);
        lua_pushvalue(L, 4);
        lua_callk(L, 4, 2, attempt * 4 + 2, wtags_k);
        step = 2;
      } else {
        push_slot(L, 1, "write_tags");
        sb_field(L, 1, "cfg");
        sb_field(L, 1, "id");
        lua_pushvalue(L, 4);
        lua_callk(L, 3, 0, attempt * 4 + 3, wtags_k);
        step = 3;
      }
    }
    if (step == 2) {
      if (lua_toboolean(L, 5)) step = 3;
      else if (++attempt >= 10)
        return lash_sandbox_raise(L, LASH_SB_ERROR, "conflict",
                                  "the tags kept changing under this write; "
                                  "try again");
      else {
        step = 0;
        continue;
      }
    }
    lua_settop(L, 1);
    lua_pushboolean(L, 1);
    return 1;
  }
}

/*** Replace the user tags (the reserved lash_ tags are kept as they are;
** setting one is refused).
** @function sandbox:write_tags */
static int m_write_tags(lua_State *L) {
  check_open(L, 1);
  need_tags(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  copy_string_map(L, 2, "tags", 0, 1);
  lua_replace(L, 2);
  return wtags_k(L, LUA_OK, 0);
}

static void check_identity(lua_State *L, int idx, const char *what) {
  const char *s = check_cstring(L, idx, what);
  if (!*s) luaL_error(L, "%s must not be empty", what);
}

/* The attach result from the tags at idx (read before the claim). */
static void push_attached(lua_State *L, int tags, int atomic) {
  const char *exp = tag(L, tags, LASH_SB_TAG_EXPIRES_AT);
  lua_createtable(L, 0, 8);
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "owner");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "holder");
  if (exp) {
    char *end;
    double e = strtod(exp, &end);
    if (end != exp && *end == '\0' && isfinite(e)) {
      double left = e - wall_now();
      lua_pushnumber(L, left > 0 ? left : 0);
      lua_setfield(L, -2, "remaining_lifetime");
      lua_pushinteger(L, (lua_Integer)floor(e));
      lua_setfield(L, -2, "expires_at");
    }
  }
  lua_getfield(L, tags, LASH_SB_TAG_NETWORK);
  if (!lua_isnil(L, -1)) {
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "network_stamp");
  }
  decode_network(L, -1);
  lua_setfield(L, -3, "network");
  lua_pop(L, 1);
  if (tag(L, tags, LASH_SB_TAG_WORKDIR)) {
    lua_getfield(L, tags, LASH_SB_TAG_WORKDIR);
    lua_setfield(L, -2, "workdir");
  }
  lua_pushboolean(L, atomic);
  lua_setfield(L, -2, "atomic");
  copy_table(L, tags);
  lua_setfield(L, -2, "tags");
}

static int raise_claimed(lua_State *L, const char *other) {
  sb_field(L, 1, "id");
  return lash_sandbox_raise(
      L, LASH_SB_REFUSED, "claimed",
      "Sandbox '%s' was claimed by '%s' while '%s' was attaching to it. Two "
      "runs asked for the same sandbox at once; provision one per run, or "
      "run them in sequence.", lua_tostring(L, -1),
      other ? other : "(nobody: the mark vanished)", lua_tostring(L, 3));
}

/* attach: 1 self, 2 owner, 3 holder, 4 tags read, 5 new tags, 6.. results.
** ctx = step. */
static int attach_k(lua_State *L, int status, lua_KContext ctx) {
  int step = (int)ctx;
  (void)status;
  if (step == 1) {
    const char *owner, *held, *id;
    lua_settop(L, 4);
    if (!lua_istable(L, 4)) luaL_error(L, "read_tags returned no table");
    sb_field(L, 1, "id");
    id = lua_tostring(L, -1);
    owner = tag(L, 4, LASH_SB_TAG_OWNER);
    if (!owner)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "no_owner",
          "Sandbox '%s' is not owned by '%s': it carries no owner. Only a "
          "sandbox created with an owner can be attached to; create it with "
          "one (lash sandbox create --owner '%s'), or let this run provision "
          "its own.", id, lua_tostring(L, 2), lua_tostring(L, 2));
    if (strcmp(owner, lua_tostring(L, 2)) != 0)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "wrong_owner",
          "Sandbox '%s' is not owned by '%s': it carries owner '%s'. Attach "
          "with the owner the provisioning step stamped, or check that the "
          "handle is the one meant for this run.", id, lua_tostring(L, 2),
          owner);
    held = tag(L, 4, LASH_SB_TAG_HOLDER);
    if (held && strcmp(held, lua_tostring(L, 3)) != 0)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "held",
          "Sandbox '%s' is already held by '%s', and one run uses a sandbox "
          "at a time. Provision a sandbox per run that needs its own "
          "workspace, or run the steps in sequence.", id, held);
    lua_settop(L, 4);
    if (held) {   /* our own mark (a retry of this holder): nothing to write */
      push_attached(L, 4, has_slot(L, 1, "cas_tags"));
      return 1;
    }
    copy_table(L, 4);                                        /* 5 */
    lua_pushvalue(L, 3);
    lua_setfield(L, 5, LASH_SB_TAG_HOLDER);
    if (has_slot(L, 1, "cas_tags")) {
      push_slot(L, 1, "cas_tags");
      sb_field(L, 1, "cfg");
      sb_field(L, 1, "id");
      lua_createtable(L, 0, 1);
      lua_pushboolean(L, 0);
      lua_setfield(L, -2, LASH_SB_TAG_HOLDER);
      lua_pushvalue(L, 5);
      lua_callk(L, 4, 2, 2, attach_k);
      step = 2;
    } else {
      push_slot(L, 1, "write_tags");
      sb_field(L, 1, "cfg");
      sb_field(L, 1, "id");
      lua_pushvalue(L, 5);
      lua_callk(L, 3, 0, 3, attach_k);
      step = 3;
    }
  }
  if (step == 2) {   /* 6 ok, 7 current tags */
    if (!lua_toboolean(L, 6))
      return raise_claimed(L, tag(L, 7, LASH_SB_TAG_HOLDER));
    lua_settop(L, 4);
    push_attached(L, 4, 1);
    return 1;
  }
  if (step == 3) {
    lua_settop(L, 5);
    push_slot(L, 1, "read_tags");
    sb_field(L, 1, "cfg");
    sb_field(L, 1, "id");
    lua_callk(L, 2, 1, 4, attach_k);
    step = 4;
  }
  /* step 4: 6 tags read back */
  {
    const char *back = tag(L, 6, LASH_SB_TAG_HOLDER);
    if (!back || strcmp(back, lua_tostring(L, 3)) != 0)
      return raise_claimed(L, back);
  }
  lua_settop(L, 4);
  push_attached(L, 4, 0);
  return 1;
}

/*** Claim the sandbox for holder, presenting owner: reads the tags, refuses
** (terminal "refused" errors) a missing or different owner or another
** holder, writes the holder mark and reads it back -- atomically where the
** backend can compare-and-set. Returns {owner, holder, remaining_lifetime,
** expires_at, network, network_stamp, workdir, atomic, tags}.
** @function sandbox:attach */
static int m_attach(lua_State *L) {
  check_open(L, 1);
  check_identity(L, 2, "owner");
  check_identity(L, 3, "holder");
  need_tags(L);
  lua_settop(L, 3);
  push_slot(L, 1, "read_tags");
  sb_field(L, 1, "cfg");
  sb_field(L, 1, "id");
  lua_callk(L, 2, 1, 1, attach_k);
  return attach_k(L, LUA_OK, 1);
}

/* release: 1 self, 2 holder, 3 tags, 4 new, 5 ok */
static int release_k(lua_State *L, int status, lua_KContext ctx) {
  int step = (int)ctx;
  (void)status;
  if (step == 1) {
    const char *held;
    lua_settop(L, 3);
    held = tag(L, 3, LASH_SB_TAG_HOLDER);
    if (!held || strcmp(held, lua_tostring(L, 2)) != 0) {
      lua_pushboolean(L, 0);   /* not ours: never cleared */
      return 1;
    }
    copy_table(L, 3);
    lua_pushnil(L);
    lua_setfield(L, 4, LASH_SB_TAG_HOLDER);
    if (has_slot(L, 1, "cas_tags")) {
      push_slot(L, 1, "cas_tags");
      sb_field(L, 1, "cfg");
      sb_field(L, 1, "id");
      lua_createtable(L, 0, 1);
      lua_pushvalue(L, 2);
      lua_setfield(L, -2, LASH_SB_TAG_HOLDER);
      lua_pushvalue(L, 4);
      lua_callk(L, 4, 1, 2, release_k);
      return release_k(L, LUA_OK, 2);
    }
    push_slot(L, 1, "write_tags");
    sb_field(L, 1, "cfg");
    sb_field(L, 1, "id");
    lua_pushvalue(L, 4);
    lua_callk(L, 3, 0, 3, release_k);
    step = 3;
  }
  if (step == 2) {
    lua_pushboolean(L, lua_toboolean(L, 5));
    return 1;
  }
  lua_settop(L, 4);
  lua_pushboolean(L, 1);
  return 1;
}

/*** Clear holder's mark (and only it). Returns true if cleared, false when
** the sandbox was not held by holder. A sandbox that is gone raises
** "unavailable" (for a caller releasing at run end: nothing to release).
** @function sandbox:release */
static int m_release(lua_State *L) {
  check_open(L, 1);
  check_identity(L, 2, "holder");
  need_tags(L);
  lua_settop(L, 2);
  push_slot(L, 1, "read_tags");
  sb_field(L, 1, "cfg");
  sb_field(L, 1, "id");
  lua_callk(L, 2, 1, 1, release_k);
  return release_k(L, LUA_OK, 1);
}

/* ---- close ------------------------------------------------------------------- */

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
  sbobj *o = check_sb(L, 1);
  lua_settop(L, 1);
  if (o->closed || !o->owns) {
    o->closed = 1;
    return k(L, LUA_OK, 1);
  }
  o->closed = 1;
  push_slot(L, 1, "destroy");
  sb_field(L, 1, "cfg");
  sb_field(L, 1, "id");
  lua_pushnumber(L, DESTROY_TIMEOUT);
  return k(L, lua_pcallk(L, 3, 0, 0, 1, k), 1);
}

/*** Close the handle. An owned sandbox (and a session that created its
** own) is destroyed, waiting up to 30 s for confirmation; attached ones
** are left alone. Returns true, or nil and the error when the destroy
** failed (the sandbox's own lifetime then ends it). Idempotent.
** @function sandbox:close */
static int m_close(lua_State *L) {
  return start_close(L, close_k);
}

static int gc_warn(lua_State *L, const char *what) {
  sb_field(L, 1, "id");
  lua_warning(L, "lash: sandbox ", 1);
  lua_warning(L, lua_tostring(L, -1), 1);
  lua_warning(L, what, 0);
  lua_pop(L, 1);
  return 0;
}

static int m_gc(lua_State *L) {
  sbobj *o = check_sb(L, 1);
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

/* __close: like close, but a failed destroy only warns (raising here would
** replace the error that is unwinding the scope). */
static int m_tbc(lua_State *L) {
  return start_close(L, tbc_k);
}

/*** Stop owning the sandbox: close() will leave it, and its own lifetime
** ends it. For a sandbox that must outlive this process (the CLI's
** create). Returns the id.
** @function sandbox:detach */
static int m_detach(lua_State *L) {
  sbobj *o = check_open(L, 1);
  o->owns = 0;
  o->mode = MODE_ATTACHED;
  sb_field(L, 1, "id");
  return 1;
}

static int m_tostring(lua_State *L) {
  sbobj *o = check_sb(L, 1);
  sb_field(L, 1, "id");
  sb_field(L, 1, "backend");
  lua_pushfstring(L, "lash.sandbox: %s (%s, %s%s)", lua_tostring(L, -2),
                  lua_tostring(L, -1), mode_names[o->mode],
                  o->closed ? ", closed" : "");
  return 1;
}

static const luaL_Reg methods[] = {
  {"exec", m_exec}, {"stat", m_stat}, {"read_file", m_read_file},
  {"write_file", m_write_file}, {"list_dir", m_list_dir},
  {"read_tags", m_read_tags}, {"write_tags", m_write_tags},
  {"poll", m_poll}, {"destroy", m_destroy}, {"attach", m_attach},
  {"snapshot", m_snapshot}, {"spawn", m_spawn},
  {"release", m_release}, {"close", m_close}, {"detach", m_detach},
  {NULL, NULL}
};

static int m_index(lua_State *L) {
  sbobj *o = check_sb(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "id") == 0 || strcmp(k, "backend") == 0) {
    sb_field(L, 1, k);
    return 1;
  }
  if (strcmp(k, "mode") == 0) {
    lua_pushstring(L, mode_names[o->mode]);
    return 1;
  }
  if (strcmp(k, "closed") == 0) {
    lua_pushboolean(L, o->closed);
    return 1;
  }
  if (strcmp(k, "can_attach") == 0) {
    lua_pushboolean(L, has_slot(L, 1, "read_tags"));
    return 1;
  }
  lua_getfield(L, lua_upvalueindex(1), k);
  return 1;
}

/* ---- module ------------------------------------------------------------------ */

/*** The lash_network stamp (compact, sorted-key JSON) of a network policy.
** @function encode_network */
static int l_encode_network(lua_State *L) {
  lua_settop(L, 1);
  normalize_network(L, 1);
  encode_network(L, -1);
  return 1;
}

/*** The policy in a lash_network stamp, or nil when it is not one.
** @function decode_network */
static int l_decode_network(lua_State *L) {
  lua_settop(L, 1);
  decode_network(L, 1);
  return 1;
}

/* Push the defaults the core applies (the one place they are set), by the
** names describe shows. */
static void push_defaults(lua_State *L) {
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, DEFAULT_LIFETIME);
  lua_setfield(L, -2, "lifetime");
  lua_pushinteger(L, DEFAULT_EXEC_TIMEOUT);
  lua_setfield(L, -2, "exec_timeout");
  lua_pushinteger(L, DEFAULT_MAX_OUTPUT);
  lua_setfield(L, -2, "max_output_bytes");
  lua_pushinteger(L, DEFAULT_MAX_READ);
  lua_setfield(L, -2, "max_read_bytes");
  lua_pushinteger(L, DESTROY_TIMEOUT);
  lua_setfield(L, -2, "destroy_timeout");
}

/* Push the option names of the set t.field as a sorted list. */
static void push_option_list(lua_State *L, int t, const char *field) {
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

/*** What a backend takes and can do, so that a caller (the sandbox
** capability) can check its options before anything is created: {name,
** create_options, config_options, generic_options (sorted lists of names),
** default_workdir, can_tag (read_tags/write_tags: attach and release
** work), atomic_claims (cas_tags), defaults (what the core applies when an
** option is left out: lifetime, exec_timeout, max_output_bytes,
** max_read_bytes, destroy_timeout)}. Raises for an unknown backend, naming
** the known ones.
** @function describe
** @tparam string name */
static int l_describe(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  int fns, i;
  lua_settop(L, 1);
  push_backend(L, name);
  fns = lua_gettop(L);
  lua_createtable(L, 0, 7);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "name");
  push_option_list(L, fns, "create_options");
  lua_setfield(L, -2, "create_options");
  push_option_list(L, fns, "config_options");
  lua_setfield(L, -2, "config_options");
  lua_newtable(L);
  for (i = 0; generic_create[i]; i++) {
    lua_pushstring(L, generic_create[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "generic_options");
  lua_getfield(L, fns, "default_workdir");
  lua_setfield(L, -2, "default_workdir");
  lua_pushboolean(L, lua_getfield(L, fns, "read_tags") == LUA_TFUNCTION);
  lua_setfield(L, -3, "can_tag");
  lua_pop(L, 1);
  lua_pushboolean(L, lua_getfield(L, fns, "cas_tags") == LUA_TFUNCTION);
  lua_setfield(L, -3, "atomic_claims");
  lua_pop(L, 1);
  push_defaults(L);
  lua_setfield(L, -2, "defaults");
  return 1;
}

static const luaL_Reg funcs[] = {
  {"create", l_create}, {"open", l_open}, {"session", l_session},
  {"register_backend", l_register_backend}, {"backends", l_backends},
  {"list", l_list}, {"gc", l_gc}, {"probe", l_probe},
  {"encode_network", l_encode_network}, {"decode_network", l_decode_network},
  {"describe", l_describe},
  {NULL, NULL}
};

int lash_open_sandbox(lua_State *L) {
  lash_runtime_open(L);
  if (luaL_newmetatable(L, SB_MT)) {
    luaL_newlib(L, methods);
    lua_pushcclosure(L, m_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, m_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, m_tbc);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, m_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
#define LASH_SB_REGISTER(name) \
  register_c_backend(L, &lash_sandbox_backend_##name);
  LASH_SANDBOX_BACKENDS(LASH_SB_REGISTER)
#undef LASH_SB_REGISTER
  luaL_newlib(L, funcs);
  lua_createtable(L, 0, 5);
  lua_pushliteral(L, LASH_SB_TAG_OWNER);
  lua_setfield(L, -2, "owner");
  lua_pushliteral(L, LASH_SB_TAG_HOLDER);
  lua_setfield(L, -2, "holder");
  lua_pushliteral(L, LASH_SB_TAG_EXPIRES_AT);
  lua_setfield(L, -2, "expires_at");
  lua_pushliteral(L, LASH_SB_TAG_NETWORK);
  lua_setfield(L, -2, "network");
  lua_pushliteral(L, LASH_SB_TAG_WORKDIR);
  lua_setfield(L, -2, "workdir");
  lua_setfield(L, -2, "tags");
  push_defaults(L);
  lua_setfield(L, -2, "defaults");
  return 1;
}
