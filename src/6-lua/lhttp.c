/*
** lhttp.c: lash.http, the Lua binding of the HTTP transport (http.c;
** prefix lash_open_http, the rest static). This file owns reading a
** request's options table, waiting for the response in the calling task
** (or driving the loop outside one), handing a streamed body to on_chunk
** between waits, and turning results into Lua values and typed errors.
*/
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lua.h"
#include "lauxlib.h"

#include "http.h"
#include "laux.h"
#include "lsse.h"
#include "modules.h"
#include "runtime.h"

#define HTTP_CTX_MT "lash.http.ctx"          /* its metatable */
#define HTTP_OP_MT "lash.http.request"

/* The per-runtime context's registry key (by address: nothing else can
** spell it). */
static const char ctx_key = 0;

/* Stack slots of a running request (the waiting thread's stack anchors
** them across yields). */
enum { S_OPTS = 1, S_OP, S_ONCHUNK, S_BODY, S_HEADERS, S_URL,
       S_NFIXED = S_URL };

/* ---- per-runtime context ------------------------------------------- */

static int ctx_gc(lua_State *L) {
  lash_http_close(luaL_checkudata(L, 1, HTTP_CTX_MT));
  return 0;
}

/* Push the context of L's runtime, creating it on first use. It is made
** after the runtime (lash_open_http runs once the runtime is open) and
** before any request, so when a state closes Lua finalizes every request
** first, then this, then the runtime's loop. */
static lash_http *ctx_get(lua_State *L) {
  lash_http *h;
  lash_loop *loop;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_key) == LUA_TUSERDATA)
    return lua_touserdata(L, -1);
  lua_pop(L, 1);
  loop = lash_runtime_loop(L);  /* raises if lash is not open */
  h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  h->closed = 1;                /* until init: nothing to free */
  if (luaL_newmetatable(L, HTTP_CTX_MT)) {
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  if (lash_http_init(h, loop) != 0) {
    lash_http_close(h);
    luaL_error(L, "lash.http: cannot create a curl share");
  }
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &ctx_key);
  return h;
}

/* ---- the request op ---------------------------------------------------- */

typedef struct http_op {
  lash_wait w;                 /* first: op_cancel gets back to the op */
  lash_http_req req;
} http_op;

static int op_gc(lua_State *L) {
  http_op *op = luaL_checkudata(L, 1, HTTP_OP_MT);
  lash_http_req_release(&op->req);
  return 0;
}

static void op_cancel(lash_wait *w) {
  lash_http_req_release(&((http_op *)w)->req);
}

static void op_notify(void *ud) {
  lash_wait_done(&((http_op *)ud)->w);
}

/* ---- options ----------------------------------------------------------- */

enum {
  O_METHOD, O_URL, O_HEADERS, O_BODY, O_TIMEOUT, O_CONNECT_TIMEOUT,
  O_IDLE_TIMEOUT, O_ON_CHUNK, O_VERIFY, O_CA_FILE, O_FOLLOW_REDIRECTS,
  O_MAX_REDIRECTS, O_HTTP_VERSION, O_HTTP2_PRIOR_KNOWLEDGE, O_CHECK_STATUS,
  O_MAX_BODY_BYTES, O_COUNT
};

static const char *const opt_names[O_COUNT + 1] = {
  "method", "url", "headers", "body", "timeout", "connect_timeout",
  "idle_timeout", "on_chunk", "verify", "ca_file", "follow_redirects",
  "max_redirects", "http_version", "http2_prior_knowledge", "check_status",
  "max_body_bytes", NULL
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

static int parse_version(lua_State *L, const char *v, int h2c) {
  if (!v || strcmp(v, "2") == 0) return v ? LASH_HTTP_V_2 : LASH_HTTP_V_DEFAULT;
  if (strcmp(v, "1.1") == 0 && !h2c) return LASH_HTTP_V_1_1;
  return luaL_error(L, "lash.http.request: option 'http_version' must be \"2\" "
                    "(the default: HTTP/2 where TLS offers it) or \"1.1\" (not "
                    "with http2_prior_knowledge)");
}

/* Read the options table at S_OPTS into o, in one pass (a lookup per
** option costs more than the rest of the binding); headers, body and
** on_chunk go to their stack slots, which anchor the strings o points to.
** Unknown keys raise (the shared checker's message), so a typo is never
** ignored. */
static void read_opts(lua_State *L, lash_http_opts *o, size_t *url_len,
                      size_t *method_len) {
  const char *version = NULL;
  lua_Integer max_body = (lua_Integer)LASH_HTTP_DEFAULT_MAX_BODY;
  lash_http_opts_init(o);
  *url_len = *method_len = 0;
  lua_pushnil(L);
  while (lua_next(L, S_OPTS) != 0) {
    int i = lashA_optionindex(L, -2, opt_names);
    const char *k = opt_names[i < 0 ? 0 : i];
    if (i < 0) lashA_checkoptions(L, S_OPTS, "lash.http.request", opt_names);
    switch (i) {
      case O_METHOD: o->method = val_string(L, k, method_len); break;
      case O_URL:  /* anything but a string: "required" below */
        if (lua_type(L, -1) == LUA_TSTRING)
          o->url = lua_tolstring(L, -1, url_len);
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
      case O_CA_FILE: o->ca_file = val_string(L, k, NULL); break;
      case O_FOLLOW_REDIRECTS: o->follow = val_bool(L, k); break;
      case O_MAX_REDIRECTS: o->max_redirects = (long)val_int(L, k, 0); break;
      case O_HTTP_VERSION: version = val_string(L, k, NULL); break;
      case O_HTTP2_PRIOR_KNOWLEDGE: o->h2c = val_bool(L, k); break;
      case O_CHECK_STATUS: o->check_status = val_bool(L, k); break;
      case O_MAX_BODY_BYTES: max_body = val_int(L, k, 1); break;
    }
    lua_settop(L, S_NFIXED + 1);  /* keep the key */
  }
  if (!o->url)
    luaL_error(L, "lash.http.request: option 'url' (a string) is required");
  o->version = parse_version(L, version, o->h2c);
  o->max_body = (size_t)max_body;
  o->streaming = lua_isfunction(L, S_ONCHUNK);
}

/* headers = { Name = "value", ... } (at S_HEADERS). Values may not
** contain CR, LF or NUL (header injection). An empty value is sent as an
** empty header. */
static void set_headers(lua_State *L, http_op *op) {
  if (!lua_istable(L, S_HEADERS)) return;
  lua_pushnil(L);
  while (lua_next(L, S_HEADERS) != 0) {
    size_t nl, vl, i;
    const char *name, *value;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "lash.http.request: header names must be strings, "
                 "got %s", luaL_typename(L, -2));
    name = lua_tolstring(L, -2, &nl);
    if (!lash_http_is_token(name, nl))
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
    if (vl == 0) lua_pushfstring(L, "%s;", name);
    else lua_pushfstring(L, "%s: %s", name, value);
    if (lash_http_req_header(&op->req, lua_tostring(L, -1)) != 0)
      luaL_error(L, "lash.http.request: out of memory");
    lua_pop(L, 2);
  }
}

/* Read the options, check the URL (its shown form goes to S_URL) and
** start the transfer. */
static void start(lua_State *L, http_op *op) {
  lash_http_opts o;
  size_t url_len, method_len, shown_len;
  const char *shown, *why;
  int rc;
  read_opts(L, &o, &url_len, &method_len);
  if (strlen(o.url) != url_len)
    luaL_error(L, "lash.http.request: option 'url' contains a NUL byte");
  rc = lash_http_check_url(op->req.http, o.url, url_len, &shown, &shown_len,
                           &why);
  if (rc == -2) luaL_error(L, "lash.http.request: out of memory");
  if (rc != 0)
    luaL_error(L, "lash.http.request: option 'url' must be an absolute "
               "http:// or https:// URL%s%s", why ? ": " : "", why ? why : "");
  lua_pushlstring(L, shown, shown_len);
  lua_replace(L, S_URL);
  if (o.method && !lash_http_is_token(o.method, method_len))
    luaL_error(L, "lash.http.request: invalid method '%s' (an HTTP token "
               "such as GET, POST or PATCH: no spaces)", o.method);
  set_headers(L, op);
  rc = lash_http_start(&op->req, &o);
  if (rc != 0) {
    lash_http_req_release(&op->req);
    luaL_error(L, rc == -1 ? "lash.http.request: out of memory"
                           : "lash.http.request: cannot start the transfer");
  }
}

/* ---- results and errors -------------------------------------------------- */

/* Raise the failure of a finished (or aborted) transfer. The op is
** released first so nothing waits on the garbage collector. */
static int raise_failure(lua_State *L, lash_http_req *r) {
  const char *url = lua_tostring(L, S_URL), *kind;
  int retryable;
  CURLcode rc = r->rc;
  switch (r->abort) {
    case LASH_HTTP_ABORT_TOO_LARGE:
      lua_pushfstring(L, "%s: response body is larger than max_body_bytes "
                      "(%I bytes); raise max_body_bytes if this is expected",
                      url, (lua_Integer)r->max_body);
      kind = "http";
      retryable = 0;
      break;
    case LASH_HTTP_ABORT_HEADERS_TOO_LARGE:
      lua_pushfstring(L, "%s: response headers are larger than %d bytes",
                      url, (int)LASH_HTTP_MAX_HEADER_BYTES);
      kind = "http";
      retryable = 0;
      break;
    case LASH_HTTP_ABORT_NOMEM:
      lua_pushfstring(L, "%s: out of memory while receiving the response",
                      url);
      kind = "http";
      retryable = 0;
      break;
    default:
      lash_http_classify(rc, &kind, &retryable);
      lua_pushfstring(L, "%s: %s", url,
                      r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
      break;
  }
  lash_http_req_release(r);
  lash_error_push(L, kind, lua_tostring(L, -1), retryable);
  lua_pushvalue(L, S_URL);
  lua_setfield(L, -2, "url");
  lua_pushinteger(L, (lua_Integer)rc);
  lua_setfield(L, -2, "curl_code");
  return lua_error(L);
}

/* Parse the header lines of the last response into a table: lower-case
** names, repeated headers joined with ", ". */
static void push_headers(lua_State *L, const lash_http_buf *h) {
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

static int finish(lua_State *L, lash_http_req *r) {
  long status;
  int top = lua_gettop(L);
  if (r->abort != LASH_HTTP_ABORT_NONE || r->rc != CURLE_OK)
    return raise_failure(L, r);
  status = lash_http_req_status(r);
  lua_pushinteger(L, status);                               /* top + 1 */
  push_headers(L, &r->head);                                /* top + 2 */
  if (r->streaming) lua_pushnil(L);                         /* top + 3 */
  else lua_pushlstring(L, r->body.p ? r->body.p : "", r->body.n);
  lash_http_req_release(r);
  if (r->check_status && status >= 400) {
    const char *url = lua_tostring(L, S_URL);
    lua_pushfstring(L, "%s: HTTP status %d", url, (int)status);
    lash_error_push(L, "status", lua_tostring(L, -1),
                    lash_http_status_retryable(status));
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
    lash_http_req_release(&op->req);   /* on_chunk failed: abort the transfer */
    return lua_error(L);
  }
  return pump(L, op);
}

static int wait_k(lua_State *L, int status, lua_KContext ctx) {
  http_op *op = (http_op *)ctx;
  if (op->w.cancelled) {
    lash_http_req_release(&op->req);
    lash_wait_check(L, &op->w);
  }
  /* LUA_OK: lash_wait_yield ran us in place from pump's loop. */
  if (status == LUA_OK) return PUMP_AGAIN;
  return pump(L, op);
}

static int pump(lua_State *L, http_op *op) {
  lash_http_req *r = &op->req;
  for (;;) {
    if (r->state == LASH_HTTP_CLOSED)
      return luaL_error(L, "lash.http.request: request was released while "
                        "in use");
    if (r->streaming && r->body.n > 0) {
      int status;
      lua_pushvalue(L, S_ONCHUNK);
      lua_pushlstring(L, r->body.p, r->body.n);
      lash_http_req_taken(r);
      status = lua_pcallk(L, 1, 0, 0, (lua_KContext)op, chunk_k);
      if (status != LUA_OK) {
        lash_http_req_release(r);
        return lua_error(L);
      }
      continue;
    }
    if (r->state == LASH_HTTP_DONE) return finish(L, r);
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
  lash_http *h = lua_touserdata(L, lua_upvalueindex(1));
  http_op *op;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  op = lua_newuserdatauv(L, sizeof *op, 0);           /* S_OP */
  memset(op, 0, sizeof *op);
  op->req.state = LASH_HTTP_CLOSED;    /* holds nothing until init */
  lash_wait_init(&op->w, op_cancel);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setmetatable(L, S_OP);
  lua_settop(L, S_NFIXED);               /* S_ONCHUNK .. S_URL: nil */
  if (h->closed)
    return luaL_error(L, "lash.http.request: the lash runtime is closed");
  {
    char why[320];
    if (lash_http_ready(h, why, sizeof why) != 0)
      return luaL_error(L, "lash.http.request: %s", why);
  }
  if (lash_http_req_init(&op->req, h, op_notify, op) != 0)
    return luaL_error(L, "lash.http.request: cannot create a curl handle");
  start(L, op);
  lua_settop(L, S_NFIXED);
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
