/*
** lsandbox.c: the Lua binding `lash.sandbox` (lash_open_sandbox): its
** functions and the methods of sandbox objects, one metatable made at
** luaopen. Each entry checks its arguments and hands over to the core
** (sandbox.c, sandbox_claim.c, sandbox_options.c, sandbox_policy.c);
** nothing here knows a backend.
*/
#include "sandbox.h"
#include "sandbox_core.h"
#include "modules.h"
#include "lports.h"
#include "runtime.h"

#include <math.h>
#include <string.h>

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
  return lash_sandbox_create(L, LASH_SB_MODE_OWNED, "lash.sandbox.create");
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
  return lash_sandbox_wrap(L, 1, opts, LASH_SB_MODE_ATTACHED, "lash.sandbox.open");
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
  if (t != LUA_TNIL) return lash_sandbox_wrap(L, 2, 1, LASH_SB_MODE_SESSION,
                                          "lash.sandbox.session");
  lua_pop(L, 1);
  return lash_sandbox_create(L, LASH_SB_MODE_SESSION, "lash.sandbox.session");
}

/*** The backend's sandboxes (local: those under the state root).
** @function list */
static int l_list(lua_State *L) { return lash_sandbox_backend_call(L, "list", "list sandboxes"); }
/*** Remove expired sandboxes; returns the removed ids.
** @function gc */
static int l_gc(lua_State *L) { return lash_sandbox_backend_call(L, "gc", "collect expired sandboxes"); }
/*** Remove a snapshot (an id from sandbox:snapshot()) of the backend
** named by opts.backend; one already gone is success. Backends that
** cannot (modal) raise "unsupported".
** @function drop_snapshot */
static int l_drop_snapshot(lua_State *L) {
  luaL_checkstring(L, 1);
  return lash_sandbox_backend_call_arg(L, "drop_snapshot", "remove a snapshot");
}
/*** Whether the backend can run here: true, or false and the reason.
** @function probe */
static int l_probe(lua_State *L) { return lash_sandbox_backend_call(L, "probe", "probe"); }

/* ---- operations -------------------------------------------------------------- */

/*** Run a command. argv is a list of strings, or a string run with sh -c.
** @function sandbox:exec
** @tparam[opt] table opts timeout (seconds, default 60, rounded up, at least
**   1), max_output_bytes (per stream, default 1 MiB; the tail is kept), cwd,
**   env, stdin (string)
** @treturn table stdout, stderr, stdout_truncated, stderr_truncated,
**   exit_code, timed_out, applied_timeout */
static int m_exec(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_command(L, 1);
  return lash_sandbox_call(L, "exec", 2, lash_sandbox_exec_k);
}

/*** Start a long-lived process in the sandbox with its stdin, stdout and
** stderr as streams (an MCP server run jailed): the same jail as exec's,
** no deadline. argv is a list of strings, or a string run with sh -c.
** @function sandbox:spawn
** @tparam[opt] table opts cwd, env (as exec's)
** @return a lash.proc handle (read, write, close_stdin, wait, kill, close);
**   closing it ends the process, and so does destroying the sandbox */
static int m_spawn(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_need_slot(L, "spawn", "run a long-lived process with streams (sandbox:spawn, "
            "used for MCP servers inside a sandbox): not supported on this "
            "backend yet; use the local backend");
  lash_sandbox_opt_command(L, 0);
  return lash_sandbox_call(L, "spawn", 2, lash_sandbox_finish_k);
}

/* After connect's slot: the fd on top becomes a connection handle. */
static int connect_k(lua_State *L, int status, lua_KContext ctx) {
  int fd;
  (void)status;
  fd = (int)lua_tointeger(L, -1);
  lua_settop(L, (int)ctx);
  lash_ports_push_fd(L, fd);
  return 1;
}

/*** Connect to a TCP port inside the sandbox (what a published port relays
** to): a connection handle for lash.core.ports.
** @function sandbox:connect
** @tparam integer port */
static int m_connect(lua_State *L) {
  lua_Integer port;
  lash_sandbox_checkopen(L, 1);
  port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port >= 1 && port <= 65535, 2, "a TCP port is 1-65535");
  lash_sandbox_need_slot(L, "connect", "reach a port inside the sandbox from this host "
                         "(sandbox:connect, sandbox:publish): not supported on this backend");
  lua_settop(L, 2);
  return lash_sandbox_call(L, "connect", 1, connect_k);
}

/*** Where the ports the sandbox was created with (`publish`) are reachable
** from the internet, on a backend that tunnels them (Modal): a list sorted
** by port of `{port, url, host, tls_port[, tcp_host, tcp_port]}`. Waits
** (at most timeout seconds, default 50) for the sandbox to run.
** @function sandbox:tunnels
** @tparam[opt] number timeout */
static int m_tunnels(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checknumber(L, 2);
  lash_sandbox_need_slot(L, "tunnels", "tunnel ports to the internet (sandbox:tunnels): "
                         "this backend has none; publish a port on this host instead "
                         "(sandbox:publish, lash sandbox port)");
  lua_settop(L, 2);
  return lash_sandbox_call(L, "tunnels", 1, lash_sandbox_finish_k);
}

/*** @function sandbox:stat
** @treturn table kind ("file", "dir", "symlink", "other"), size, mode, mtime */
static int m_stat(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_path(L, 2);
  lua_settop(L, 2);
  return lash_sandbox_call(L, "stat", 1, lash_sandbox_finish_k);
}

/*** Read a whole file.
** @function sandbox:read_file
** @tparam string path
** @tparam[opt] table|integer opts max_bytes (default 5 MiB): a bigger file is
**   refused with a "sandbox" error of code "too_large" (fields size,
**   max_bytes, path)
** @treturn string */
static int m_read_file(lua_State *L) {
  lua_Integer max = LASH_SB_DEFAULT_MAX_READ;
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_path(L, 2);
  lua_settop(L, 3);
  if (lua_istable(L, 3)) {
    if (lua_getfield(L, 3, "max_bytes") != LUA_TNIL)
      max = lash_sandbox_opt_count(L, -1, "max_bytes");
  } else if (!lua_isnil(L, 3)) {
    max = lash_sandbox_opt_count(L, 3, "max_bytes");
  }
  lua_settop(L, 2);
  lua_pushinteger(L, max);
  return lash_sandbox_call(L, "read_file", 2, lash_sandbox_finish_k);
}

/*** Write a file (parents created).
** @function sandbox:write_file */
static int m_write_file(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_path(L, 2);
  luaL_checktype(L, 3, LUA_TSTRING);
  lua_settop(L, 3);
  return lash_sandbox_call(L, "write_file", 2, lash_sandbox_true_k);
}

/*** List a directory: entries {name, kind}, sorted by name (bytes).
** @function sandbox:list_dir */
static int m_list_dir(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_pushliteral(L, ".");
  }
  lash_sandbox_opt_path(L, 2);
  lua_settop(L, 2);
  return lash_sandbox_call(L, "list_dir", 1, lash_sandbox_list_k);
}

/*** The sandbox's tags (including the reserved lash_ ones).
** @function sandbox:read_tags */
static int m_read_tags(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_claim_need_tags(L);
  lua_settop(L, 1);
  return lash_sandbox_call(L, "read_tags", 0, lash_sandbox_finish_k);
}

/*** Snapshot the sandbox's files: returns an id that
** `lash.sandbox.create{from_snapshot = id}` starts a new sandbox from
** (Modal: an image id; local: a copy of the workspace). The sandbox itself
** is untouched.
** @function sandbox:snapshot */
static int m_snapshot(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_need_slot(L, "snapshot", "snapshot a sandbox");
  lua_settop(L, 1);
  return lash_sandbox_call(L, "snapshot", 0, lash_sandbox_finish_k);
}

/*** Running, or how it ended: {running, status, exit_code, expires_at}.
** @function sandbox:poll */
static int m_poll(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lua_settop(L, 1);
  return lash_sandbox_call(L, "poll", 0, lash_sandbox_finish_k);
}

/*** Destroy the sandbox now (idempotent), whatever the mode.
** @function sandbox:destroy
** @tparam[opt] table opts timeout: seconds to wait for confirmation (30) */
static int m_destroy(lua_State *L) {
  lua_Number t = LASH_SB_DEFAULT_DESTROY;
  lash_sandbox_checkopen(L, 1);
  if (lua_istable(L, 2) && lua_getfield(L, 2, "timeout") != LUA_TNIL) {
    t = luaL_checknumber(L, -1);
    if (!(t > 0) || isinf(t)) luaL_error(L, "destroy timeout must be positive");
  }
  lua_settop(L, 1);
  lua_pushnumber(L, t);
  return lash_sandbox_call(L, "destroy", 1, lash_sandbox_true_k);
}

/* ---- tags and close ---------------------------------------------------------- */

/*** Register a backend written in Lua.
** @function register_backend
** @tparam string name
** @tparam table t the slots of sandbox.h as functions (create, exec, stat,
**   read_file, write_file, list_dir, poll, destroy required; read_tags,
**   write_tags, cas_tags, list, gc, probe, snapshot, spawn, persist
**   optional), create_options and
**   config_options (lists of names), default_workdir (string). */
static int l_register_backend(lua_State *L) {
  return lash_sandbox_register_lua(L);
}

/*** The names of the registered backends, sorted.
** @function backends */
static int l_backends(lua_State *L) {
  return lash_sandbox_backend_names(L);
}

/*** Replace the user tags (the reserved lash_ tags are kept as they are;
** setting one is refused).
** @function sandbox:write_tags */
static int m_write_tags(lua_State *L) {
  return lash_sandbox_claim_write_tags(L);
}

/*** Claim the sandbox for holder, presenting owner: reads the tags, refuses
** (terminal "refused" errors) a missing or different owner or another
** holder, writes the holder mark and reads it back -- atomically where the
** backend can compare-and-set. Returns {owner, holder, remaining_lifetime,
** expires_at, network, network_stamp, workdir, atomic, tags}.
** @function sandbox:attach */
static int m_attach(lua_State *L) {
  return lash_sandbox_claim_attach(L);
}

/*** Clear holder's mark (and only it). Returns true if cleared, false when
** the sandbox was not held by holder. A sandbox that is gone raises
** "unavailable" (for a caller releasing at run end: nothing to release).
** @function sandbox:release */
static int m_release(lua_State *L) {
  return lash_sandbox_claim_release(L);
}

/*** Stop owning the sandbox: close() will leave it, and its own lifetime
** ends it. For a sandbox that must outlive this process (the CLI's
** create). Returns the id.
** @function sandbox:detach */
static int m_detach(lua_State *L) {
  return lash_sandbox_detach(L);
}

static int m_gc(lua_State *L) {
  return lash_sandbox_collect(L);
}

/*** Close the handle. An owned sandbox (and a session that created its
** own) is destroyed, waiting up to 30 s for confirmation; attached ones
** are left alone. Returns true, or nil and the error when the destroy
** failed (the sandbox's own lifetime then ends it). Idempotent.
** @function sandbox:close */
static int m_close(lua_State *L) {
  return lash_sandbox_close(L);
}

/* __close: like close, but a failed destroy only warns (raising here would
** replace the error that is unwinding the scope). */
static int m_tbc(lua_State *L) {
  return lash_sandbox_close_quiet(L);
}

static int m_tostring(lua_State *L) {
  lash_sandbox_obj *o = lash_sandbox_checkobj(L, 1);
  lash_sandbox_field(L, 1, "id");
  lash_sandbox_field(L, 1, "backend");
  lua_pushfstring(L, "lash.sandbox: %s (%s, %s%s)", lua_tostring(L, -2),
                  lua_tostring(L, -1), lash_sandbox_mode_names[o->mode],
                  o->closed ? ", closed" : "");
  return 1;
}

/* ---- files in and out -------------------------------------------------------
** Written in Lua over spawn and the host's files (lash.sandbox_files); these
** methods hand the call to it, so they may wait like any other. */

static int files_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  return lua_gettop(L) - (int)base;
}

static int module_call(lua_State *L, const char *module, const char *fn) {
  int n = lua_gettop(L);
  lash_sandbox_checkopen(L, 1);
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  lua_call(L, 1, 1);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_insert(L, 1);
  lua_callk(L, n, LUA_MULTRET, 0, files_k);
  return files_k(L, LUA_OK, 0);
}

/*** Copy a file or a directory (as a tar stream) out of the sandbox.
** @function sandbox:download
** @tparam string path in the sandbox
** @tparam string host_path where it goes (into it, if a directory)
** @tparam[opt] table opts progress = function(done_bytes, total_or_nil)
** @treturn table kind, bytes, files, dirs, links, skipped, path */
static int m_download(lua_State *L) { return module_call(L, "lash.sandbox_files", "download"); }
/*** Copy a host file or directory into the sandbox.
** @function sandbox:upload
** @tparam string host_path
** @tparam string path in the sandbox (into it, if a directory)
** @tparam[opt] table opts progress
** @treturn table kind, bytes, path */
static int m_upload(lua_State *L) { return module_call(L, "lash.sandbox_files", "upload"); }
/*** Publish a port of the sandbox on the host (lash.sandbox_ports).
** @function sandbox:publish
** @tparam integer port
** @tparam[opt] table opts host, host_port
** @treturn table port, host, host_port, address, close, stats */
static int m_publish(lua_State *L) { return module_call(L, "lash.sandbox_ports", "publish"); }

static const luaL_Reg methods[] = {
  {"download", m_download}, {"upload", m_upload}, {"publish", m_publish},
  {"connect", m_connect}, {"tunnels", m_tunnels},
  {"exec", m_exec}, {"stat", m_stat}, {"read_file", m_read_file},
  {"write_file", m_write_file}, {"list_dir", m_list_dir},
  {"read_tags", m_read_tags}, {"write_tags", m_write_tags},
  {"poll", m_poll}, {"destroy", m_destroy}, {"attach", m_attach},
  {"snapshot", m_snapshot}, {"spawn", m_spawn},
  {"release", m_release}, {"close", m_close}, {"detach", m_detach},
  {NULL, NULL}
};

static int m_index(lua_State *L) {
  lash_sandbox_obj *o = lash_sandbox_checkobj(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "id") == 0 || strcmp(k, "backend") == 0) {
    lash_sandbox_field(L, 1, k);
    return 1;
  }
  if (strcmp(k, "mode") == 0) {
    lua_pushstring(L, lash_sandbox_mode_names[o->mode]);
    return 1;
  }
  if (strcmp(k, "closed") == 0) {
    lua_pushboolean(L, o->closed);
    return 1;
  }
  if (strcmp(k, "can_attach") == 0) {
    lua_pushboolean(L, lash_sandbox_has_slot(L, 1, "read_tags"));
    return 1;
  }
  lua_getfield(L, lua_upvalueindex(1), k);
  return 1;
}

/* ---- module ------------------------------------------------------------------ */

/*** The lash_network stamp (compact, sorted-key JSON) of a network policy.
** @function lash_sandbox_network_encode */
static int l_encode_network(lua_State *L) {
  lua_settop(L, 1);
  lash_sandbox_network_normalize(L, 1);
  lash_sandbox_network_encode(L, -1);
  return 1;
}

/*** The policy in a lash_network stamp, or nil when it is not one.
** @function lash_sandbox_network_decode */
static int l_decode_network(lua_State *L) {
  lua_settop(L, 1);
  lash_sandbox_network_decode(L, 1);
  return 1;
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
  lash_sandbox_push_backend(L, name);
  fns = lua_gettop(L);
  lua_createtable(L, 0, 7);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "name");
  lash_sandbox_opt_push_list(L, fns, "create_options");
  lua_setfield(L, -2, "create_options");
  lash_sandbox_opt_push_list(L, fns, "config_options");
  lua_setfield(L, -2, "config_options");
  lua_newtable(L);
  for (i = 0; lash_sandbox_opt_generic[i]; i++) {
    lua_pushstring(L, lash_sandbox_opt_generic[i]);
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
  lash_sandbox_opt_push_defaults(L);
  lua_setfield(L, -2, "defaults");
  return 1;
}

static const luaL_Reg funcs[] = {
  {"create", l_create}, {"open", l_open}, {"session", l_session},
  {"register_backend", l_register_backend}, {"backends", l_backends},
  {"list", l_list}, {"gc", l_gc}, {"probe", l_probe},
  {"drop_snapshot", l_drop_snapshot},
  {"encode_network", l_encode_network}, {"decode_network", l_decode_network},
  {"describe", l_describe},
  {NULL, NULL}
};

/* The built-in backends (layer 5), each defined by its own directory. */
#define LASH_SANDBOX_BACKENDS(X) \
  X(local)                       \
  X(modal)

#define LASH_SB_DECLARE(name) \
  extern const lash_sandbox_backend lash_sandbox_backend_##name;
LASH_SANDBOX_BACKENDS(LASH_SB_DECLARE)
#undef LASH_SB_DECLARE

int lash_open_sandbox(lua_State *L) {
  lash_runtime_open(L);
  if (luaL_newmetatable(L, LASH_SB_MT)) {
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
  lash_sandbox_register_c(L, &lash_sandbox_backend_##name);
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
  lash_sandbox_opt_push_defaults(L);
  lua_setfield(L, -2, "defaults");
  /* exec takes on_output (an output queue): run_command streams */
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, "streams_output");
  return 1;
}
