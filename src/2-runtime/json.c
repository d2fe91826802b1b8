/*
** json.c: lash's JSON codec over Lua values (see json.h). The encoder
** writes into one growable buffer per state (kept in the registry, reused
** across calls) with raw table access only, so no metamethod runs in the
** middle; canonical mode sorts object keys bytewise and reuses the text
** of frozen tables (a weak-keyed memo, json.h). The decoder is a recursive
** descent over the text with a depth limit; arrays get the array
** metatable, so an empty one survives a round trip.
**
** Rules (the ones lash's request bodies have always followed, so prompt
** caches keep hitting): a table is an array when it has the array
** metatable or a non-zero length, and every key is one of 1..#t; anything
** else is an object (number keys written as their string form); `/` is
** not escaped; control characters and DEL are written \uXXXX except
** \b \f \n \r \t; integers are written exactly, floats with 14
** significant digits; NaN and infinities are refused.
** Prefix lash_json_ (json.h); the Lua face is ljson.c.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

#include "json.h"

#define BUF_MT   "lash.json.buffer"
#define GROW_MT  "lash.json.grown"
/* registry keys, by address (lua-cjson's habit): nothing outside this
** file can name them */
static const char BUF_KEY = 0;    /* the state's spare output buffer */
/* frozen table -> its canonical text, or true until first encoded; grow-
** only list -> a grown (its first n elements' text, joined by ','); weak
** keys */
static const char MEMO_KEY = 0;

/* ---- the output buffer ---------------------------------------------------- */

typedef struct jbuf {
  char *p;
  size_t n, cap;
} jbuf;

static int buf_gc(lua_State *L) {
  jbuf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
  return 0;
}

/* Push a zeroed userdata of size sz with the metatable named mt (made on
** first use, its __gc gc): the buffers this file keeps in C memory. */
static void *new_holder(lua_State *L, size_t sz, const char *mt,
                        lua_CFunction gc) {
  void *p = lua_newuserdatauv(L, sz, 0);
  memset(p, 0, sz);
  if (luaL_newmetatable(L, mt)) {
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return p;
}

/* The text a grow-only list's elements had when last encoded: in C
** memory, so that a long history's text is neither a new Lua string each
** step nor work for the collector. */
typedef struct grown {
  jbuf text;
  lua_Integer count;   /* the elements it holds */
} grown;

static int grown_gc(lua_State *L) {
  grown *g = luaL_checkudata(L, 1, GROW_MT);
  free(g->text.p);
  g->text.p = NULL;
  g->text.n = g->text.cap = 0;
  g->count = 0;
  return 0;
}

/* The state's buffer, pushed and taken out of the registry while in use:
** a finalizer that runs mid-encode and encodes too gets a buffer of its
** own, and an error just leaves this one to the collector. */
static jbuf *push_buf(lua_State *L) {
  jbuf *b;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &BUF_KEY) == LUA_TUSERDATA) {
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &BUF_KEY);
    return lua_touserdata(L, -1);
  }
  lua_pop(L, 1);
  b = new_holder(L, sizeof *b, BUF_MT, buf_gc);
  return b;
}

typedef struct enc {
  lua_State *L;
  jbuf *b;
  int mode;
  int memo;   /* stack index of the memo table, 0 in hash-order mode */
  int amt;    /* stack index of the array metatable */
} enc;

static void grow(enc *e, size_t need) {
  jbuf *b = e->b;
  size_t cap = b->cap ? b->cap : 4096;
  char *p;
  while (cap - b->n < need) {
    if (cap > ((size_t)-1) / 2) luaL_error(e->L, "cannot encode: the text is too large");
    cap *= 2;
  }
  p = realloc(b->p, cap);
  if (!p) luaL_error(e->L, "not enough memory to encode JSON (%I bytes)", (lua_Integer)cap);
  b->p = p;
  b->cap = cap;
}

static inline void reserve(enc *e, size_t n) {
  if (e->b->cap - e->b->n < n) grow(e, n);
}

static inline void put(enc *e, const char *s, size_t n) {
  reserve(e, n);
  memcpy(e->b->p + e->b->n, s, n);
  e->b->n += n;
}

static inline void putch(enc *e, char c) {
  reserve(e, 1);
  e->b->p[e->b->n++] = c;
}

/* 0: copy as is; otherwise the letter after the backslash ('u': \u00XX). */
static const char escape_of[256] = {
  ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't',
  [0] = 'u', [1] = 'u', [2] = 'u', [3] = 'u', [4] = 'u', [5] = 'u', [6] = 'u',
  [7] = 'u', [11] = 'u', [14] = 'u', [15] = 'u', [16] = 'u', [17] = 'u',
  [18] = 'u', [19] = 'u', [20] = 'u', [21] = 'u', [22] = 'u', [23] = 'u',
  [24] = 'u', [25] = 'u', [26] = 'u', [27] = 'u', [28] = 'u', [29] = 'u',
  [30] = 'u', [31] = 'u', ['"'] = '"', ['\\'] = '\\', [127] = 'u',
};

static void put_string(enc *e, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t i = 0, run = 0;
  reserve(e, len + 2);
  putch(e, '"');
  while (i < len) {
    unsigned char c = (unsigned char)s[i];
    char x = escape_of[c];
    if (!x) {
      i++;
      continue;
    }
    put(e, s + run, i - run);
    if (x == 'u') {
      char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      put(e, u, 6);
    } else {
      char u[2] = {'\\', x};
      put(e, u, 2);
    }
    run = ++i;
  }
  put(e, s + run, len - run);
  putch(e, '"');
}

/* A float in 14 significant digits, whatever LC_NUMERIC says. */
static size_t fmt_float(lua_State *L, char *out, size_t size, lua_Number x) {
  int n, i;
  if (isnan(x) || isinf(x))
    luaL_error(L, "cannot encode NaN or infinity as JSON");
  n = snprintf(out, size, "%.14g", (double)x);
  for (i = 0; i < n; i++)
    if (out[i] == ',') out[i] = '.';
  return (size_t)n;
}

static size_t fmt_number(lua_State *L, int idx, char *out, size_t size) {
  if (lua_isinteger(L, idx))
    return (size_t)snprintf(out, size, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
  return fmt_float(L, out, size, lua_tonumber(L, idx));
}

static void encode_value(enc *e, int idx, int depth);

typedef struct kent {
  const char *s;    /* a string key's bytes (NULL for a number key) */
  size_t len;
  int num;          /* 0: string key; 1: integer ik; 2: float fk */
  lua_Integer ik;
  lua_Number fk;
  char buf[40];     /* a number key's text */
} kent;

#define KEY_TEXT(k) ((k)->num ? (k)->buf : (k)->s)

static int kent_cmp(const void *a, const void *b) {
  const kent *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(KEY_TEXT(x), KEY_TEXT(y), n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* The key at -2 (during lua_next) into k. */
static void key_text(enc *e, kent *k) {
  lua_State *L = e->L;
  int t = lua_type(L, -2);
  if (t == LUA_TSTRING) {
    k->s = lua_tolstring(L, -2, &k->len);
    k->num = 0;
  } else if (t == LUA_TNUMBER) {
    k->len = fmt_number(L, -2, k->buf, sizeof k->buf);
    k->s = NULL;
    if (lua_isinteger(L, -2)) {
      k->num = 1;
      k->ik = lua_tointeger(L, -2);
    } else {
      k->num = 2;
      k->fk = lua_tonumber(L, -2);
    }
  } else {
    luaL_error(L, "cannot encode a table key of type %s", lua_typename(L, t));
  }
}

static void encode_object_sorted(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  kent small[16], *keys = small;
  size_t n = 0, cap = 16, i;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (n == cap) {
      /* the key array lives in a userdata below key and value, so an
      ** error anywhere later leaks nothing */
      kent *nk = lua_newuserdatauv(L, 2 * cap * sizeof *nk, 0);
      memcpy(nk, keys, n * sizeof *nk);
      lua_insert(L, -3);
      if (keys != small) lua_remove(L, -4);
      keys = nk;
      cap *= 2;
    }
    key_text(e, &keys[n]);
    n++;
    lua_pop(L, 1);
  }
  qsort(keys, n, sizeof *keys, kent_cmp);
  putch(e, '{');
  for (i = 0; i < n; i++) {
    kent *k = &keys[i];
    if (i) putch(e, ',');
    put_string(e, KEY_TEXT(k), k->len);
    putch(e, ':');
    if (k->num == 1) lua_pushinteger(L, k->ik);
    else if (k->num == 2) lua_pushnumber(L, k->fk);
    else lua_pushlstring(L, k->s, k->len);
    lua_rawget(L, idx);
    encode_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
  }
  putch(e, '}');
  if (keys != small) lua_pop(L, 1);
}

static void encode_object_hashed(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  int first = 1;
  putch(e, '{');
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    kent k;
    if (!first) putch(e, ',');
    first = 0;
    key_text(e, &k);
    put_string(e, KEY_TEXT(&k), k.len);
    putch(e, ':');
    encode_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
  }
  putch(e, '}');
}

/* A list promised to grow only at its end (lash_json_grow_only), its
** last element excepted (which may be replaced), its state in g: the text
** of the elements before the last, as last encoded, is copied; only the
** ones after it are encoded. So a request body holding a long history
** costs a copy per step instead of a walk of every message, and the bytes
** are those of encoding it whole. */
static void encode_growing(enc *e, int idx, int depth, grown *g) {
  lua_State *L = e->L;
  lua_Integer i, len = (lua_Integer)lua_rawlen(L, idx);
  size_t start, last_at = 0;
  if (g->count >= len) g->count = g->text.n = 0;   /* it shrank: whole again */
  putch(e, '[');
  start = e->b->n;
  put(e, g->text.p, g->text.n);
  for (i = g->count + 1; i <= len; i++) {
    if (i > 1) putch(e, ',');
    if (i == len) last_at = e->b->n;
    lua_rawgeti(L, idx, i);
    encode_value(e, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
  }
  if (len > 1 && len - 1 > g->count) {
    /* keep all but the last (and the comma before it) */
    size_t keep = last_at - 1 - start, add = keep - g->text.n;
    if (g->text.cap - g->text.n < add) {
      size_t cap = g->text.cap ? g->text.cap : 4096;
      char *p;
      while (cap - g->text.n < add) {
        if (cap > ((size_t)-1) / 2) luaL_error(L, "cannot encode: the text is too large");
        cap *= 2;
      }
      p = realloc(g->text.p, cap);
      if (!p) luaL_error(L, "not enough memory to encode JSON (%I bytes)", (lua_Integer)cap);
      g->text.p = p;
      g->text.cap = cap;
    }
    memcpy(g->text.p + g->text.n, e->b->p + start + g->text.n, add);
    g->text.n = keep;
    g->count = len - 1;
  }
  putch(e, ']');
}

static void encode_table(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  int marked = 0, frozen = 0;
  size_t start = 0;
  lua_Unsigned len;
  if (depth > LASH_JSON_MAX_DEPTH)
    luaL_error(L, "cannot encode: nested too deeply (a cycle?)");
  luaL_checkstack(L, 8, "JSON nesting");
  if (e->memo) {
    lua_pushvalue(L, idx);
    switch (lua_rawget(L, e->memo)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, -1, &n);
      put(e, s, n);
      lua_pop(L, 1);
      return;
    }
    case LUA_TBOOLEAN:
      frozen = 1;
      start = e->b->n;
      break;
    case LUA_TUSERDATA:
      encode_growing(e, idx, depth, lua_touserdata(L, -1));
      lua_pop(L, 1);
      return;
    default:
      break;
    }
    lua_pop(L, 1);
  }
  if (lua_getmetatable(L, idx)) {
    marked = lua_rawequal(L, -1, e->amt);
    lua_pop(L, 1);
  }
  len = lua_rawlen(L, idx);
  if (marked || len > 0) {
    lua_Unsigned count = 0, i;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      count++;
      lua_pop(L, 1);
    }
    if (count == len) {
      putch(e, '[');
      for (i = 1; i <= len; i++) {
        if (i > 1) putch(e, ',');
        lua_rawgeti(L, idx, (lua_Integer)i);
        encode_value(e, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
      }
      putch(e, ']');
      goto done;
    }
  }
  if (e->mode == LASH_JSON_CANONICAL) encode_object_sorted(e, idx, depth);
  else encode_object_hashed(e, idx, depth);
done:
  if (frozen) {
    lua_pushvalue(L, idx);
    lua_pushlstring(L, e->b->p + start, e->b->n - start);
    lua_rawset(L, e->memo);
  }
}

static void encode_value(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    put_string(e, s, n);
    break;
  }
  case LUA_TNUMBER: {
    char num[64];
    size_t n = fmt_number(L, idx, num, sizeof num);
    put(e, num, n);
    break;
  }
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx)) put(e, "true", 4);
    else put(e, "false", 5);
    break;
  case LUA_TNIL:
    put(e, "null", 4);
    break;
  case LUA_TLIGHTUSERDATA:
    if (lua_touserdata(L, idx) == NULL) {
      put(e, "null", 4);
      break;
    }
    luaL_error(L, "cannot encode a light userdata as JSON (only json.null)");
    break;
  case LUA_TTABLE:
    encode_table(e, idx, depth);
    break;
  default:
    luaL_error(L, "cannot encode a %s as JSON", luaL_typename(L, idx));
  }
}

static void push_memo(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &MEMO_KEY) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &MEMO_KEY);
}

void lash_json_push_array_mt(lua_State *L) {
  luaL_newmetatable(L, LASH_JSON_ARRAY_MT);   /* sets __name, nothing more */
}

void lash_json_encode(lua_State *L, int idx, int mode) {
  enc e;
  int base;
  idx = lua_absindex(L, idx);
  base = lua_gettop(L);
  e.L = L;
  e.mode = mode;
  e.b = push_buf(L);
  lash_json_push_array_mt(L);
  e.amt = lua_gettop(L);
  e.memo = 0;
  if (mode == LASH_JSON_CANONICAL) {
    push_memo(L);
    e.memo = lua_gettop(L);
  }
  e.b->n = 0;
  encode_value(&e, idx, 0);
  lua_pushlstring(L, e.b->p ? e.b->p : "", e.b->n);
  lua_pushvalue(L, base + 1);          /* the buffer goes back for reuse */
  lua_rawsetp(L, LUA_REGISTRYINDEX, &BUF_KEY);
  if (e.b->cap > (4u << 20)) {   /* do not keep a huge buffer around */
    free(e.b->p);
    e.b->p = NULL;
    e.b->n = e.b->cap = 0;
  }
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
}

void lash_json_freeze(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  push_memo(L);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) != LUA_TSTRING) {
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

void lash_json_grow_only(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  push_memo(L);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) != LUA_TUSERDATA) {
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    new_holder(L, sizeof(grown), GROW_MT, grown_gc);
    lua_rawset(L, -3);
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct dec {
  lua_State *L;
  const char *s, *p, *end;
  int amt;
} dec;

static int dec_error(dec *d, const char *at, const char *what) {
  return luaL_error(d->L, "invalid JSON at character %I: %s",
                    (lua_Integer)(at - d->s + 1), what);
}

static void skip_ws(dec *d) {
  const char *p = d->p, *end = d->end;
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  d->p = p;
}

static int hex4(const char *p) {
  int i, v = 0;
  for (i = 0; i < 4; i++) {
    int c = (unsigned char)p[i], x;
    if (c >= '0' && c <= '9') x = c - '0';
    else if (c >= 'a' && c <= 'f') x = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') x = c - 'A' + 10;
    else return -1;
    v = v * 16 + x;
  }
  return v;
}

static void add_utf8(luaL_Buffer *b, unsigned long cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) { u[0] = (char)cp; n = 1; }
  else if (cp < 0x800) {
    u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
  }
  luaL_addlstring(b, u, n);
}

/* d->p at the opening quote; pushes the string. Raw control characters
** are kept (lenient, as lua-cjson was): models do send them. */
static void parse_string(dec *d) {
  lua_State *L = d->L;
  const char *open = d->p, *p = d->p + 1, *end = d->end, *run;
  luaL_Buffer b;
  while (p < end && *p != '"' && *p != '\\') p++;
  if (p >= end) dec_error(d, open, "unterminated string");
  if (*p == '"') {
    lua_pushlstring(L, open + 1, (size_t)(p - open - 1));
    d->p = p + 1;
    return;
  }
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, open + 1, (size_t)(p - open - 1));
  for (;;) {
    if (p >= end) dec_error(d, open, "unterminated string");
    if (*p == '"') break;
    if (*p != '\\') {
      run = p;
      while (p < end && *p != '"' && *p != '\\') p++;
      luaL_addlstring(&b, run, (size_t)(p - run));
      continue;
    }
    if (p + 1 >= end) dec_error(d, open, "unterminated string");
    switch (p[1]) {
    case '"': luaL_addchar(&b, '"'); break;
    case '\\': luaL_addchar(&b, '\\'); break;
    case '/': luaL_addchar(&b, '/'); break;
    case 'b': luaL_addchar(&b, '\b'); break;
    case 'f': luaL_addchar(&b, '\f'); break;
    case 'n': luaL_addchar(&b, '\n'); break;
    case 'r': luaL_addchar(&b, '\r'); break;
    case 't': luaL_addchar(&b, '\t'); break;
    case 'u': {
      long cp = end - p >= 6 ? hex4(p + 2) : -1;
      if (cp < 0) dec_error(d, p, "bad \\u escape");
      p += 6;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        long lo = (end - p >= 6 && p[0] == '\\' && p[1] == 'u') ? hex4(p + 2) : -1;
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        }
        /* else a lone high surrogate: kept, below */
      }
      /* A lone surrogate is kept as its 3-byte (WTF-8) form, which is not
      ** valid UTF-8, so whoever reads the text can say what is wrong with it
      ** (write_file answers with the reference's "unpaired surrogates"
      ** message); lash.output.utf8_repair makes it U+FFFD where needed. */
      add_utf8(&b, (unsigned long)cp);
      continue;
    }
    default:
      dec_error(d, p, "bad escape");
    }
    p += 2;
  }
  luaL_pushresult(&b);
  d->p = p + 1;
}

static void parse_number(dec *d) {
  lua_State *L = d->L;
  const char *start = d->p, *p = d->p, *end = d->end;
  char small[64];
  size_t n;
  int ok;
  if (p < end && *p == '-') p++;
  if (p >= end || *p < '0' || *p > '9') dec_error(d, start, "unexpected character");
  if (*p == '0') p++;
  else while (p < end && *p >= '0' && *p <= '9') p++;
  if (p < end && *p == '.') {
    p++;
    if (p >= end || *p < '0' || *p > '9') dec_error(d, start, "bad number");
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') dec_error(d, start, "bad number");
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  n = (size_t)(p - start);
  if (n < sizeof small) {
    memcpy(small, start, n);
    small[n] = 0;
    ok = lua_stringtonumber(L, small) != 0;
  } else {
    lua_pushlstring(L, start, n);
    ok = lua_stringtonumber(L, lua_tostring(L, -1)) != 0;
    lua_remove(L, ok ? -2 : -1);
  }
  if (!ok) dec_error(d, start, "bad number");
  if (!lua_isinteger(L, -1)) {
    /* whole numbers within 2^53 are integers: 1.0 and 1e3 read as 1, 1000 */
    lua_Number x = lua_tonumber(L, -1);
    if (x == floor(x) && x > -9007199254740992.0 && x < 9007199254740992.0) {
      lua_pop(L, 1);
      lua_pushinteger(L, (lua_Integer)x);
    }
  }
  d->p = p;
}

static void parse_value(dec *d, int depth);

static int literal(dec *d, const char *word, size_t n) {
  if ((size_t)(d->end - d->p) >= n && memcmp(d->p, word, n) == 0) {
    d->p += n;
    return 1;
  }
  return 0;
}

static void parse_value(dec *d, int depth) {
  lua_State *L = d->L;
  skip_ws(d);
  if (d->p >= d->end) dec_error(d, d->p, "unexpected end of text");
  switch (*d->p) {
  case '{': {
    if (depth >= LASH_JSON_MAX_DEPTH) dec_error(d, d->p, "too deeply nested");
    luaL_checkstack(L, 4, "JSON nesting");
    lua_createtable(L, 0, 4);
    d->p++;
    skip_ws(d);
    if (d->p < d->end && *d->p == '}') { d->p++; return; }
    for (;;) {
      skip_ws(d);
      if (d->p >= d->end || *d->p != '"') dec_error(d, d->p, "expected a string key");
      parse_string(d);
      skip_ws(d);
      if (d->p >= d->end || *d->p != ':') dec_error(d, d->p, "expected ':'");
      d->p++;
      parse_value(d, depth + 1);
      lua_rawset(L, -3);
      skip_ws(d);
      if (d->p < d->end && *d->p == ',') { d->p++; continue; }
      if (d->p < d->end && *d->p == '}') { d->p++; return; }
      dec_error(d, d->p, "expected ',' or '}'");
    }
  }
  case '[': {
    lua_Integer i = 0;
    if (depth >= LASH_JSON_MAX_DEPTH) dec_error(d, d->p, "too deeply nested");
    luaL_checkstack(L, 4, "JSON nesting");
    lua_createtable(L, 0, 0);
    lua_pushvalue(L, d->amt);
    lua_setmetatable(L, -2);
    d->p++;
    skip_ws(d);
    if (d->p < d->end && *d->p == ']') { d->p++; return; }
    for (;;) {
      parse_value(d, depth + 1);
      lua_rawseti(L, -2, ++i);
      skip_ws(d);
      if (d->p < d->end && *d->p == ',') { d->p++; continue; }
      if (d->p < d->end && *d->p == ']') { d->p++; return; }
      dec_error(d, d->p, "expected ',' or ']'");
    }
  }
  case '"':
    parse_string(d);
    return;
  case 't':
    if (literal(d, "true", 4)) { lua_pushboolean(L, 1); return; }
    break;
  case 'f':
    if (literal(d, "false", 5)) { lua_pushboolean(L, 0); return; }
    break;
  case 'n':
    if (literal(d, "null", 4)) { lua_pushlightuserdata(L, NULL); return; }
    break;
  default:
    if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9')) {
      parse_number(d);
      return;
    }
  }
  dec_error(d, d->p, "unexpected character");
}

void lash_json_decode(lua_State *L, const char *s, size_t len) {
  dec d;
  int base = lua_gettop(L);
  d.L = L;
  d.s = d.p = s;
  d.end = s + len;
  lash_json_push_array_mt(L);
  d.amt = lua_gettop(L);
  parse_value(&d, 0);
  skip_ws(&d);
  if (d.p < d.end) dec_error(&d, d.p, "trailing characters");
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
}

/* ---- protected calls, for C that must not raise ---------------------------- */

static int p_encode(lua_State *L) {
  int mode = (int)lua_tointeger(L, 2);
  lua_settop(L, 1);
  lash_json_encode(L, 1, mode);
  return 1;
}

static int p_decode(lua_State *L) {
  size_t len;
  const char *s = lua_tolstring(L, 1, &len);
  lash_json_decode(L, s, len);
  return 1;
}

int lash_json_pencode(lua_State *L, int idx, int mode) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, p_encode);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, mode);
  return lua_pcall(L, 2, 1, 0);
}

int lash_json_pdecode(lua_State *L, const char *s, size_t len) {
  lua_pushcfunction(L, p_decode);
  lua_pushlstring(L, s, len);
  return lua_pcall(L, 1, 1, 0);
}
