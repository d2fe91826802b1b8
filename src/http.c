/*
** http.c: lash.http, the HTTP client. One libcurl easy handle per request,
** driven by the runtime's loop (its multi handle pools connections and DNS
** for the whole runtime); a per-runtime context holds a curl share for TLS
** sessions and a small pool of idle easy handles. This file owns request
** options, response collection (buffered, or streamed to on_chunk between
** waits), error mapping to typed errors, and lash_open_http.
*/
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "lua.h"
#include "lauxlib.h"

#include "modules.h"
#include "runtime.h"
#include "sse.h"

#define HTTP_CTX_MT "lash.http.ctx"          /* its metatable */
#define HTTP_CTX_KEY "lash.http.context"     /* the instance, in the registry */
#define HTTP_OP_MT "lash.http.request"

#define POOL_MAX 16
#define DEFAULT_MAX_BODY ((lua_Integer)64 << 20)
#define DEFAULT_CONNECT_TIMEOUT 30.0
#define DEFAULT_MAX_REDIRECTS 10
#define MAX_HEADER_BYTES ((size_t)1 << 20)
/* A streamed body pauses the transfer when this much is waiting for
** on_chunk, so a slow consumer bounds memory instead of the server. */
#define STREAM_PAUSE_AT ((size_t)1 << 20)

#ifndef LASH_VERSION
#define LASH_VERSION "0.0.0"
#endif

/* Stack slots of a running request (the waiting thread's stack anchors
** them across yields). */
enum { S_OPTS = 1, S_OP, S_ONCHUNK, S_BODY, S_HEADERS, S_URL,
       S_NFIXED = S_URL };

/* ---- per-runtime context ------------------------------------------- */

typedef struct http_ctx {
  lash_loop *loop;
  CURLSH *share;
  CURL *pool[POOL_MAX];
  int npool;
  int closed;
  int h2c_no_reuse;   /* libcurl < 8.0.0: see configure() */
  /* The last URL that passed check_url and its redacted form: an agent
  ** calls one endpoint over and over, and parsing it is a fifth of the
  ** cost of a loopback request. */
  char *url, *shown;
  size_t url_len, shown_len;
} http_ctx;

static int ctx_gc(lua_State *L) {
  http_ctx *ctx = luaL_checkudata(L, 1, HTTP_CTX_MT);
  if (ctx->closed) return 0;
  ctx->closed = 1;
  while (ctx->npool > 0) curl_easy_cleanup(ctx->pool[--ctx->npool]);
  if (ctx->share) {
    curl_share_cleanup(ctx->share);
    ctx->share = NULL;
  }
  free(ctx->url);
  free(ctx->shown);
  ctx->url = ctx->shown = NULL;
  return 0;
}

/* Push the context of L's runtime, creating it on first use. It is made
** after the runtime (lash_open_http runs once the runtime is open) and
** before any request, so when a state closes Lua finalizes every request
** first, then this, then the runtime's loop. */
static http_ctx *ctx_get(lua_State *L) {
  http_ctx *ctx;
  if (lua_getfield(L, LUA_REGISTRYINDEX, HTTP_CTX_KEY) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  lua_pop(L, 1);
  ctx = lua_newuserdatauv(L, sizeof *ctx, 0);
  memset(ctx, 0, sizeof *ctx);
  if (luaL_newmetatable(L, HTTP_CTX_MT)) {
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  ctx->loop = lash_runtime_loop(L);  /* raises if lash is not open */
  ctx->share = curl_share_init();
  if (!ctx->share) luaL_error(L, "lash.http: cannot create a curl share");
  /* Connections and DNS are already pooled by the loop's multi handle;
  ** TLS sessions are per easy handle unless shared. */
  curl_share_setopt(ctx->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  ctx->h2c_no_reuse = curl_version_info(CURLVERSION_NOW)->version_num <
                      0x080000;
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, HTTP_CTX_KEY);
  return ctx;
}

static CURL *pool_get(http_ctx *ctx) {
  if (ctx->npool > 0) return ctx->pool[--ctx->npool];
  return curl_easy_init();
}

static void pool_put(http_ctx *ctx, CURL *easy) {
  if (ctx && !ctx->closed && ctx->npool < POOL_MAX) {
    curl_easy_reset(easy);
    ctx->pool[ctx->npool++] = easy;
  } else {
    curl_easy_cleanup(easy);
  }
}

/* ---- byte buffers ---------------------------------------------------- */

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static int buf_reserve(buf *b, size_t extra) {
  size_t need, cap;
  char *p;
  if (extra > SIZE_MAX - b->n) return -1;
  need = b->n + extra;
  if (need <= b->cap) return 0;
  cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = realloc(b->p, cap);
  if (!p) return -1;
  b->p = p;
  b->cap = cap;
  return 0;
}

static int buf_add(buf *b, const char *s, size_t n) {
  if (buf_reserve(b, n) != 0) return -1;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  return 0;
}

static void buf_free(buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* ---- the request op ---------------------------------------------------- */

enum { OP_IDLE, OP_RUNNING, OP_DONE, OP_CLOSED };
enum { ABORT_NONE, ABORT_TOO_LARGE, ABORT_HEADERS_TOO_LARGE, ABORT_NOMEM };

typedef struct http_op {
  lash_wait w;                 /* first: op_cancel gets back to the op */
  http_ctx *ctx;
  lash_loop *loop;
  CURL *easy;
  struct curl_slist *hdrs;
  int state;
  CURLcode rc;
  int abort;
  int streaming;               /* body goes to on_chunk */
  int check_status;
  int decided;                 /* first body byte seen: status is known */
  int paused;
  size_t max_body, total;
  buf body;                    /* whole body, or what on_chunk has not seen */
  buf head;                    /* header lines of the latest response */
  char errbuf[CURL_ERROR_SIZE];
} http_op;

/* Give everything back: the easy handle leaves the multi and returns to
** the pool. Idempotent; the one place an op's resources are freed. */
static void op_release(http_op *op) {
  if (op->easy) {
    if (op->state == OP_RUNNING) lash_curl_remove(op->loop, op->easy);
    pool_put(op->ctx, op->easy);
    op->easy = NULL;
  }
  curl_slist_free_all(op->hdrs);
  op->hdrs = NULL;
  buf_free(&op->body);
  buf_free(&op->head);
  op->state = OP_CLOSED;
}

static int op_gc(lua_State *L) {
  op_release(luaL_checkudata(L, 1, HTTP_OP_MT));
  return 0;
}

static void op_cancel(lash_wait *w) {
  op_release((http_op *)w);
}

static void op_done(lash_loop *loop, CURL *easy, CURLcode rc, void *data) {
  http_op *op = data;
  (void)loop;
  (void)easy;
  op->rc = rc;
  op->state = OP_DONE;
  lash_wait_done(&op->w);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  http_op *op = ud;
  size_t len = size * n;
  if (!op->decided) {
    /* An error status with check_status is collected whole for the error
    ** object instead of being streamed. */
    long code = 0;
    op->decided = 1;
    if (op->streaming && op->check_status &&
        curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &code) ==
            CURLE_OK && code >= 400)
      op->streaming = 0;
    if (!op->streaming) {
      curl_off_t cl = -1;
      if (curl_easy_getinfo(op->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                            &cl) == CURLE_OK && cl > 0 &&
          (curl_off_t)op->max_body >= cl)
        (void)buf_reserve(&op->body, (size_t)cl);
    }
  }
  if (op->streaming && op->body.n >= STREAM_PAUSE_AT) {
    op->paused = 1;
    return CURL_WRITEFUNC_PAUSE;
  }
  if (len > op->max_body - op->total) {
    op->abort = ABORT_TOO_LARGE;
    return 0;
  }
  if (buf_add(&op->body, p, len) != 0) {
    op->abort = ABORT_NOMEM;
    return 0;
  }
  op->total += len;
  if (op->streaming) lash_wait_done(&op->w);
  return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  http_op *op = ud;
  size_t len = size * n;
  /* A status line starts a new response (1xx, redirects): keep only the
  ** headers of the last one. */
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) op->head.n = 0;
  if (len > MAX_HEADER_BYTES - op->head.n) {
    op->abort = ABORT_HEADERS_TOO_LARGE;
    return 0;
  }
  if (buf_add(&op->head, p, len) != 0) {
    op->abort = ABORT_NOMEM;
    return 0;
  }
  return len;
}

/* ---- options ----------------------------------------------------------- */

/* The options of one request, read from the table in one pass (a lookup
** per option costs more than the rest of the binding). Strings point into
** the options table, which the stack anchors while they are in use. */
typedef struct req_opts {
  const char *url, *method, *body, *ca, *version;
  size_t url_len, method_len, body_len;
  double timeout, connect_timeout, idle_timeout;
  lua_Integer max_redirects, max_body;
  int verify, follow, h2c, check_status;
} req_opts;

enum {
  O_METHOD, O_URL, O_HEADERS, O_BODY, O_TIMEOUT, O_CONNECT_TIMEOUT,
  O_IDLE_TIMEOUT, O_ON_CHUNK, O_VERIFY, O_CA_FILE, O_FOLLOW_REDIRECTS,
  O_MAX_REDIRECTS, O_HTTP_VERSION, O_HTTP2_PRIOR_KNOWLEDGE, O_CHECK_STATUS,
  O_MAX_BODY_BYTES, O_COUNT
};

static const char *const opt_names[O_COUNT] = {
  "method", "url", "headers", "body", "timeout", "connect_timeout",
  "idle_timeout", "on_chunk", "verify", "ca_file", "follow_redirects",
  "max_redirects", "http_version", "http2_prior_knowledge", "check_status",
  "max_body_bytes"
};

/* The value on top of the stack as seconds. */
static double val_seconds(lua_State *L, const char *name) {
  double s;
  if (lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, "lash.http.request: option '%s' must be a number of "
               "seconds, got %s", name, luaL_typename(L, -1));
  s = lua_tonumber(L, -1);
  if (!(s >= 0) || s > 1e9)
    luaL_error(L, "lash.http.request: option '%s' must be between 0 and "
               "1e9 seconds", name);
  return s;
}

static int val_bool(lua_State *L, const char *name) {
  if (lua_type(L, -1) != LUA_TBOOLEAN)
    luaL_error(L, "lash.http.request: option '%s' must be a boolean, got %s",
               name, luaL_typename(L, -1));
  return lua_toboolean(L, -1);
}

static lua_Integer val_int(lua_State *L, const char *name, lua_Integer lo) {
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (lua_type(L, -1) != LUA_TNUMBER || !isint || v < lo)
    luaL_error(L, "lash.http.request: option '%s' must be an integer >= %d",
               name, (int)lo);
  return v;
}

static const char *val_string(lua_State *L, const char *name, size_t *len) {
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "lash.http.request: option '%s' must be a string, got %s",
               name, luaL_typename(L, -1));
  return lua_tolstring(L, -1, len);
}

/* Read the options table at S_OPTS into o; headers, body and on_chunk go
** to their stack slots. Unknown keys raise, so a typo is never ignored. */
static void read_opts(lua_State *L, req_opts *o) {
  memset(o, 0, sizeof *o);
  o->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  o->max_redirects = DEFAULT_MAX_REDIRECTS;
  o->max_body = DEFAULT_MAX_BODY;
  o->verify = 1;
  lua_pushnil(L);
  while (lua_next(L, S_OPTS) != 0) {
    int i = 0;
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2)
                                                   : NULL;
    while (k && i < O_COUNT && strcmp(k, opt_names[i]) != 0) i++;
    if (!k || i == O_COUNT)
      luaL_error(L, "lash.http.request: unknown option %s%s%s (known: method, "
                 "url, headers, body, timeout, connect_timeout, idle_timeout, "
                 "on_chunk, verify, ca_file, follow_redirects, max_redirects, "
                 "http_version, http2_prior_knowledge, check_status, "
                 "max_body_bytes)",
                 k ? "'" : "", k ? k : luaL_typename(L, -2), k ? "'" : "");
    switch (i) {
      case O_METHOD: o->method = val_string(L, k, &o->method_len); break;
      case O_URL:  /* anything but a string: "required" below */
        if (lua_type(L, -1) == LUA_TSTRING)
          o->url = lua_tolstring(L, -1, &o->url_len);
        break;
      case O_HEADERS:
        if (lua_type(L, -1) != LUA_TTABLE)
          luaL_error(L, "lash.http.request: option 'headers' must be a table "
                     "of name = value, got %s", luaL_typename(L, -1));
        lua_pushvalue(L, -1);
        lua_replace(L, S_HEADERS);
        break;
      case O_BODY:
        o->body = val_string(L, k, &o->body_len);
        lua_pushvalue(L, -1);
        lua_replace(L, S_BODY);
        break;
      case O_TIMEOUT: o->timeout = val_seconds(L, k); break;
      case O_CONNECT_TIMEOUT: o->connect_timeout = val_seconds(L, k); break;
      case O_IDLE_TIMEOUT: o->idle_timeout = val_seconds(L, k); break;
      case O_ON_CHUNK:
        if (!lua_isfunction(L, -1))
          luaL_error(L, "lash.http.request: option 'on_chunk' must be a "
                     "function, got %s", luaL_typename(L, -1));
        lua_pushvalue(L, -1);
        lua_replace(L, S_ONCHUNK);
        break;
      case O_VERIFY: o->verify = val_bool(L, k); break;
      case O_CA_FILE: o->ca = val_string(L, k, NULL); break;
      case O_FOLLOW_REDIRECTS: o->follow = val_bool(L, k); break;
      case O_MAX_REDIRECTS: o->max_redirects = val_int(L, k, 0); break;
      case O_HTTP_VERSION: o->version = val_string(L, k, NULL); break;
      case O_HTTP2_PRIOR_KNOWLEDGE: o->h2c = val_bool(L, k); break;
      case O_CHECK_STATUS: o->check_status = val_bool(L, k); break;
      case O_MAX_BODY_BYTES: o->max_body = val_int(L, k, 1); break;
    }
    lua_settop(L, S_NFIXED + 1);  /* keep the key */
  }
  if (!o->url)
    luaL_error(L, "lash.http.request: option 'url' (a string) is required");
}

static int is_tchar(int c) {
  return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_token(const char *s, size_t n) {
  size_t i;
  if (n == 0) return 0;
  for (i = 0; i < n; i++)
    if (!is_tchar((unsigned char)s[i])) return 0;
  return 1;
}

static void add_header(lua_State *L, http_op *op, const char *line) {
  struct curl_slist *l = curl_slist_append(op->hdrs, line);
  if (!l) luaL_error(L, "lash.http.request: out of memory");
  op->hdrs = l;
}

/* headers = { Name = "value", ... } (at S_HEADERS). Values may not
** contain CR, LF or NUL (header injection). An empty value is sent as an
** empty header. */
static void set_headers(lua_State *L, http_op *op, int has_body) {
  int saw_expect = 0, saw_ctype = 0;
  if (lua_istable(L, S_HEADERS)) {
    lua_pushnil(L);
    while (lua_next(L, S_HEADERS) != 0) {
      size_t nl, vl, i;
      const char *name, *value;
      if (lua_type(L, -2) != LUA_TSTRING)
        luaL_error(L, "lash.http.request: header names must be strings, "
                   "got %s", luaL_typename(L, -2));
      name = lua_tolstring(L, -2, &nl);
      if (!is_token(name, nl))
        luaL_error(L, "lash.http.request: invalid header name '%s' (an HTTP "
                   "token: letters, digits and !#$%%&'*+-.^_`|~, no spaces "
                   "or colons)", name);
      if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "lash.http.request: header '%s' must be a string or "
                   "number, got %s", name, luaL_typename(L, -1));
      value = lua_tolstring(L, -1, &vl);  /* converts a number in place */
      for (i = 0; i < vl; i++)
        if (value[i] == '\r' || value[i] == '\n' || value[i] == '\0')
          luaL_error(L, "lash.http.request: header '%s' contains CR, LF or "
                     "NUL", name);
      if (strcasecmp(name, "expect") == 0) saw_expect = 1;
      if (strcasecmp(name, "content-type") == 0) saw_ctype = 1;
      if (vl == 0) lua_pushfstring(L, "%s;", name);
      else lua_pushfstring(L, "%s: %s", name, value);
      add_header(L, op, lua_tostring(L, -1));
      lua_pop(L, 2);
    }
  }
  /* No "Expect: 100-continue" round trip, and no invented form content
  ** type for a body the caller did not label. */
  if (!saw_expect) add_header(L, op, "Expect:");
  if (has_body && !saw_ctype) add_header(L, op, "Content-Type:");
}

/* Remember url and its shown form (best effort: a failed copy just
** misses the cache next time). */
static void cache_url(http_ctx *ctx, const char *url, size_t len,
                      const char *shown, size_t shown_len) {
  free(ctx->url);
  free(ctx->shown);
  ctx->url = malloc(len + 1);
  ctx->shown = malloc(shown_len + 1);
  if (!ctx->url || !ctx->shown) {
    free(ctx->url);
    free(ctx->shown);
    ctx->url = ctx->shown = NULL;
    return;
  }
  memcpy(ctx->url, url, len + 1);
  memcpy(ctx->shown, shown, shown_len + 1);
  ctx->url_len = len;
  ctx->shown_len = shown_len;
}

/* Check the URL and push the form used in messages: no user info, the
** query and fragment elided (API keys travel there sometimes). */
static void check_url(lua_State *L, http_ctx *ctx, const char *url,
                      size_t len) {
  CURLU *u;
  char *scheme = NULL, *shown = NULL, *query = NULL;
  CURLUcode uc;
  if (ctx->url && ctx->url_len == len && memcmp(ctx->url, url, len) == 0) {
    lua_pushlstring(L, ctx->shown, ctx->shown_len);
    return;
  }
  u = curl_url();
  if (!u) luaL_error(L, "lash.http.request: out of memory");
  uc = curl_url_set(u, CURLUPART_URL, url, 0);
  if (uc == CURLUE_OK) uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if (uc != CURLUE_OK || (strcmp(scheme, "http") != 0 &&
                          strcmp(scheme, "https") != 0)) {
    curl_free(scheme);
    curl_url_cleanup(u);
    luaL_error(L, "lash.http.request: option 'url' must be an absolute "
               "http:// or https:// URL%s%s", uc != CURLUE_OK ? ": " : "",
               uc != CURLUE_OK ? curl_url_strerror(uc) : "");
  }
  curl_free(scheme);
  curl_url_get(u, CURLUPART_QUERY, &query, 0);
  curl_url_set(u, CURLUPART_USER, NULL, 0);
  curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
  curl_url_set(u, CURLUPART_QUERY, NULL, 0);
  curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
  if (curl_url_get(u, CURLUPART_URL, &shown, 0) != CURLUE_OK) shown = NULL;
  lua_pushfstring(L, "%s%s", shown ? shown : "(url)", query ? "?..." : "");
  curl_free(shown);
  curl_free(query);
  curl_url_cleanup(u);
  if (strlen(url) == len) {  /* an embedded NUL never gets this far */
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    cache_url(ctx, url, len, s, n);
  }
}

static void configure(lua_State *L, http_op *op) {
  CURL *e = op->easy;
  req_opts o;
  const char *method, *url;
  long httpv;
  int https;

  read_opts(L, &o);
  url = o.url;
  if (strlen(url) != o.url_len)
    luaL_error(L, "lash.http.request: option 'url' contains a NUL byte");
  check_url(L, op->ctx, url, o.url_len);
  lua_replace(L, S_URL);
  https = strncasecmp(url, "https:", 6) == 0;
  method = o.method;
  if (method && !is_token(method, o.method_len))
    luaL_error(L, "lash.http.request: invalid method '%s' (an HTTP token "
                  "such as GET, POST or PATCH: no spaces)", method);
  if (!method) method = o.body ? "POST" : "GET";

  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_SHARE, op->ctx->share);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, op->errbuf);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "lash/" LASH_VERSION);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, op);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, op);

  if (strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(method, "GET") != 0 || o.body) {
    if (strcmp(method, "POST") != 0)
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (o.body || strcmp(method, "POST") == 0) {
      /* The body string is anchored at S_BODY for the whole transfer. */
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o.body_len);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, o.body ? o.body : "");
    }
  }
  set_headers(L, op, o.body != NULL);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, op->hdrs);

  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(o.timeout * 1000));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)ceil(o.connect_timeout * 1000));
  if (o.idle_timeout > 0) {
    /* libcurl counts whole seconds below 1 byte/s as stalled. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(o.idle_timeout));
  }

  if (!o.verify) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (o.ca) curl_easy_setopt(e, CURLOPT_CAINFO, o.ca);

  if (o.follow) {
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)o.max_redirects);
  }

  /* Cleartext without prior knowledge is HTTP/1.1 either way; saying so
  ** keeps libcurl < 8 from treating an in-use HTTP/1.1 connection as one
  ** it may multiplex on, once the origin has had an HTTP/2 connection. */
  httpv = o.h2c ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
      : https ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1;
  if (o.version && strcmp(o.version, "1.1") == 0 && !o.h2c)
    httpv = CURL_HTTP_VERSION_1_1;
  else if (o.version && strcmp(o.version, "2") != 0)
    luaL_error(L, "lash.http.request: option 'http_version' must be \"2\" "
               "(the default: HTTP/2 where TLS offers it) or \"1.1\" (not "
               "with http2_prior_knowledge)");
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, httpv);
  if (o.h2c && op->ctx->h2c_no_reuse) {
    /* libcurl before 8.0.0 breaks a prior-knowledge HTTP/2 connection
    ** when it reuses it ("Error in the HTTP2 framing layer", curl issue
    ** 10634): give each such request a connection of its own. */
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  } else if (o.h2c || (https && httpv != CURL_HTTP_VERSION_1_1)) {
    /* Let concurrent requests to one host wait to multiplex on a single
    ** HTTP/2 connection instead of opening one each. */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  }

  op->check_status = o.check_status;
  op->max_body = (size_t)o.max_body;
  op->streaming = lua_isfunction(L, S_ONCHUNK);
}

/* ---- results and errors -------------------------------------------------- */

static int status_retryable(long s) {
  return s == 408 || s == 425 || s == 429 || s == 500 || s == 502 ||
         s == 503 || s == 504 || s == 529;
}

static void classify(CURLcode rc, const char **kind, int *retryable) {
  *retryable = 0;
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
      *kind = "connect";
      *retryable = 1;
      break;
    case CURLE_OPERATION_TIMEDOUT:
      *kind = "timeout";
      *retryable = 1;
      break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
      *kind = "tls";
      break;
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
      *kind = "http";
      *retryable = 1;
      break;
    default:
      *kind = "http";
      break;
  }
}

/* Raise the failure of a finished (or aborted) transfer. The op is
** released first so nothing waits on the garbage collector. */
static int raise_failure(lua_State *L, http_op *op) {
  const char *url = lua_tostring(L, S_URL), *kind;
  int retryable;
  CURLcode rc = op->rc;
  switch (op->abort) {
    case ABORT_TOO_LARGE:
      lua_pushfstring(L, "%s: response body is larger than max_body_bytes "
                      "(%I bytes); raise max_body_bytes if this is expected",
                      url, (lua_Integer)op->max_body);
      kind = "http";
      retryable = 0;
      break;
    case ABORT_HEADERS_TOO_LARGE:
      lua_pushfstring(L, "%s: response headers are larger than %d bytes",
                      url, (int)MAX_HEADER_BYTES);
      kind = "http";
      retryable = 0;
      break;
    case ABORT_NOMEM:
      lua_pushfstring(L, "%s: out of memory while receiving the response",
                      url);
      kind = "http";
      retryable = 0;
      break;
    default:
      classify(rc, &kind, &retryable);
      lua_pushfstring(L, "%s: %s", url,
                      op->errbuf[0] ? op->errbuf : curl_easy_strerror(rc));
      break;
  }
  op_release(op);
  lash_error_push(L, kind, lua_tostring(L, -1), retryable);
  lua_pushvalue(L, S_URL);
  lua_setfield(L, -2, "url");
  lua_pushinteger(L, (lua_Integer)rc);
  lua_setfield(L, -2, "curl_code");
  return lua_error(L);
}

/* Parse the header lines of the last response into a table: lower-case
** names, repeated headers joined with ", ". */
static void push_headers(lua_State *L, const buf *h) {
  const char *p = h->p, *end = h->p + h->n;
  int t;
  lua_createtable(L, 0, 8);
  t = lua_gettop(L);
  while (p && p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon, *v, *ve;
    const char *line = p;
    if (!eol) eol = end;
    p = eol + 1;
    ve = eol;
    if (ve > line && ve[-1] == '\r') ve--;
    if (ve == line || memcmp(line, "HTTP/", ve - line < 5 ? 0 : 5) == 0)
      continue;
    colon = memchr(line, ':', (size_t)(ve - line));
    if (!colon || colon == line) continue;
    v = colon + 1;
    while (v < ve && (*v == ' ' || *v == '\t')) v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    {
      char low[64];
      size_t n = (size_t)(colon - line), i;
      if (n <= sizeof low) {
        for (i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)line[i]);
        lua_pushlstring(L, low, n);
      } else {
        luaL_Buffer b;
        char *d = luaL_buffinitsize(L, &b, n);
        for (i = 0; i < n; i++) d[i] = (char)tolower((unsigned char)line[i]);
        luaL_pushresultsize(&b, n);
      }
    }
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) == LUA_TSTRING) {
      lua_pushliteral(L, ", ");
      lua_pushlstring(L, v, (size_t)(ve - v));
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushlstring(L, v, (size_t)(ve - v));
    }
    lua_rawset(L, t);
  }
}

static int finish(lua_State *L, http_op *op) {
  long status = 0;
  int top = lua_gettop(L);
  if (op->abort != ABORT_NONE || op->rc != CURLE_OK)
    return raise_failure(L, op);
  curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &status);
  lua_pushinteger(L, status);                               /* top + 1 */
  push_headers(L, &op->head);                               /* top + 2 */
  if (op->streaming) lua_pushnil(L);                        /* top + 3 */
  else lua_pushlstring(L, op->body.p ? op->body.p : "", op->body.n);
  op_release(op);
  if (op->check_status && status >= 400) {
    const char *url = lua_tostring(L, S_URL);
    lua_pushfstring(L, "%s: HTTP status %d", url, (int)status);
    lash_error_push(L, "status", lua_tostring(L, -1),
                    status_retryable(status));
    lua_pushinteger(L, status);
    lua_setfield(L, -2, "status");
    lua_pushvalue(L, top + 2);
    lua_setfield(L, -2, "headers");
    lua_pushvalue(L, top + 3);
    lua_setfield(L, -2, "body");
    lua_pushvalue(L, S_URL);
    lua_setfield(L, -2, "url");
    return lua_error(L);
  }
  return 3;
}

/* ---- the wait loop --------------------------------------------------------
** pump() alternates between waiting for "data or done" and handing buffered
** data to on_chunk from Lua context (never from a curl callback). It is
** re-entered by a continuation after every yield, and loops in place when
** nothing yielded, so a long stream never deepens the C stack. */

#define PUMP_AGAIN (-1)

static int pump(lua_State *L, http_op *op);

static int chunk_k(lua_State *L, int status, lua_KContext ctx) {
  http_op *op = (http_op *)ctx;
  if (status != LUA_OK && status != LUA_YIELD) {
    op_release(op);      /* on_chunk failed: abort the transfer */
    return lua_error(L);
  }
  return pump(L, op);
}

static int wait_k(lua_State *L, int status, lua_KContext ctx) {
  http_op *op = (http_op *)ctx;
  if (op->w.cancelled) {
    op_release(op);
    lash_wait_check(L, &op->w);
  }
  /* LUA_OK: lash_wait_yield ran us in place from pump's loop. */
  if (status == LUA_OK) return PUMP_AGAIN;
  return pump(L, op);
}

static int pump(lua_State *L, http_op *op) {
  for (;;) {
    if (op->state == OP_CLOSED)
      return luaL_error(L, "lash.http.request: request was released while "
                        "in use");
    if (op->streaming && op->body.n > 0) {
      int status;
      lua_pushvalue(L, S_ONCHUNK);
      lua_pushlstring(L, op->body.p, op->body.n);
      op->body.n = 0;
      if (op->paused && op->state == OP_RUNNING) {
        /* May deliver the held data at once (into op->body). */
        op->paused = 0;
        curl_easy_pause(op->easy, CURLPAUSE_CONT);
      }
      status = lua_pcallk(L, 1, 0, 0, (lua_KContext)op, chunk_k);
      if (status != LUA_OK) {
        op_release(op);
        return lua_error(L);
      }
      continue;
    }
    if (op->state == OP_DONE) return finish(L, op);
    lash_wait_init(&op->w, op_cancel);
    if (lash_wait_yield(L, &op->w, (lua_KContext)op, wait_k) != PUMP_AGAIN)
      return luaL_error(L, "lash.http.request: unexpected wait result");
  }
}

/*
** lash.http.request(opts) -> status, headers, body
**
** Waits without blocking: inside a task it yields to the loop, outside one
** it drives the loop (and every task) until the response is complete.
** opts (unknown keys raise):
**   url                 absolute http:// or https:// URL (required)
**   method              default "POST" with a body, else "GET"
**   headers             { Name = "value" | number }; "" sends an empty value
**   body                request body string (no Content-Type is invented)
**   timeout             seconds for the whole transfer (default: none)
**   connect_timeout     seconds (default 30)
**   idle_timeout        seconds without a received byte (whole seconds)
**   on_chunk            function(chunk): gets the body as it arrives, in
**                       the waiting task, and may wait itself; the body
**                       result is then nil; an error it raises aborts the
**                       transfer and propagates
**   verify              verify TLS peer and host (default true)
**   ca_file             CA bundle to verify against
**   follow_redirects    default false; max_redirects (default 10)
**   http_version        "2" (default: HTTP/2 where TLS ALPN offers it) or
**                       "1.1"; http2_prior_knowledge = true for h2c
**   check_status        raise a "status" error for statuses >= 400
**   max_body_bytes      response body cap (default 64 MiB), streamed or not
** Returns the status (integer), the headers of the final response (lower-
** case names, repeats joined with ", ") and the body (nil with on_chunk).
** Failures raise typed errors {kind, message, retryable, url, curl_code}:
** "connect", "timeout", "tls", "http" (transport, including a connection
** dropped mid-body: retryable; size caps: not), "status" (with status,
** headers and body), and "cancelled" when the task is cancelled. Messages
** show the URL without credentials or query, never a header value.
** Upvalues: the runtime's context and the op metatable.
*/
static int l_request(lua_State *L) {
  http_ctx *ctx = lua_touserdata(L, lua_upvalueindex(1));
  http_op *op;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  op = lua_newuserdatauv(L, sizeof *op, 0);           /* S_OP */
  memset(op, 0, sizeof *op);
  op->state = OP_IDLE;
  lash_wait_init(&op->w, op_cancel);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setmetatable(L, S_OP);
  op->ctx = ctx;
  op->loop = ctx->loop;
  lua_settop(L, S_NFIXED);               /* S_ONCHUNK .. S_URL: nil */
  if (ctx->closed)
    return luaL_error(L, "lash.http.request: the lash runtime is closed");
  op->easy = pool_get(ctx);
  if (!op->easy)
    return luaL_error(L, "lash.http.request: cannot create a curl handle");
  configure(L, op);
  lua_settop(L, S_NFIXED);
  if (lash_curl_add(op->loop, op->easy, op_done, op) != 0) {
    op_release(op);
    return luaL_error(L, "lash.http.request: cannot start the transfer");
  }
  op->state = OP_RUNNING;
  return pump(L, op);
}

/* ---- module ---------------------------------------------------------------- */

int lash_open_http(lua_State *L) {
  lua_createtable(L, 0, 2);
  ctx_get(L);
  if (luaL_newmetatable(L, HTTP_OP_MT)) {
    lua_pushcfunction(L, op_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, op_gc);
    lua_setfield(L, -2, "__close");
    lua_pushliteral(L, "lash.http.request");
    lua_setfield(L, -2, "__name");
  }
  lua_pushcclosure(L, l_request, 2);
  lua_setfield(L, -2, "request");
  lua_pushcfunction(L, lash_sse_parser_new);
  lua_setfield(L, -2, "sse_parser");
  return 1;
}
