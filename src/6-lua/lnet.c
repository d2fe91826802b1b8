/*
** lnet.c: lash.net, TCP listening sockets and their connections on the
** event loop, for the few servers lash itself runs (`lash mcp serve
** --http`). Only loopback-or-explicit binds, stream sockets, no TLS.
**
**   local l = lash.net.listen{ host = "127.0.0.1", port = 0 }
**   l:port()            the bound port
**   local c = l:accept()  waits for a connection
**   c:read()            the next chunk, nil at end of file
**   c:write(s)          waits until every byte is written
**   c:close(), l:close()  idempotent (also __gc / __close)
** Prefix: lash_open_net, the rest static (l_*).
*/
#include "runtime.h"
#include "laux.h"
#include "modules.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LISTENER_MT "lash.net.listener"
#define CONN_MT "lash.net.conn"
#define READ_CHUNK 65536

typedef struct sock {
  lash_loop *loop;
  int fd;
  lash_io io;
  lash_wait w;
  int busy;
  size_t off;               /* writer: bytes written so far */
} sock;

static void sock_teardown(sock *s) {
  if (s->fd >= 0) {
    if (s->loop) lash_io_stop(s->loop, &s->io);
    close(s->fd);
    s->fd = -1;
  }
  if (s->busy) lash_wait_done(&s->w);
}

static int sock_gc(lua_State *L) {
  sock *s = lua_touserdata(L, 1);
  sock_teardown(s);
  return 0;
}

static sock *check_sock(lua_State *L, const char *mt) {
  sock *s = luaL_checkudata(L, 1, mt);
  if (s->fd < 0) luaL_error(L, "lash.net: the socket is closed");
  return s;
}

static sock *new_sock(lua_State *L, int fd, const char *mt) {
  sock *s = lua_newuserdatauv(L, sizeof *s, 0);
  memset(s, 0, sizeof *s);
  s->fd = fd;
  s->loop = lash_runtime_loop(L);
  luaL_setmetatable(L, mt);
  return s;
}

static void on_io(lash_loop *loop, lash_io *io, unsigned events) {
  sock *s = io->data;
  (void)events;
  lash_io_stop(loop, io);
  lash_wait_done(&s->w);
}

static void sock_cancel(lash_wait *w) {
  sock *s = (sock *)((char *)w - offsetof(sock, w));
  if (s->fd >= 0) lash_io_stop(s->loop, &s->io);
  s->busy = 0;
}

static int arm(lua_State *L, sock *s, unsigned events, lua_KFunction k) {
  int rc;
  lash_wait_init(&s->w, sock_cancel);
  s->busy = 1;
  rc = lash_io_start(s->loop, &s->io, s->fd, events, on_io, s);
  if (rc != 0) {
    s->busy = 0;
    return luaL_error(L, "lash.net: cannot watch a socket: %s", strerror(-rc));
  }
  return lash_wait_yield(L, &s->w, (lua_KContext)s, k);
}

/* ---- listeners ------------------------------------------------------------ */

/*** Listen on {host = "127.0.0.1", port = 0 (any free one), backlog = 64}. */
static int l_listen(lua_State *L) {
  struct sockaddr_in sa;
  const char *host;
  static const char *const options[] = {"host", "port", "backlog", NULL};
  lua_Integer port, backlog;
  int fd, one = 1;
  luaL_checktype(L, 1, LUA_TTABLE);
  lashA_checkoptions(L, 1, "lash.net.listen", options);
  lua_getfield(L, 1, "host");
  host = luaL_optstring(L, -1, "127.0.0.1");
  lua_getfield(L, 1, "port");
  port = luaL_optinteger(L, -1, 0);
  luaL_argcheck(L, port >= 0 && port <= 65535, 1, "port must be 0-65535");
  lua_getfield(L, 1, "backlog");
  backlog = luaL_optinteger(L, -1, 64);
  luaL_argcheck(L, backlog >= 1 && backlog <= 65535, 1, "backlog must be 1-65535");
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
    return luaL_error(L, "lash.net.listen: host must be an IPv4 address such as 127.0.0.1, got '%s'", host);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return lash_error_raise(L, "io", "socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, (int)backlog) != 0) {
    int e = errno;
    close(fd);
    return lash_error_raise(L, "io", "cannot listen on %s:%d: %s%s", host, (int)port, strerror(e),
                            e == EADDRINUSE ? " (choose another port)" : "");
  }
  new_sock(L, fd, LISTENER_MT);
  return 1;
}

static int listener_port(lua_State *L) {
  sock *s = check_sock(L, LISTENER_MT);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (getsockname(s->fd, (struct sockaddr *)&sa, &len) != 0)
    return luaL_error(L, "lash.net: getsockname: %s", strerror(errno));
  lua_pushinteger(L, ntohs(sa.sin_port));
  return 1;
}

static int accept_k(lua_State *L, int status, lua_KContext ctx);

static int accept_now(lua_State *L, sock *s) {
  int fd, one = 1;
  if (s->fd < 0) {
    lua_pushnil(L);
    return 1;
  }
  do fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == EAGAIN || errno == ECONNABORTED) return arm(L, s, LASH_READ, accept_k);
    return lash_error_result(L, "io", "accept: %s", strerror(errno));
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  new_sock(L, fd, CONN_MT);
  return 1;
}

static int accept_k(lua_State *L, int status, lua_KContext ctx) {
  sock *s = (sock *)ctx;
  (void)status;
  s->busy = 0;
  lash_wait_check(L, &s->w);
  return accept_now(L, s);
}

/*** Wait for the next connection (nil once the listener is closed). */
static int listener_accept(lua_State *L) {
  sock *s = check_sock(L, LISTENER_MT);
  if (s->busy) return luaL_error(L, "lash.net: another task is already accepting");
  return accept_now(L, s);
}

/* ---- connections ---------------------------------------------------------- */

static int read_k(lua_State *L, int status, lua_KContext ctx);

static int read_now(lua_State *L, sock *s) {
  char buf[READ_CHUNK];
  ssize_t n;
  if (s->fd < 0) {
    lua_pushnil(L);
    return 1;
  }
  do n = recv(s->fd, buf, sizeof buf, 0); while (n < 0 && errno == EINTR);
  if (n > 0) {
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
  }
  if (n < 0 && errno == EAGAIN) return arm(L, s, LASH_READ, read_k);
  lua_pushnil(L);
  if (n < 0) {
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  return 1;
}

static int read_k(lua_State *L, int status, lua_KContext ctx) {
  sock *s = (sock *)ctx;
  (void)status;
  s->busy = 0;
  lash_wait_check(L, &s->w);
  return read_now(L, s);
}

/*** The next chunk, or nil at end of file (nil, message on an error). */
static int conn_read(lua_State *L) {
  sock *s = check_sock(L, CONN_MT);
  if (s->busy) return luaL_error(L, "lash.net: another task is already using this connection");
  return read_now(L, s);
}

static int write_k(lua_State *L, int status, lua_KContext ctx);

static int write_now(lua_State *L, sock *s) {
  size_t len;
  const char *data = lua_tolstring(L, 2, &len);
  while (s->off < len) {
    ssize_t n;
    if (s->fd < 0) return lash_error_result(L, "io", "the connection is closed");
    do n = send(s->fd, data + s->off, len - s->off, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno == EAGAIN) return arm(L, s, LASH_WRITE, write_k);
      return lash_error_result(L, "io", "writing to the connection: %s", strerror(errno));
    }
    s->off += (size_t)n;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int write_k(lua_State *L, int status, lua_KContext ctx) {
  sock *s = (sock *)ctx;
  (void)status;
  s->busy = 0;
  lash_wait_check(L, &s->w);
  return write_now(L, s);
}

/*** Write every byte of s. Returns true, or nil, message, "io". */
static int conn_write(lua_State *L) {
  sock *s = check_sock(L, CONN_MT);
  luaL_checkstring(L, 2);
  lua_settop(L, 2);
  if (s->busy) return luaL_error(L, "lash.net: another task is already using this connection");
  s->off = 0;
  return write_now(L, s);
}

static int sock_close(lua_State *L) {
  sock *s = luaL_testudata(L, 1, LISTENER_MT);
  if (!s) s = luaL_checkudata(L, 1, CONN_MT);
  int was_open = s->fd >= 0;
  sock_teardown(s);
  lua_pushboolean(L, was_open);
  return 1;
}

static void make_mt(lua_State *L, const char *name, const luaL_Reg *methods) {
  if (luaL_newmetatable(L, name)) {
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, sock_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, sock_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
}

int lash_open_net(lua_State *L) {
  static const luaL_Reg lmethods[] = {
    {"accept", listener_accept}, {"port", listener_port}, {"close", sock_close}, {NULL, NULL}};
  static const luaL_Reg cmethods[] = {
    {"read", conn_read}, {"write", conn_write}, {"close", sock_close}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"listen", l_listen}, {NULL, NULL}};
  make_mt(L, LISTENER_MT, lmethods);
  make_mt(L, CONN_MT, cmethods);
  luaL_newlib(L, funcs);
  return 1;
}
