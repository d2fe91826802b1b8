/*
** yaml_loader.c: the YAML loader (prefix lash_yaml_, yaml_loader.h):
** libyaml's event parser building Lua values under budgets, for text lash
** does not trust. Its Lua face is lyaml.c (lash.core.yaml.decode).
**
** - Nesting deeper than max_depth (default 100) is refused as soon as the
**   parser reaches it, so deep input costs no more than its size.
** - Every node counts toward max_nodes (default 1,000,000), and an alias
**   counts the whole size of the node it names, so an alias bomb is
**   refused at the alias that passes the bound rather than after it has
**   been walked. An alias yields the anchored value itself (shared).
** - Plain scalars resolve by YAML 1.2's core schema: null (~, null, empty),
**   booleans (true/false in three casings), integers (decimal, 0x, 0o),
**   floats (with .inf and .nan); quoted scalars are strings; the tags
**   !!str, !!int, !!float, !!bool, !!null, !!map, !!seq are honoured and any
**   other tag is refused. Null is `null` (default yaml.null, a light
**   userdata). Keys must be strings, numbers or booleans; duplicates are
**   refused. One document: a second is refused.
** - Allocations go through the Lua state's allocator, so a memory budget
**   (lash.core.budget) covers the values built; its memory error passes
**   through as one. Every other failure returns nil and a message with the
**   line and column.
*/
#include "yaml_loader.h"
#include "lauxlib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>    /* libyaml */

#define YAML_MT "lash.yaml.parser"

/* The parser lives in a userdata so that an error anywhere (a memory error
** from Lua, a refusal of ours) still frees it, through __gc. */
typedef struct ydec {
  yaml_parser_t parser;
  yaml_event_t event;
  int parser_ok, have_event;
  int depth, max_depth;
  long long nodes, max_nodes;
  int null_idx, anchors_idx, sizes_idx;   /* stack slots */
} ydec;

static void drop_event(ydec *y) {
  if (y->have_event) {
    yaml_event_delete(&y->event);
    y->have_event = 0;
  }
}

static int ydec_gc(lua_State *L) {
  ydec *y = luaL_checkudata(L, 1, YAML_MT);
  drop_event(y);
  if (y->parser_ok) {
    yaml_parser_delete(&y->parser);
    y->parser_ok = 0;
  }
  return 0;
}

static int fail_at(lua_State *L, const yaml_mark_t *m, const char *fmt, const char *a) {
  lua_pushfstring(L, "line %d, column %d: ", (int)m->line + 1, (int)m->column + 1);
  lua_pushfstring(L, fmt, a);
  lua_concat(L, 2);
  return lua_error(L);
}

static void next_event(lua_State *L, ydec *y) {
  drop_event(y);
  if (!yaml_parser_parse(&y->parser, &y->event)) {
    const char *problem = y->parser.problem ? y->parser.problem : "cannot parse";
    if (y->parser.error == YAML_MEMORY_ERROR) luaL_error(L, "libyaml ran out of memory");
    if (y->parser.context) {
      lua_pushfstring(L, "line %d, column %d: %s (%s)", (int)y->parser.problem_mark.line + 1,
                      (int)y->parser.problem_mark.column + 1, problem, y->parser.context);
    } else {
      lua_pushfstring(L, "line %d, column %d: %s", (int)y->parser.problem_mark.line + 1,
                      (int)y->parser.problem_mark.column + 1, problem);
    }
    lua_error(L);
  }
  y->have_event = 1;
}

static void count(lua_State *L, ydec *y, long long n) {
  y->nodes += n;
  if (y->nodes > y->max_nodes) {
    luaL_error(L, "line %d: the document has more than %I nodes (aliases count the nodes they "
               "repeat); is it an alias bomb?", (int)y->event.start_mark.line + 1,
               (lua_Integer)y->max_nodes);
  }
}

static int is_digits(const char *s, const char *set) {
  if (!*s) return 0;
  for (; *s; s++) if (!strchr(set, *s)) return 0;
  return 1;
}

/* Push an integer or float for text s, or return 0 when s is neither. */
static int push_number(lua_State *L, const char *s, int want_float) {
  const char *p = s;
  char *end;
  if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF") || !strcmp(s, "+.inf") ||
      !strcmp(s, "+.Inf") || !strcmp(s, "+.INF")) {
    lua_pushnumber(L, HUGE_VAL);
    return 1;
  }
  if (!strcmp(s, "-.inf") || !strcmp(s, "-.Inf") || !strcmp(s, "-.INF")) {
    lua_pushnumber(L, -HUGE_VAL);
    return 1;
  }
  if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
    lua_pushnumber(L, NAN);
    return 1;
  }
  if (!want_float && (!strncmp(s, "0x", 2) || !strncmp(s, "0o", 2))) {
    int base = s[1] == 'x' ? 16 : 8;
    unsigned long long v;
    if (!is_digits(s + 2, base == 16 ? "0123456789abcdefABCDEF" : "01234567")) return 0;
    errno = 0;
    v = strtoull(s + 2, &end, base);
    if (errno || v > (unsigned long long)LUA_MAXINTEGER) lua_pushnumber(L, (lua_Number)v);
    else lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (*p == '-' || *p == '+') p++;
  if (!want_float && is_digits(p, "0123456789")) {
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno == ERANGE) lua_pushnumber(L, strtod(s, NULL));
    else lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
  {
    const char *q = p;
    int digits = 0;
    while (*q >= '0' && *q <= '9') q++, digits++;
    if (*q == '.') {
      q++;
      while (*q >= '0' && *q <= '9') q++, digits++;
    }
    if (!digits) return 0;
    if (*q == 'e' || *q == 'E') {
      q++;
      if (*q == '-' || *q == '+') q++;
      if (!(*q >= '0' && *q <= '9')) return 0;
      while (*q >= '0' && *q <= '9') q++;
    }
    if (*q) return 0;
  }
  lua_pushnumber(L, strtod(s, NULL));
  return 1;
}

static int is_null(const char *s) {
  return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int bool_of(const char *s) {
  if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return 1;
  if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return 0;
  return -1;
}

#define TAG(x) "tag:yaml.org,2002:" x

static void push_scalar(lua_State *L, ydec *y) {
  const char *s = (const char *)y->event.data.scalar.value;
  size_t len = y->event.data.scalar.length;
  const char *tag = (const char *)y->event.data.scalar.tag;
  int plain = y->event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
  int b;
  if (tag && !strcmp(tag, "!")) tag = NULL, plain = 0;   /* "!" forces a string */
  if (!tag) {
    if (!plain || memchr(s, 0, len)) {
      lua_pushlstring(L, s, len);
    } else if (is_null(s)) {
      lua_pushvalue(L, y->null_idx);
    } else if ((b = bool_of(s)) >= 0) {
      lua_pushboolean(L, b);
    } else if (!push_number(L, s, 0)) {
      lua_pushlstring(L, s, len);
    }
    return;
  }
  if (!strcmp(tag, TAG("str"))) {
    lua_pushlstring(L, s, len);
  } else if (!strcmp(tag, TAG("null"))) {
    if (!is_null(s)) fail_at(L, &y->event.start_mark, "'%s' is tagged !!null but is not null", s);
    lua_pushvalue(L, y->null_idx);
  } else if (!strcmp(tag, TAG("bool"))) {
    if ((b = bool_of(s)) < 0) fail_at(L, &y->event.start_mark, "'%s' is tagged !!bool but is not true or false", s);
    lua_pushboolean(L, b);
  } else if (!strcmp(tag, TAG("int"))) {
    if (!push_number(L, s, 0) || !lua_isinteger(L, -1)) fail_at(L, &y->event.start_mark, "'%s' is tagged !!int but is not an integer", s);
  } else if (!strcmp(tag, TAG("float"))) {
    if (!push_number(L, s, 1) && !push_number(L, s, 0)) fail_at(L, &y->event.start_mark, "'%s' is tagged !!float but is not a number", s);
    lua_pushnumber(L, lua_tonumber(L, -1));
    lua_remove(L, -2);
  } else {
    fail_at(L, &y->event.start_mark, "unsupported tag '%s' (only the core schema's !!str, !!int, "
            "!!float, !!bool, !!null, !!map, !!seq)", tag);
  }
}

static void check_collection_tag(lua_State *L, ydec *y, const char *tag, const char *want) {
  if (tag && strcmp(tag, want) && strcmp(tag, "!"))
    fail_at(L, &y->event.start_mark, "unsupported tag '%s' on a collection", tag);
}

static void parse_node(lua_State *L, ydec *y);

/* Remember the value on top under its anchor, with its size in nodes. */
static void set_anchor(lua_State *L, ydec *y, const char *anchor, long long size) {
  lua_pushvalue(L, -1);
  lua_setfield(L, y->anchors_idx, anchor);
  lua_pushinteger(L, (lua_Integer)size);
  lua_setfield(L, y->sizes_idx, anchor);
}

static void parse_mapping(lua_State *L, ydec *y) {
  lua_newtable(L);
  for (;;) {
    yaml_mark_t at;
    next_event(L, y);
    if (y->event.type == YAML_MAPPING_END_EVENT) return;
    at = y->event.start_mark;
    parse_node(L, y);                           /* key */
    switch (lua_type(L, -1)) {
      case LUA_TSTRING: case LUA_TNUMBER: case LUA_TBOOLEAN: break;
      default:
        if (lua_rawequal(L, -1, y->null_idx)) fail_at(L, &at, "a mapping key is null%s", "");
        if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) != lua_tonumber(L, -1))
          fail_at(L, &at, "a mapping key is NaN%s", "");
        fail_at(L, &at, "a mapping key is a %s; keys must be strings, numbers or booleans",
                luaL_typename(L, -1));
    }
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) != lua_tonumber(L, -1))
      fail_at(L, &at, "a mapping key is NaN%s", "");
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) != LUA_TNIL)
      fail_at(L, &at, "duplicate key '%s' in a mapping", luaL_tolstring(L, -2, NULL));
    lua_pop(L, 1);
    next_event(L, y);
    parse_node(L, y);                           /* value */
    lua_rawset(L, -3);
  }
}

static void parse_sequence(lua_State *L, ydec *y) {
  lua_Integer i = 0;
  lua_newtable(L);
  for (;;) {
    next_event(L, y);
    if (y->event.type == YAML_SEQUENCE_END_EVENT) return;
    parse_node(L, y);
    lua_rawseti(L, -2, ++i);
  }
}

/* Push the value of the node whose first event is y->event. */
static void parse_node(lua_State *L, ydec *y) {
  long long before = y->nodes;
  char *anchor = NULL;
  luaL_checkstack(L, 8, "YAML nesting");
  switch (y->event.type) {
    case YAML_ALIAS_EVENT: {
      const char *name = (const char *)y->event.data.alias.anchor;
      if (lua_getfield(L, y->sizes_idx, name) == LUA_TNIL)
        fail_at(L, &y->event.start_mark, "alias '*%s' names no anchor defined before it", name);
      count(L, y, (long long)lua_tointeger(L, -1));
      lua_pop(L, 1);
      lua_getfield(L, y->anchors_idx, name);
      return;
    }
    case YAML_SCALAR_EVENT:
      count(L, y, 1);
      push_scalar(L, y);
      if (y->event.data.scalar.anchor) set_anchor(L, y, (const char *)y->event.data.scalar.anchor, 1);
      return;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
      int seq = y->event.type == YAML_SEQUENCE_START_EVENT;
      const char *a = (const char *)(seq ? y->event.data.sequence_start.anchor
                                         : y->event.data.mapping_start.anchor);
      check_collection_tag(L, y, (const char *)(seq ? y->event.data.sequence_start.tag
                                                    : y->event.data.mapping_start.tag),
                           seq ? TAG("seq") : TAG("map"));
      if (++y->depth > y->max_depth) {
        luaL_error(L, "line %d: the document nests deeper than %d levels",
                   (int)y->event.start_mark.line + 1, y->max_depth);
      }
      count(L, y, 1);
      if (a) {
        /* the event is replaced while we parse the children */
        lua_pushstring(L, a);
        anchor = (char *)lua_tostring(L, -1);
      }
      if (seq) parse_sequence(L, y);
      else parse_mapping(L, y);
      y->depth--;
      if (anchor) {
        set_anchor(L, y, anchor, y->nodes - before);
        lua_remove(L, -2);
      }
      return;
    }
    default:
      fail_at(L, &y->event.start_mark, "unexpected YAML event%s", "");
  }
}

/* decode_inner(ud, text): the work, under pcall. */
static int decode_inner(lua_State *L) {
  ydec *y = lua_touserdata(L, 1);
  size_t len;
  const char *text = lua_tolstring(L, 2, &len);
  lua_settop(L, 3);                  /* 3: null */
  y->null_idx = 3;
  lua_newtable(L);
  y->anchors_idx = 4;
  lua_newtable(L);
  y->sizes_idx = 5;
  yaml_parser_set_input_string(&y->parser, (const unsigned char *)text, len);
  next_event(L, y);                  /* stream start */
  next_event(L, y);
  if (y->event.type == YAML_STREAM_END_EVENT) {
    lua_pushvalue(L, y->null_idx);   /* an empty document */
    return 1;
  }
  next_event(L, y);                  /* past document start */
  parse_node(L, y);
  next_event(L, y);                  /* document end */
  next_event(L, y);
  if (y->event.type != YAML_STREAM_END_EVENT)
    fail_at(L, &y->event.start_mark, "a second document starts here; a spec is one document%s", "");
  return 1;
}

/* The parser's metatable (its __gc frees libyaml's state), once per state. */
static void parser_meta(lua_State *L) {
  if (luaL_newmetatable(L, YAML_MT)) {
    lua_pushcfunction(L, ydec_gc);
    lua_setfield(L, -2, "__gc");
  }
}

void lash_yaml_open(lua_State *L) {
  parser_meta(L);
  lua_pop(L, 1);
}

int lash_yaml_decode(lua_State *L, int text_idx, int null_idx, int max_depth,
                     long long max_nodes) {
  ydec *y;
  int st;
  text_idx = lua_absindex(L, text_idx);
  null_idx = lua_absindex(L, null_idx);
  y = lua_newuserdatauv(L, sizeof *y, 0);
  memset(y, 0, sizeof *y);
  parser_meta(L);     /* made by lash_yaml_open already, unless nobody did */
  lua_setmetatable(L, -2);
  if (!yaml_parser_initialize(&y->parser))
    return luaL_error(L, "yaml.decode: cannot initialise libyaml");
  y->parser_ok = 1;
  y->max_depth = max_depth;
  y->max_nodes = max_nodes;
  /* inner(ud, text, null) */
  lua_pushcfunction(L, decode_inner);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, text_idx);
  lua_pushvalue(L, null_idx);
  st = lua_pcall(L, 3, 1, 0);
  drop_event(y);
  yaml_parser_delete(&y->parser);
  y->parser_ok = 0;
  lua_remove(L, -2);                 /* the parser */
  if (st == LUA_OK) return 1;
  if (st == LUA_ERRMEM) return lua_error(L);
  lua_pushnil(L);
  lua_insert(L, -2);
  return 2;
}
