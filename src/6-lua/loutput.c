/*
** loutput.c: the Lua binding of output.c, the table that becomes
** lash.output: the tail ring ("lash.ring" userdata), truncation with the
** harness's markers, the size format and UTF-8 repair. Prefix:
** lash_open_output, the rest static (l_*).
*/
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

#include "laux.h"
#include "modules.h"
#include "output.h"

#define RING_MT "lash.ring"

typedef struct {
  lash_ring r;
  int closed;
} lring;

/* A non-negative integer argument (floats with an integral value pass). */
static size_t check_size(lua_State *L, int arg) {
  lua_Integer n = luaL_checkinteger(L, arg);
  if (n < 0) luaL_argerror(L, arg, "must be a non-negative integer");
  return (size_t)n;
}

/* ---- the ring ------------------------------------------------------- */

/// A tail ring: keeps the last `max_bytes` bytes of a stream fed in
// chunks. Memory never exceeds `max_bytes`.
// @function ring
// @tparam integer max_bytes the cap (0 keeps nothing)
// @treturn lash.ring
static int l_ring(lua_State *L) {
  size_t max = check_size(L, 1);
  lring *u = lua_newuserdatauv(L, sizeof *u, 0);
  lash_ring_init(&u->r, max);
  u->closed = 0;
  luaL_setmetatable(L, RING_MT);
  return 1;
}

static lring *check_ring(lua_State *L) {
  lring *u = luaL_checkudata(L, 1, RING_MT);
  if (u->closed) luaL_error(L, "attempt to use a closed lash.ring");
  return u;
}

/// Append a chunk. Returns the ring, so feeds chain.
// @function ring:feed
// @tparam string chunk
static int l_ring_feed(lua_State *L) {
  lring *u = check_ring(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  if (lash_ring_feed(&u->r, s, n) != 0)
    return luaL_error(L, "not enough memory to grow the output ring to %I bytes",
                      (lua_Integer)u->r.max);
  lua_settop(L, 1);
  return 1;
}

/// What the ring kept: the last `max_bytes` bytes (after a cut, starting
// at a UTF-8 character boundary), and whether anything was dropped. The
// bytes are as fed; pass them through `utf8_repair` for text.
// @function ring:result
// @treturn string
// @treturn boolean dropped
static int l_ring_result(lua_State *L) {
  lring *u = check_ring(L);
  size_t n;
  const char *v = lash_ring_view(&u->r, &n);
  lua_pushlstring(L, v ? v : "", n);
  lua_pushboolean(L, lash_ring_dropped(&u->r));
  return 2;
}

/// Whether more than `max_bytes` bytes were fed.
// @function ring:dropped
static int l_ring_dropped(lua_State *L) {
  lring *u = check_ring(L);
  lua_pushboolean(L, lash_ring_dropped(&u->r));
  return 1;
}

/// The number of bytes fed so far.
// @function ring:total
static int l_ring_total(lua_State *L) {
  lring *u = check_ring(L);
  lua_pushinteger(L, (lua_Integer)lash_ring_total(&u->r));
  return 1;
}

/// Forget everything fed; the ring keeps its memory for the next stream.
// @function ring:reset
static int l_ring_reset(lua_State *L) {
  lring *u = check_ring(L);
  lash_ring_reset(&u->r);
  lua_settop(L, 1);
  return 1;
}

/// Free the buffer. Idempotent; any other method on a closed ring raises.
// @function ring:close
static int l_ring_close(lua_State *L) {
  lring *u = luaL_checkudata(L, 1, RING_MT);
  if (!u->closed) {
    lash_ring_free(&u->r);
    u->closed = 1;
  }
  return 0;
}

static int l_ring_tostring(lua_State *L) {
  lring *u = luaL_checkudata(L, 1, RING_MT);
  if (u->closed) lua_pushliteral(L, "lash.ring (closed)");
  else lua_pushfstring(L, "lash.ring (%I of %I bytes kept)", (lua_Integer)u->r.len,
                       (lua_Integer)u->r.max);
  return 1;
}

/* ---- truncation ----------------------------------------------------- */

static const char *const trunc_keys[] = {
  "max_lines", "max_bytes", "direction", "already_truncated", NULL};

/* The cap in field `name` of the options table at `arg`: a non-negative
** integer, or nil for none. Leaves the value on the stack. */
static size_t opt_cap(lua_State *L, int arg, const char *name) {
  lua_Integer n;
  int isint = 0;
  if (lua_getfield(L, arg, name) == LUA_TNIL) return LASH_NOLIMIT;
  n = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
  if (!isint || n < 0)
    luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a non-negative integer "
                  "or nil, got %s", name, luaL_tolstring(L, -1, NULL)));
  return (size_t)n;
}

/* Read the options table at `arg` into o. Unknown keys raise: a misspelt
** cap would otherwise silently mean "no cap". */
static void check_trunc_opts(lua_State *L, int arg, const char *who,
                             lash_trunc_opts *o) {
  o->max_lines = LASH_NOLIMIT;
  o->max_bytes = LASH_NOLIMIT;
  o->direction = LASH_TRUNC_TAIL;
  o->already_truncated = 0;
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  lashA_checkoptions(L, arg, who, trunc_keys);
  o->max_lines = opt_cap(L, arg, "max_lines");
  o->max_bytes = opt_cap(L, arg, "max_bytes");
  if (lua_getfield(L, arg, "direction") != LUA_TNIL) {
    const char *d = lua_tostring(L, -1);
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(d, "tail") == 0) o->direction = LASH_TRUNC_TAIL;
    else if (lua_type(L, -1) == LUA_TSTRING && strcmp(d, "head") == 0) o->direction = LASH_TRUNC_HEAD;
    else luaL_argerror(L, arg, "direction must be \"tail\" or \"head\"");
  }
  if (lua_getfield(L, arg, "already_truncated") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TBOOLEAN)
      luaL_argerror(L, arg, "already_truncated must be a boolean");
    o->already_truncated = lua_toboolean(L, -1);
  }
  lua_pop(L, 4);
}

static void push_shaped(lua_State *L, const char *text, const lash_trunc *t) {
  luaL_Buffer b;
  size_t n = lash_trunc_size(t);
  char *dst = luaL_buffinitsize(L, &b, n);
  luaL_pushresultsize(&b, lash_trunc_render(text, t, dst));
}

/* truncate and truncate_info: (text, opts) -> the cut of text. */
static const char *truncate_args(lua_State *L, const char *who, size_t *len,
                                 lash_trunc *t) {
  const char *text = luaL_checklstring(L, 1, len);
  lash_trunc_opts o;
  check_trunc_opts(L, 2, who, &o);
  lash_truncate(text, *len, &o, t);
  return text;
}

/// Shape text for the model: keep whole lines within `max_lines` and
// `max_bytes` from the end ("tail") or the start ("head"), with the
// harness's markers (see output.h for the exact rules and texts).
// @function truncate
// @tparam string text
// @tparam[opt] table opts `max_lines`, `max_bytes` (nil: no cap),
//   `direction` ("tail" default, or "head"), `already_truncated` (a ring
//   cut the stream: mark it even when the rest fits)
// @treturn string the shaped text
// @treturn boolean whether it carries a marker
static int l_truncate(lua_State *L) {
  size_t len;
  lash_trunc t;
  const char *text = truncate_args(L, "lash.output.truncate", &len, &t);
  if (!t.marked && t.body_off == 0 && t.body_len == len) lua_pushvalue(L, 1);
  else push_shaped(L, text, &t);
  lua_pushboolean(L, t.marked);
  return 2;
}

/// The same cut as `truncate`, described rather than rendered, for callers
// that write their own notes (read_file's "[Showing lines ...]").
// @function truncate_info
// @treturn table `{body=, lines=, by="lines"|"bytes"|nil,
//   first_line_exceeded=, marker=|nil, text=}`: body is the kept text
//   without marker, lines the number of lines kept, text the rendered result
static int l_truncate_info(lua_State *L) {
  size_t len;
  lash_trunc t;
  const char *text = truncate_args(L, "lash.output.truncate_info", &len, &t);
  lua_createtable(L, 0, 6);
  lua_pushlstring(L, text + t.body_off, t.body_len);
  lua_setfield(L, -2, "body");
  lua_pushinteger(L, (lua_Integer)t.lines);
  lua_setfield(L, -2, "lines");
  if (t.by != LASH_TRUNC_NONE) {
    lua_pushstring(L, t.by == LASH_TRUNC_LINES ? "lines" : "bytes");
    lua_setfield(L, -2, "by");
  }
  lua_pushboolean(L, t.first_line_exceeded);
  lua_setfield(L, -2, "first_line_exceeded");
  if (t.marked) {
    lua_pushlstring(L, t.marker, t.marker_len);
    lua_setfield(L, -2, "marker");
  }
  push_shaped(L, text, &t);
  lua_setfield(L, -2, "text");
  return 1;
}

/// Format a byte count as the markers do: "1023B", "50.0KB", "5.0MB".
// @function format_size
// @tparam integer n non-negative
static int l_format_size(lua_State *L) {
  char buf[32];
  size_t n = check_size(L, 1);
  lua_pushlstring(L, buf, lash_format_size(n, buf, sizeof buf));
  return 1;
}

/* ---- UTF-8 ---------------------------------------------------------- */

/// Replace each ill-formed UTF-8 sequence by U+FFFD (maximal-subpart rule,
// as Python's errors="replace"); valid text comes back as the same string.
// @function utf8_repair
// @tparam string s
// @treturn string
// @treturn boolean whether anything was replaced
static int l_utf8_repair(lua_State *L) {
  size_t len, good;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *dst;
  good = lash_utf8_valid_prefix(s, len);
  if (good == len) {
    lua_settop(L, 1);
    lua_pushboolean(L, 0);
    return 2;
  }
  dst = luaL_buffinitsize(L, &b, good + lash_utf8_repaired_size(s + good, len - good));
  memcpy(dst, s, good);
  luaL_pushresultsize(&b, good + lash_utf8_repair(s + good, len - good, dst + good));
  lua_pushboolean(L, 1);
  return 2;
}

/// Whether s is well-formed UTF-8; when not, also the 1-based position of
// the first byte that is not.
// @function is_utf8
// @treturn boolean
// @treturn[opt] integer
static int l_is_utf8(lua_State *L) {
  size_t len, good;
  const char *s = luaL_checklstring(L, 1, &len);
  good = lash_utf8_valid_prefix(s, len);
  lua_pushboolean(L, good == len);
  if (good == len) return 1;
  lua_pushinteger(L, (lua_Integer)good + 1);
  return 2;
}

/// Text from outside lash made safe for a terminal (lash_term_visible in
// output.h: caret notation for C0 controls but tab and newline, U+FFFD for
// C1 controls and ill-formed UTF-8); text with nothing to change comes back
// as the same string.
// @function visible
// @tparam string s
// @treturn string
static int l_visible(lua_State *L) {
  size_t len, n;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  size_t i;
  for (i = 0; i < len; i++) {          /* printable ASCII: nothing to do */
    unsigned char c = (unsigned char)s[i];
    if ((c < 0x20 && c != '\t' && c != '\n') || c >= 0x7F) break;
  }
  if (i == len) {
    lua_settop(L, 1);
    return 1;
  }
  n = lash_term_visible_size(s, len);
  luaL_pushresultsize(&b, lash_term_visible(s, len, luaL_buffinitsize(L, &b, n)));
  return 1;
}

int lash_open_output(lua_State *L) {
  static const luaL_Reg ring_methods[] = {
    {"feed", l_ring_feed}, {"result", l_ring_result}, {"dropped", l_ring_dropped},
    {"total", l_ring_total}, {"reset", l_ring_reset}, {"close", l_ring_close},
    {NULL, NULL}};
  static const luaL_Reg funcs[] = {
    {"ring", l_ring}, {"truncate", l_truncate}, {"truncate_info", l_truncate_info},
    {"format_size", l_format_size}, {"utf8_repair", l_utf8_repair},
    {"is_utf8", l_is_utf8}, {"visible", l_visible}, {NULL, NULL}};
  if (luaL_newmetatable(L, RING_MT)) {
    luaL_newlib(L, ring_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_ring_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_ring_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, l_ring_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
