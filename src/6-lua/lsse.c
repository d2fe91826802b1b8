/*
** lsse.c: the Lua binding of the SSE parser (sse.c; prefix
** lash_sse_parser_, see lsse.h): the constructor lash_sse_parser_new, which
** the HTTP binding exposes as lash.http.sse_parser, and the
** "lash.sse_parser" userdata.
*/
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

#include "laux.h"
#include "lsse.h"
#include "output.h"
#include "sse.h"

#define SSE_MT "lash.sse_parser"

typedef struct {
  lash_sse p;
  lua_State *L;      /* the state of the running feed, for the callback */
  int nevents;       /* events pushed by the running feed */
  int in_feed;       /* set while feeding: still set later means an error
                        escaped the callback and the parse was cut short */
  int closed;
} lsse;

/* Push bytes as text: the spec decodes the stream as UTF-8 with
** replacement, so ill-formed bytes become U+FFFD here. */
static void push_text(lua_State *L, const char *s, size_t n) {
  size_t good = lash_utf8_valid_prefix(s, n);
  luaL_Buffer b;
  char *dst;
  if (good == n) {
    lua_pushlstring(L, s, n);
    return;
  }
  dst = luaL_buffinitsize(L, &b, good + lash_utf8_repaired_size(s + good, n - good));
  memcpy(dst, s, good);
  luaL_pushresultsize(&b, good + lash_utf8_repair(s + good, n - good, dst + good));
}

/* Append {event=, data=, id=, retry=} to the array on top of the stack.
** A Lua error here (out of memory) longjmps out of lash_sse_feed; in_feed
** then stays set and the parser refuses further use. */
static int on_event(void *ud, const lash_sse_event *ev) {
  lsse *u = ud;
  lua_State *L = u->L;
  luaL_checkstack(L, 4, "sse event");
  lua_createtable(L, 0, 4);
  push_text(L, ev->type, ev->type_len);
  lua_setfield(L, -2, "event");
  push_text(L, ev->data, ev->data_len);
  lua_setfield(L, -2, "data");
  if (ev->id_len) {
    push_text(L, ev->id, ev->id_len);
    lua_setfield(L, -2, "id");
  }
  if (ev->retry >= 0) {
    lua_pushinteger(L, (lua_Integer)ev->retry);
    lua_setfield(L, -2, "retry");
  }
  lua_rawseti(L, -2, ++u->nevents);
  return 0;
}

static size_t opt_limit(lua_State *L, int arg, const char *name, size_t def) {
  lua_Integer n;
  int isint = 0;
  if (lua_getfield(L, arg, name) == LUA_TNIL) {
    lua_pop(L, 1);
    return def;
  }
  n = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
  if (!isint || n < 1)
    luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a positive integer (bytes), "
                  "got %s", name, luaL_tolstring(L, -1, NULL)));
  lua_pop(L, 1);
  return (size_t)n;
}

static void make_meta(lua_State *L);

static const char *const options[] = { "max_line", "max_event", NULL };

/// A new Server-Sent Events parser.
// @function sse_parser
// @tparam[opt] table opts `max_line` (bytes, default 8 MiB): the longest
//   line accepted; `max_event` (bytes, default 8 MiB): the most data one
//   event may carry. Past either, `feed` raises instead of buffering on.
// @treturn lash.sse_parser
int lash_sse_parser_new(lua_State *L) {
  size_t max_line = LASH_SSE_DEFAULT_MAX_LINE, max_event = LASH_SSE_DEFAULT_MAX_EVENT;
  lsse *u;
  if (lashA_checkoptions(L, 1, "lash.http.sse_parser", options) > 0) {
    max_line = opt_limit(L, 1, "max_line", max_line);
    max_event = opt_limit(L, 1, "max_event", max_event);
  }
  u = lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  lash_sse_init(&u->p, on_event, u);
  lash_sse_set_limits(&u->p, max_line, max_event);
  make_meta(L);
  lua_setmetatable(L, -2);
  return 1;
}

static lsse *check_parser(lua_State *L) {
  lsse *u = luaL_checkudata(L, 1, SSE_MT);
  if (u->closed) luaL_error(L, "attempt to use a closed lash.sse_parser");
  if (u->in_feed)
    luaL_error(L, "lash.sse_parser is unusable: an error interrupted an earlier "
               "feed, so its position in the stream is lost; make a new parser");
  return u;
}

/// Parse a chunk of the stream; returns the events it completed, in order,
// each `{event=, data=, id=, retry=}` (`event` defaults to "message"; `id`
// is the last event ID, absent while empty; `retry` only on an event that
// carried a valid retry field). Raises on a line or event over the limits.
// @function parser:feed
// @tparam string chunk
// @treturn {table,...}
static int l_feed(lua_State *L) {
  lsse *u = check_parser(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  int rc;
  lua_settop(L, 2);
  lua_newtable(L);
  u->L = L;
  u->nevents = 0;
  u->in_feed = 1;
  rc = lash_sse_feed(&u->p, s, n);
  u->in_feed = 0;
  u->L = NULL;
  if (rc == LASH_SSE_ELINE)
    return luaL_error(L, "event stream line over the %I-byte limit (set max_line in "
                      "sse_parser{} to allow more)", (lua_Integer)u->p.max_line);
  if (rc == LASH_SSE_EEVENT)
    return luaL_error(L, "event stream event data over the %I-byte limit (set "
                      "max_event in sse_parser{} to allow more)", (lua_Integer)u->p.max_event);
  if (rc != 0) return luaL_error(L, "event stream: %s", lash_sse_strerror(rc));
  return 1;
}

/// The reconnection time the stream asked for, in ms, or nil.
// @function parser:retry
static int l_retry(lua_State *L) {
  lsse *u = check_parser(L);
  if (lash_sse_retry(&u->p) < 0) lua_pushnil(L);
  else lua_pushinteger(L, (lua_Integer)lash_sse_retry(&u->p));
  return 1;
}

/// The last event ID ("" until the stream sets one), to send as
// Last-Event-ID when reconnecting.
// @function parser:last_event_id
static int l_last_event_id(lua_State *L) {
  lsse *u = check_parser(L);
  size_t n;
  const char *id = lash_sse_last_id(&u->p, &n);
  push_text(L, id, n);
  return 1;
}

/// Free the parser's buffers. Idempotent; other methods then raise.
// @function parser:close
static int l_close(lua_State *L) {
  lsse *u = luaL_checkudata(L, 1, SSE_MT);
  if (!u->closed) {
    lash_sse_free(&u->p);
    u->closed = 1;
  }
  return 0;
}

static int l_tostring(lua_State *L) {
  lsse *u = luaL_checkudata(L, 1, SSE_MT);
  lua_pushstring(L, u->closed ? "lash.sse_parser (closed)" : "lash.sse_parser");
  return 1;
}

/* Push the metatable, creating it on first use (the constructor is the
** only way in, and it may be registered by any binding). */
static void make_meta(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"feed", l_feed}, {"retry", l_retry}, {"last_event_id", l_last_event_id},
    {"close", l_close}, {NULL, NULL}};
  if (luaL_newmetatable(L, SSE_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
  }
}
