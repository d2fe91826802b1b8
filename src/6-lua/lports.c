/*
** lports.c: lash.core.ports, the host side of a published port: a
** listening socket on the host whose connections are joined (relay.h) to
** connections into a sandbox. The sandbox side comes from the backend
** (sandbox:connect(port)); this file only listens, accepts and relays.
**
**   local fw = ports.listen{ host = "127.0.0.1", port = 0 }
**   fw:port()               the bound port (a free one for port = 0)
**   local c = fw:accept()   waits for a connection: an fd handle
**   fw:relay(c, up)         joins c and up (fd handles, taken: closed with
**                           the relay); relays end when both sides did
**   fw:stats()              {connections =, open =, bytes =}
**   fw:close()              stops listening and ends every relay
**                           (also __gc and __close); idempotent
**   h:close()               an fd handle not given to relay
**
** lash_ports_push_fd gives other bindings (the sandbox's connect) the same
** fd handle. Prefix: lash_open_ports, lash_ports_; the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "laux.h"
#include "relay.h"
#include "runtime.h"
#include "modules.h"
#include "lports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FW_MT "lash.ports.forwarder"
#define FD_MT "lash.ports.fd"

typedef struct fwd {
  lash_loop *loop;
  int fd;                     /* the listener; -1 once closed */
  lash_io io;
  lash_wait w;
  int busy;                   /* a task waits in accept */
  lash_relay_set relays;
} fwd;

typedef struct fdbox { int fd; } fdbox;

/* ---- fd handles ------------------------------------------------------------- */

void lash_ports_push_fd(lua_State *L, int fd) {
  fdbox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->fd = fd;
  luaL_setmetatable(L, FD_MT);
}

static int fd_close(lua_State *L) {
  fdbox *b = luaL_checkudata(L, 1, FD_MT);
  if (b->fd >= 0) close(b->fd);
  b->fd = -1;
  return 0;
}

/* The fd of the handle at idx, taken from it (the handle is closed). */
static int take_fd(lua_State *L, int idx) {
  fdbox *b = luaL_checkudata(L, idx, FD_MT);
  int fd = b->fd;
  if (fd < 0) luaL_argerror(L, idx, "the connection is closed");
  b->fd = -1;
  return fd;
}

/* ---- the forwarder ------------------------------------------------------------ */

static fwd *check_fwd(lua_State *L) {
  fwd *f = luaL_checkudata(L, 1, FW_MT);
  if (f->fd < 0) luaL_error(L, "lash.ports: the forwarder is closed");
  return f;
}

static int fw_close(lua_State *L) {
  fwd *f = luaL_checkudata(L, 1, FW_MT);
  if (f->fd >= 0) {
    lash_io_stop(f->loop, &f->io);
    close(f->fd);
    f->fd = -1;
  }
  lash_relay_close_all(&f->relays, f->loop);
  if (f->busy) lash_wait_done(&f->w);
  return 0;
}

static int l_listen(lua_State *L) {
  static const char *const options[] = {"host", "port", NULL};
  struct sockaddr_in sa;
  const char *host;
  lua_Integer port;
  int fd, one = 1;
  fwd *f;
  luaL_checktype(L, 1, LUA_TTABLE);
  lashA_checkoptions(L, 1, "lash.ports.listen", options);
  lua_getfield(L, 1, "host");
  host = luaL_optstring(L, -1, "127.0.0.1");
  lua_getfield(L, 1, "port");
  port = luaL_optinteger(L, -1, 0);
  luaL_argcheck(L, port >= 0 && port <= 65535, 1, "port must be 0-65535 (0: any free one)");
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
    return luaL_error(L, "lash.ports.listen: host must be an IPv4 address such as 127.0.0.1, got '%s'", host);
  f = lua_newuserdatauv(L, sizeof *f, 0);
  memset(f, 0, sizeof *f);
  f->fd = -1;
  f->loop = lash_runtime_loop(L);
  lash_relay_set_init(&f->relays);
  luaL_setmetatable(L, FW_MT);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return lash_error_raise(L, "io", "socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    close(fd);
    return lash_error_raise(L, "io", "cannot listen on %s:%d: %s%s", host, (int)port, strerror(e),
                            e == EADDRINUSE ? " (choose another port, or 0 for any free one)" : "");
  }
  f->fd = fd;
  return 1;
}

static int fw_port(lua_State *L) {
  fwd *f = check_fwd(L);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (getsockname(f->fd, (struct sockaddr *)&sa, &len) != 0)
    return luaL_error(L, "lash.ports: getsockname: %s", strerror(errno));
  lua_pushinteger(L, ntohs(sa.sin_port));
  return 1;
}

static void on_accept(lash_loop *loop, lash_io *io, unsigned events) {
  fwd *f = io->data;
  (void)events;
  lash_io_stop(loop, io);
  lash_wait_done(&f->w);
}

static void accept_cancel(lash_wait *w) {
  fwd *f = (fwd *)((char *)w - offsetof(fwd, w));
  if (f->fd >= 0) lash_io_stop(f->loop, &f->io);
  f->busy = 0;
}

static int accept_k(lua_State *L, int status, lua_KContext ctx);

static int accept_now(lua_State *L, fwd *f) {
  int fd, rc;
  if (f->fd < 0) {   /* closed while waiting */
    lua_pushnil(L);
    return 1;
  }
  do fd = accept4(f->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); while (fd < 0 && errno == EINTR);
  if (fd >= 0) {
    lash_ports_push_fd(L, fd);
    return 1;
  }
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
    return lash_error_raise(L, "io", "accept: %s", strerror(errno));
  lash_wait_init(&f->w, accept_cancel);
  f->busy = 1;
  rc = lash_io_start(f->loop, &f->io, f->fd, LASH_READ, on_accept, f);
  if (rc != 0) {
    f->busy = 0;
    return luaL_error(L, "lash.ports: cannot watch the listener: %s", strerror(-rc));
  }
  return lash_wait_yield(L, &f->w, (lua_KContext)f, accept_k);
}

static int accept_k(lua_State *L, int status, lua_KContext ctx) {
  fwd *f = (fwd *)ctx;
  (void)status;
  f->busy = 0;
  lash_wait_check(L, &f->w);
  return accept_now(L, f);
}

static int fw_accept(lua_State *L) {
  fwd *f = check_fwd(L);
  if (f->busy) return luaL_error(L, "lash.ports: another task is accepting on this forwarder");
  lua_settop(L, 1);
  return accept_now(L, f);
}

static int fw_relay(lua_State *L) {
  fwd *f = check_fwd(L);
  int a, b, rc;
  luaL_checkudata(L, 2, FD_MT);
  luaL_checkudata(L, 3, FD_MT);
  a = take_fd(L, 2);
  b = take_fd(L, 3);
  rc = lash_relay_add(&f->relays, f->loop, a, b);
  if (rc != 0) return lash_error_raise(L, "io", "cannot relay the connection: %s", strerror(-rc));
  return 0;
}

static int fw_stats(lua_State *L) {
  fwd *f = luaL_checkudata(L, 1, FW_MT);
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)f->relays.started);
  lua_setfield(L, -2, "connections");
  lua_pushinteger(L, (lua_Integer)f->relays.n);
  lua_setfield(L, -2, "open");
  lua_pushinteger(L, (lua_Integer)f->relays.bytes);
  lua_setfield(L, -2, "bytes");
  return 1;
}

int lash_open_ports(lua_State *L) {
  static const luaL_Reg fw_methods[] = {
    {"port", fw_port}, {"accept", fw_accept}, {"relay", fw_relay}, {"stats", fw_stats},
    {"close", fw_close}, {NULL, NULL}};
  static const luaL_Reg fd_methods[] = {{"close", fd_close}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"listen", l_listen}, {NULL, NULL}};
  if (luaL_newmetatable(L, FW_MT)) {
    luaL_newlib(L, fw_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, fw_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, fw_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, FD_MT)) {
    luaL_newlib(L, fd_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, fd_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, fd_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
