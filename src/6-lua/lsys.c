/*
** lsys.c: lash.sys, the few facts about the process that the standard
** library cannot tell Lua (is a descriptor a terminal? what is the heap's
** budget?).
** Prefix: lash_open_sys, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "budget.h"
#include "modules.h"
#include "runtime.h"
#include "userdir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*** Is file descriptor `fd` (default 1, standard output) a terminal? */
static int l_isatty(lua_State *L) {
  lua_Integer fd = luaL_optinteger(L, 1, 1);
  luaL_argcheck(L, fd >= 0 && fd <= 1 << 20, 1, "not a file descriptor");
  lua_pushboolean(L, isatty((int)fd) == 1);
  return 1;
}

static int l_getpid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/*** The Lua heap's budget: used bytes and the limit (nil when unlimited or
** when the state was not opened by lash, e.g. a stock lua5.4). */
static int l_memory(lua_State *L) {
  size_t used, limit;
  if (!lash_budget_memory(L, &used, &limit)) {
    lua_pushinteger(L, (lua_Integer)(lua_gc(L, LUA_GCCOUNT, 0)) * 1024);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)used);
  if (limit) lua_pushinteger(L, (lua_Integer)limit);
  else lua_pushnil(L);
  return 2;
}

/*** n random bytes from the kernel (ids for saved sessions and trace spans). */
static int l_random(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 1 && n <= 256, 1, "1..256 bytes");
  unsigned char buf[256];
  size_t got = 0;
  while (got < (size_t)n) {
    ssize_t r = getrandom(buf + got, (size_t)n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return luaL_error(L, "getrandom: %s", strerror(errno));
    }
    got += (size_t)r;
  }
  lua_pushlstring(L, (const char *)buf, (size_t)n);
  return 1;
}

/*** The wall clock: whole seconds and nanoseconds since the Unix epoch
** (lash.now is monotonic, for durations; this is for timestamps). */
static int l_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec);
  lua_pushinteger(L, (lua_Integer)ts.tv_nsec);
  return 2;
}

/*** Is process pid alive (on this machine)? */
static int l_alive(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  luaL_argcheck(L, pid > 0 && pid <= 0x7fffffff, 1, "not a process id");
  lua_pushboolean(L, kill((pid_t)pid, 0) == 0 || errno == EPERM);
  return 1;
}

/*** mkdirs(path [, mode]) -> true | nil, message: make a directory and its
** missing parents (mode default 0700: lash's state is the user's own). */
static int l_mkdirs(lua_State *L) {
  size_t n;
  const char *path = luaL_checklstring(L, 1, &n);
  lua_Integer mode = luaL_optinteger(L, 2, 0700);
  int rc;
  luaL_argcheck(L, n > 0 && n < 4096, 1, "a path of 1..4095 bytes");
  rc = lash_mkdirs(path, (unsigned)mode);
  if (rc == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushnil(L);
  if (rc == -ENOTDIR) lua_pushfstring(L, "%s exists and is not a directory", path);
  else lua_pushfstring(L, "cannot create %s: %s", path, strerror(-rc));
  return 2;
}

/*** private(path, kind [, mode]) -> true | nil, message: make one of the
** user's own state files private. kind "file": opened without following a
** link (made 0600 when missing), kind "existing": the same when it exists,
** kind "dir": an existing directory. It must be the user's own (or root's
** when lash runs as root) and not a link; group and other bits beyond mode
** (default 0600 for files, 0700 for directories) are taken away through the
** descriptor, whatever the umask made of it. */
static int l_private(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  const char *kind = luaL_checkstring(L, 2);
  int dir = strcmp(kind, "dir") == 0;
  int create = strcmp(kind, "file") == 0;
  mode_t want = (mode_t)luaL_optinteger(L, 3, dir ? 0700 : 0600);
  struct stat st;
  int fd;
  luaL_argcheck(L, dir || create || strcmp(kind, "existing") == 0, 2,
                "\"file\", \"existing\" or \"dir\"");
  fd = dir ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
           : open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0600);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT && !create) { lua_pushboolean(L, 1); return 1; }
    lua_pushnil(L);
    if (e == ELOOP || (dir && e == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)))
      lua_pushfstring(L, "%s is a symbolic link, which lash does not follow in its own state "
                      "(someone may have planted it): remove it", path);
    else lua_pushfstring(L, "cannot open %s: %s", path, strerror(e));
    return 2;
  }
  if (fstat(fd, &st) != 0 || (!dir && !S_ISREG(st.st_mode))) {
    close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, "%s is not a regular file", path);
    return 2;
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, "%s belongs to uid %d, not to you (uid %d): lash keeps its state only in "
                    "files of your own; remove it or fix its owner", path, (int)st.st_uid, (int)geteuid());
    return 2;
  }
  if ((st.st_mode & 0777 & ~want) != 0 && fchmod(fd, st.st_mode & 0777 & want) != 0) {
    int e = errno;
    close(fd);
    lua_pushnil(L);
    lua_pushfstring(L, "cannot make %s private (chmod go-rwx): %s", path, strerror(e));
    return 2;
  }
  close(fd);
  lua_pushboolean(L, 1);
  return 1;
}

/*** read_owned(path, what) -> text | nil, message, errno: read a file that
** decides what lash trusts (what: "config file", "key file"), as ssh and git
** do: it must belong to the user or root and be writable by nobody else,
** checked on the descriptor it is read through. At most 1 MiB. */
static int l_read_owned(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  const char *what = luaL_checkstring(L, 2);
  struct stat st;
  luaL_Buffer b;
  char *p;
  ssize_t n;
  size_t got = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(e));
    lua_pushinteger(L, e);
    return 3;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    luaL_pushfail(L);
    lua_pushfstring(L, "the %s %s is not a regular file", what, path);
    return 2;
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    close(fd);
    luaL_pushfail(L);
    lua_pushfstring(L, "the %s %s belongs to uid %d, not to you (uid %d) or root: lash does not "
                    "trust a file another user controls; chown it to yourself or remove it",
                    what, path, (int)st.st_uid, (int)geteuid());
    return 2;
  }
  if (st.st_mode & 022) {
    close(fd);
    luaL_pushfail(L);
    lua_pushfstring(L, "the %s %s is writable by %s: lash does not trust a file others can change; "
                    "chmod go-w %s", what, path, (st.st_mode & 002) ? "everyone" : "its group", path);
    return 2;
  }
  luaL_buffinit(L, &b);
  for (;;) {
    p = luaL_prepbuffer(&b);
    n = read(fd, p, LUAL_BUFFERSIZE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    luaL_addsize(&b, (size_t)n);
    if ((got += (size_t)n) > (1u << 20)) break;
  }
  close(fd);
  if (n < 0 || got > (1u << 20)) {
    luaL_pushfail(L);
    lua_pushfstring(L, "the %s %s %s", what, path, n < 0 ? "could not be read" : "is over 1 MiB");
    return 2;
  }
  luaL_pushresult(&b);
  return 1;
}

/* lash_getenv_fn over the values user_dir looked up in Lua. */
typedef struct { const char *xdg, *home; } env_pair;
static const char *pair_getenv(void *ud, const char *name) {
  env_pair *e = ud;
  return strcmp(name, "HOME") == 0 ? e->home : e->xdg;
}

/*** user_dir(kind [, getenv]) -> path, from | nil, message: lash's own
** directory of kind ("config" or "state") by the XDG rules (userdir.h),
** reading the environment through getenv (default os.getenv); from names
** the variable that chose it. */
static int l_user_dir(lua_State *L) {
  static const char *const kinds[] = {"config", "state", NULL};
  int kind = luaL_checkoption(L, 1, NULL, kinds);
  const char *from;
  char out[4096];
  env_pair e;
  int rc;
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_getglobal(L, "os");
    lua_getfield(L, -1, "getenv");
    lua_replace(L, 2);
    lua_pop(L, 1);
  }
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushstring(L, kind == 0 ? "XDG_CONFIG_HOME" : "XDG_STATE_HOME");
  lua_call(L, 1, 1);                                   /* 3 */
  lua_pushvalue(L, 2);
  lua_pushliteral(L, "HOME");
  lua_call(L, 1, 1);                                   /* 4 */
  e.xdg = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : NULL;
  e.home = lua_type(L, 4) == LUA_TSTRING ? lua_tostring(L, 4) : NULL;
  rc = lash_user_dir(kind == 0 ? LASH_USER_CONFIG : LASH_USER_STATE, pair_getenv, &e,
                     out, sizeof out, &from);
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, rc == -ENOENT
                           ? "no directory for lash's %s files: set $%s or $HOME to an absolute path"
                           : "lash's %s directory: the path under $%s is too long",
                    kinds[kind], kind == 0 ? "XDG_CONFIG_HOME" : "XDG_STATE_HOME");
    return 2;
  }
  lua_pushstring(L, out);
  lua_pushstring(L, from);
  return 2;
}

int lash_open_sys(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"isatty", l_isatty}, {"getpid", l_getpid}, {"memory", l_memory},
    {"random", l_random}, {"time", l_time}, {"alive", l_alive},
    {"mkdirs", l_mkdirs}, {"private", l_private}, {"read_owned", l_read_owned}, {"user_dir", l_user_dir},
    {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
