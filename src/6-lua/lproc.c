/*
** lproc.c: lash.proc, the Lua face of process handles (proc.c): a
** long-lived child process with pipes to its stdin, stdout and
** (optionally) stderr, on the event loop. It exists for programs lash
** talks to while they run (an MCP server over stdio), where a one-shot
** exec with its output collected at the end does not fit.
**
**   local p = lash.proc.spawn{ argv = {"cat"}, env = {...}, cwd = "/",
**                              stdin = "pipe" | "inherit",
**                              stderr = "pipe" | "inherit" | "null" }
**   p:write(s)          waits until every byte is written
**   p:read([stream])    the next chunk of "stdout" (default) or "stderr",
**                       nil at end of file
**   p:close_stdin()     the child sees end of file
**   p:wait()            exit code, or nil and the signal number
**   p:kill([sig])       signals the child's process group (SIGTERM)
**   p:close()           closes the pipes; a child still running gets
**                       SIGKILL (with its group) and is reaped
**
** Prefix: lash_open_proc, the rest static (l_*).
*/
#include "runtime.h"
#include "laux.h"
#include "modules.h"
#include "proc.h"

#include <signal.h>
#include <string.h>

/* ---- spawning ------------------------------------------------------------ */

static char **string_list(lua_State *L, int idx, const char *what, int *n) {
  lua_Integer i, len = luaL_len(L, idx);
  char **v;
  if (len < 0 || len > 65536) luaL_error(L, "lash.proc.spawn: too many %s", what);
  v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(len + 1), 0);
  for (i = 1; i <= len; i++) {
    if (lua_geti(L, idx, i) != LUA_TSTRING)
      luaL_error(L, "lash.proc.spawn: %s[%d] must be a string, got %s", what,
                 (int)i, luaL_typename(L, -1));
    v[i - 1] = (char *)lua_tostring(L, -1);
    if (strlen(v[i - 1]) != lua_rawlen(L, -1))
      luaL_error(L, "lash.proc.spawn: %s[%d] contains a NUL byte", what, (int)i);
    lua_pop(L, 1);   /* the string stays anchored by the argv table */
  }
  v[len] = NULL;
  *n = (int)len;
  return v;
}

/* env = {K = V} becomes a NULL-terminated "K=V" array (anchored on the
** stack as a table of strings plus a userdata). */
static char **env_list(lua_State *L, int idx) {
  int n = 0, i = 0;
  char **v;
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "lash.proc.spawn: env must map names to strings");
    const char *k = lua_tostring(L, -2);
    if (!*k || strchr(k, '=') || strlen(k) != lua_rawlen(L, -2))
      luaL_error(L, "lash.proc.spawn: env name '%s' is not a valid variable name", k);
    lua_pushfstring(L, "%s=%s", k, lua_tostring(L, -1));
    if (strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
      luaL_error(L, "lash.proc.spawn: env value of '%s' contains a NUL byte", k);
    lua_rawseti(L, t, ++n);
    lua_pop(L, 1);
  }
  v = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, t, i + 1);
    v[i] = (char *)lua_tostring(L, -1);   /* anchored by table t */
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

/*** Start a process: {argv = {...}, env = {K = V} (default: lash's own
** environment), cwd =, stderr = "pipe" | "inherit" | "null"}. */
static int l_spawn(lua_State *L) {
  static const char *const modes[] = {"pipe", "inherit", "null", NULL};
  char **argv, **envp = NULL;
  const char *cwd = NULL;
  int argc, errmode, inmode;
  static const char *const options[] = {"argv", "env", "cwd", "stdin", "stderr",
                                         NULL};
  luaL_checktype(L, 1, LUA_TTABLE);
  lashA_checkoptions(L, 1, "lash.proc.spawn", options);
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE)
    return luaL_error(L, "lash.proc.spawn: 'argv' must be a list of strings");
  argv = string_list(L, lua_gettop(L), "argv", &argc);
  if (argc == 0 || !*argv[0])
    return luaL_error(L, "lash.proc.spawn: 'argv' needs at least the program");
  if (lua_getfield(L, 1, "env") == LUA_TTABLE) envp = env_list(L, lua_gettop(L));
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "lash.proc.spawn: 'env' must be a table of strings");
  if (lua_getfield(L, 1, "cwd") == LUA_TSTRING) cwd = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "lash.proc.spawn: 'cwd' must be a string");
  lua_getfield(L, 1, "stderr");
  errmode = luaL_checkoption(L, -1, "pipe", modes);
  lua_getfield(L, 1, "stdin");
  inmode = luaL_checkoption(L, -1, "pipe", modes);
  luaL_argcheck(L, inmode != 2, 1, "stdin must be \"pipe\" or \"inherit\"");

  lash_proc_spawn(L, lash_proc_push_empty(L), argv, envp, cwd, inmode, errmode);
  return 1;
}

/* ---- methods --------------------------------------------------------------- */

/*** The next chunk of output ("stdout" or "stderr"), nil at end of file. */
static int l_read(lua_State *L) {
  static const char *const names[] = {"stdout", "stderr", NULL};
  lash_proc *p = lash_proc_check(L, 1, 1);
  int s = luaL_checkoption(L, 2, "stdout", names);
  return lash_proc_read(L, p, s == 0 ? LASH_PROC_STDOUT : LASH_PROC_STDERR);
}

/*** Write every byte of s to the child's stdin (waits while the pipe is
** full). Returns true, or nil, message, "io". */
static int l_write(lua_State *L) {
  lash_proc *p = lash_proc_check(L, 1, 1);
  luaL_checkstring(L, 2);
  lua_settop(L, 2);
  return lash_proc_write(L, p);
}

static int l_close_stdin(lua_State *L) {
  lash_proc_close_stdin(lash_proc_check(L, 1, 1));
  return 0;
}

/*** Wait for the child to exit: its exit code, or nil and the signal. */
static int l_wait(lua_State *L) {
  return lash_proc_wait(L, lash_proc_check(L, 1, 0));
}

/*** Signal the child's process group (default SIGTERM); false once it
** has been reaped. */
static int l_kill(lua_State *L) {
  lash_proc *p = lash_proc_check(L, 1, 1);
  int sig = (int)luaL_optinteger(L, 2, SIGTERM);
  luaL_argcheck(L, sig > 0 && sig < 65, 2, "not a signal number");
  lua_pushboolean(L, lash_proc_kill(p, sig));
  return 1;
}

static int l_close(lua_State *L) {
  lua_pushboolean(L, lash_proc_close(lash_proc_check(L, 1, 0)));
  return 1;
}

static int l_pid(lua_State *L) {
  lua_pushinteger(L, lash_proc_pid(lash_proc_check(L, 1, 0)));
  return 1;
}

static int l_running(lua_State *L) {
  lua_pushboolean(L, lash_proc_running(lash_proc_check(L, 1, 0)));
  return 1;
}

int lash_open_proc(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"read", l_read}, {"write", l_write}, {"close_stdin", l_close_stdin},
    {"wait", l_wait}, {"kill", l_kill}, {"close", l_close},
    {"pid", l_pid}, {"running", l_running}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"spawn", l_spawn}, {NULL, NULL}};
  lash_proc_open(L);
  luaL_getmetatable(L, LASH_PROC_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
