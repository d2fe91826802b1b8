/*
** modal_rpc.c: lash's Modal client: one gRPC channel to the control plane
** and one per task-command-router URL, Modal's call metadata, and unary
** calls with Modal's retry policy -- the transient codes (DEADLINE_EXCEEDED,
** UNAVAILABLE, CANCELLED, INTERNAL, UNKNOWN) retried 3 times with 0.1 s
** doubling to 1 s backoff under one x-idempotency-key (router calls: 10
** times from 10 ms), server-directed delays (RPCRetryPolicy / RetryInfo)
** honoured without counting as retries up to MODAL_MAX_THROTTLE_WAIT, a
** refused auth token or router JWT refreshed once. Also the auth-token
** fetch (the cache itself is modal_token.c's: this file fetches, queues the
** calls waiting for it and stores the result there) and the small caches a
** client keeps (sandbox records, app and image ids). Prefixes: see
** modal_rpc.h.
*/
#include "modal_rpc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "modal_token.h"

#ifndef LASH_VERSION
#define LASH_VERSION "0.0.0"
#endif

#define CONTROL_RETRIES 3
#define ROUTER_RETRIES 10
#define DEFAULT_ATTEMPT_TIMEOUT 60.0
#define TOKEN_ATTEMPT_TIMEOUT 5.0
#define TOKEN_TOTAL_TIMEOUT 15.0
/* The proto has no client type for C. lash behaves like the current JS SDK
** (router exec, V2 sandboxes by default, its RPC sequences), so it sends that
** SDK's type, CLIENT_TYPE_LIBMODAL_JS (8: "since modal-js v0.3.15"; 7 is the
** retired "before v0.3.15" one), and its client version 1.0.0, and names
** itself in x-modal-libmodal-version. */
#define CLIENT_TYPE "8"
#define CLIENT_VERSION "1.0.0"

typedef struct router_ch {
  struct router_ch *next;
  char *url;
  grpc_channel *ch;
} router_ch;

typedef struct cache_kv {
  struct cache_kv *next;
  char *k, *v;
} cache_kv;

struct modal_client {
  lash_loop *loop;
  modal_config cfg;
  grpc_channel *control;
  router_ch *routers;
  modal_token token;        /* the auth token's cache */
  modal_rpc token_fetch;    /* the in-flight AuthTokenGet */
  int token_fetching;
  modal_rpc *token_waiters; /* calls queued until it ends */
  modal_sbx *sbxs;
  cache_kv *cache;
  unsigned long rpcs;
  long dead_connects[2];   /* connections of channels already freed */
};

enum { RPC_IDLE, RPC_RUNNING, RPC_WAIT_TOKEN, RPC_WAIT_ACCESS, RPC_BACKOFF, RPC_DONE };

/* ---- client ------------------------------------------------------------------ */

modal_client *modal_client_new(lash_loop *loop, modal_config *cfg) {
  modal_client *cl = calloc(1, sizeof *cl);
  if (!cl) return NULL;
  cl->loop = loop;
  cl->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg);
  modal_token_init(&cl->token);
  modal_rpc_init(&cl->token_fetch, cl);
  return cl;
}

static void sbx_free(modal_sbx *s) {
  free(s->id);
  free(s->task_id);
  free(s->router_url);
  if (s->router_jwt) {
    memset(s->router_jwt, 0, strlen(s->router_jwt));
    free(s->router_jwt);
  }
  free(s->workdir);
  free(s);
}

void modal_client_free(modal_client *cl) {
  if (!cl) return;
  modal_rpc_cancel(&cl->token_fetch);
  cl->token_waiters = NULL;
  modal_token_free(&cl->token);
  grpc_channel_free(cl->control);
  while (cl->routers) {
    router_ch *r = cl->routers;
    cl->routers = r->next;
    grpc_channel_free(r->ch);
    free(r->url);
    free(r);
  }
  while (cl->sbxs) {
    modal_sbx *s = cl->sbxs;
    cl->sbxs = s->next;
    sbx_free(s);
  }
  while (cl->cache) {
    cache_kv *c = cl->cache;
    cl->cache = c->next;
    free(c->k);
    free(c->v);
    free(c);
  }
  modal_config_free(&cl->cfg);
  free(cl);
}

const modal_config *modal_client_config(const modal_client *cl) { return &cl->cfg; }
lash_loop *modal_client_loop(modal_client *cl) { return cl->loop; }
unsigned long modal_client_rpcs(const modal_client *cl) { return cl->rpcs; }

long modal_client_connects(const modal_client *cl, int router) {
  long n = cl->dead_connects[router ? 1 : 0];
  if (!router) return n + (cl->control ? grpc_channel_connects(cl->control) : 0);
  for (router_ch *r = cl->routers; r; r = r->next) n += grpc_channel_connects(r->ch);
  return n;
}

modal_sbx *modal_client_sbx(modal_client *cl, const char *id) {
  for (modal_sbx *s = cl->sbxs; s; s = s->next)
    if (!strcmp(s->id, id)) return s;
  modal_sbx *s = calloc(1, sizeof *s);
  if (!s || !(s->id = strdup(id))) { free(s); return NULL; }
  /* V1 ids are "sb-" and 22 base62 characters; anything else is V2 */
  size_t n = strlen(id);
  int v1 = n == 25 && !strncmp(id, "sb-", 3);
  for (size_t i = 3; v1 && i < n; i++) {
    char c = id[i];
    v1 = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  s->v2 = !v1;
  s->next = cl->sbxs;
  cl->sbxs = s;
  return s;
}

void modal_client_forget(modal_client *cl, const char *id) {
  for (modal_sbx **p = &cl->sbxs; *p; p = &(*p)->next)
    if (!strcmp((*p)->id, id)) {
      modal_sbx *s = *p;
      *p = s->next;
      sbx_free(s);
      return;
    }
}

const char *modal_client_cache_get(modal_client *cl, const char *key) {
  for (cache_kv *c = cl->cache; c; c = c->next)
    if (!strcmp(c->k, key)) return c->v;
  return NULL;
}

void modal_client_cache_put(modal_client *cl, const char *key, const char *val) {
  for (cache_kv *c = cl->cache; c; c = c->next)
    if (!strcmp(c->k, key)) {
      char *v = strdup(val);
      if (v) { free(c->v); c->v = v; }
      return;
    }
  cache_kv *c = calloc(1, sizeof *c);
  if (!c || !(c->k = strdup(key)) || !(c->v = strdup(val))) {
    if (c) { free(c->k); free(c); }
    return;
  }
  c->next = cl->cache;
  cl->cache = c;
}

static grpc_channel *control_channel(modal_client *cl, char *err, size_t errlen) {
  if (!cl->control) {
    grpc_channel_opts o = { .ca_file = cl->cfg.ca_file };
    cl->control = grpc_channel_new(cl->loop, cl->cfg.server_url, &o, err, errlen);
  }
  return cl->control;
}

static grpc_channel *router_channel(modal_client *cl, const char *url, char *err,
                                    size_t errlen) {
  for (router_ch *r = cl->routers; r; r = r->next)
    if (!strcmp(r->url, url)) return r->ch;
  if (strncmp(url, "https://", 8) && !modal_config_is_localhost(cl->cfg.server_url)) {
    snprintf(err, errlen, "Modal gave a task command router URL that is not https://");
    return NULL;
  }
  /* Modal's JS/Go SDKs: with a localhost control plane over plaintext the
  ** router is plaintext too, whatever its URL says (local fakes). */
  grpc_channel_opts o = { .ca_file = cl->cfg.ca_file };
  o.plaintext = !strncmp(cl->cfg.server_url, "http://", 7) &&
                modal_config_is_localhost(cl->cfg.server_url) && modal_config_is_localhost(url);
  router_ch *r = calloc(1, sizeof *r);
  if (!r || !(r->url = strdup(url))) { free(r); snprintf(err, errlen, "out of memory"); return NULL; }
  r->ch = grpc_channel_new(cl->loop, url, &o, err, errlen);
  if (!r->ch) { free(r->url); free(r); return NULL; }
  r->next = cl->routers;
  cl->routers = r;
  return r->ch;
}

/* ---- metadata -------------------------------------------------------------------- */

typedef struct hdrs {
  char *v[16];
  int n;
} hdrs;

static void hdr_add(hdrs *h, const char *fmt, const char *a, const char *b) {
  size_t n = strlen(fmt) + (a ? strlen(a) : 0) + (b ? strlen(b) : 0) + 1;
  char *s = malloc(n);
  if (!s || h->n >= 15) { free(s); return; }
  snprintf(s, n, fmt, a ? a : "", b ? b : "");
  h->v[h->n++] = s;
  h->v[h->n] = NULL;
}

static void hdrs_free(hdrs *h) {
  for (int i = 0; i < h->n; i++) {
    memset(h->v[i], 0, strlen(h->v[i]));   /* some hold secrets */
    free(h->v[i]);
  }
  h->n = 0;
}

/* Returns the channel and fills the metadata, or NULL with err. */
static grpc_channel *prepare(modal_client *cl, unsigned flags, modal_sbx *sbx,
                             const char *auth_token, hdrs *h, char *err,
                             size_t errlen) {
  h->n = 0;
  h->v[0] = NULL;
  if (flags & MODAL_RPC_ROUTER) {
    if (!sbx || !sbx->router_url || !sbx->router_jwt) {
      snprintf(err, errlen, "no task command router access for this sandbox yet");
      return NULL;
    }
    hdr_add(h, "authorization: Bearer %s%s", sbx->router_jwt, NULL);
    return router_channel(cl, sbx->router_url, err, errlen);
  }
  hdr_add(h, "x-modal-token-id: %s%s", cl->cfg.token_id, NULL);
  hdr_add(h, "x-modal-token-secret: %s%s", cl->cfg.token_secret, NULL);
  hdr_add(h, "x-modal-client-type: %s%s", CLIENT_TYPE, NULL);
  hdr_add(h, "x-modal-client-version: %s%s", CLIENT_VERSION, NULL);
  hdr_add(h, "x-modal-libmodal-version: lash/%s%s", LASH_VERSION, NULL);
  if (auth_token) hdr_add(h, "x-modal-auth-token: %s%s", auth_token, NULL);
  return control_channel(cl, err, errlen);
}

static void path_of(unsigned flags, const char *method, char *out, size_t n) {
  snprintf(out, n, "/%s/%s", flags & MODAL_RPC_ROUTER
           ? "modal.task_command_router.TaskCommandRouter" : "modal.client.ModalClient",
           method);
}

/* ---- unary calls ---------------------------------------------------------------- */

int modal_rpc_transient(int code) {
  return code == GRPC_DEADLINE_EXCEEDED || code == GRPC_UNAVAILABLE ||
         code == GRPC_CANCELLED || code == GRPC_INTERNAL || code == GRPC_UNKNOWN;
}

static void attempt(modal_rpc *r);
static void fail(modal_rpc *r, int code, const char *msg, double retry_after,
                 int transport);
static const char *token_get(modal_client *cl, modal_rpc *r);

static void finish(modal_rpc *r, int code, const char *msg, int transport) {
  r->code = code;
  r->transport = transport;
  snprintf(r->message, sizeof r->message, "%s", msg ? msg : "");
  r->state = RPC_DONE;
  pb_buf_free(&r->req);
  if (r->done) r->done(r);
}

static void on_timer(lash_loop *loop, lash_timer *t) {
  modal_rpc *r = t->data;
  (void)loop;
  if (r->state == RPC_BACKOFF) attempt(r);
  else if (r->state == RPC_RUNNING && !r->call)   /* a start failure, reported async */
    fail(r, r->code, r->message, -1, 1);
}

static int on_msg(void *ud, const uint8_t *m, size_t n) {
  modal_rpc *r = ud;
  pb_err e;
  if (r->resp) {          /* unary: one message only */
    r->resp = NULL;
    snprintf(r->message, sizeof r->message, "%s: more than one response message", r->method);
    return 1;
  }
  if (!r->arena && !(r->arena = pb_arena_new())) return 1;
  void *msg = pb_arena_alloc(r->arena, r->resp_desc->size);
  if (!msg || pb_decode(r->resp_desc, msg, m, n, r->arena, &e) < 0) {
    snprintf(r->message, sizeof r->message, "%s: undecodable response (%s)", r->method,
             msg ? e.msg : "out of memory");
    return 1;
  }
  r->resp = msg;
  return 0;
}

static void access_done(modal_rpc *sub);

/* Ask the control plane for fresh router access (the router refused the
** JWT): V1 TaskGetCommandRouterAccess, V2 SandboxGetCommandRouterAccess. */
static int refresh_access(modal_rpc *r) {
  modal_sbx *s = r->sbx;
  modal_rpc *sub = malloc(sizeof *sub);
  if (!sub) return -1;
  modal_rpc_init(sub, r->cl);
  sub->done = access_done;
  sub->ud = r;
  sub->timeout = 30;
  int rc;
  if (s->v2) {
    modal_SandboxGetCommandRouterAccessRequest req = { .has_sandbox_id = true,
                                                       .sandbox_id = pb_cstr(s->id) };
    sub->method = "SandboxGetCommandRouterAccess";
    sub->flags = MODAL_RPC_V2;
    sub->resp_desc = &modal_SandboxGetCommandRouterAccessResponse_desc;
    rc = modal_rpc_start(sub, &modal_SandboxGetCommandRouterAccessRequest_desc, &req);
  } else {
    modal_TaskGetCommandRouterAccessRequest req = { pb_cstr(s->task_id) };
    sub->method = "TaskGetCommandRouterAccess";
    sub->resp_desc = &modal_TaskGetCommandRouterAccessResponse_desc;
    rc = modal_rpc_start(sub, &modal_TaskGetCommandRouterAccessRequest_desc, &req);
  }
  if (rc < 0) { free(sub); return -1; }
  r->sub = sub;
  r->state = RPC_WAIT_ACCESS;
  return 0;
}

static void set_access(modal_sbx *s, pb_str jwt, pb_str url) {
  char *j = strndup(jwt.p, jwt.n), *u = strndup(url.p, url.n);
  if (!j || !u) { free(j); free(u); return; }
  if (s->router_jwt) { memset(s->router_jwt, 0, strlen(s->router_jwt)); free(s->router_jwt); }
  free(s->router_url);
  s->router_jwt = j;
  s->router_url = u;
}

static void access_done(modal_rpc *sub) {
  modal_rpc *r = sub->ud;
  int code = sub->code;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", sub->message);
  if (code == GRPC_OK && sub->resp) {
    /* both responses are {jwt = 1, url = 2} */
    const modal_TaskGetCommandRouterAccessResponse *a = sub->resp;
    set_access(r->sbx, a->jwt, a->url);
  }
  modal_rpc_clear(sub);
  free(sub);
  r->sub = NULL;
  if (code == GRPC_OK) attempt(r);
  else if (code == GRPC_NOT_FOUND || code == GRPC_FAILED_PRECONDITION)
    finish(r, GRPC_NOT_FOUND, msg, 0);   /* the sandbox has finished */
  else finish(r, code, msg, 0);
}

static void schedule(modal_rpc *r, double delay) {
  r->state = RPC_BACKOFF;
  lash_timer_start(r->cl->loop, &r->timer, (uint64_t)(delay * 1e9), on_timer, r);
}

static void fail(modal_rpc *r, int code, const char *msg, double retry_after,
                 int transport) {
  const modal_config *cfg = &r->cl->cfg;
  double now = modal_now();
  int router = (r->flags & MODAL_RPC_ROUTER) != 0;
  if (code == GRPC_UNAUTHENTICATED && !r->auth_retried) {
    r->auth_retried = 1;
    if (r->flags & MODAL_RPC_V2) {        /* the auth token expired under us */
      modal_token_invalidate(&r->cl->token, r->cl->token.jwt);
      attempt(r);
      return;
    }
    if (router && r->sbx && refresh_access(r) == 0) return;
  }
  if (r->flags & MODAL_RPC_NORETRY) { finish(r, code, msg, transport); return; }
  if (retry_after >= 0 && cfg->max_throttle_wait != 0) {
    double d = retry_after < 0.1 ? 0.1 : retry_after;
    if ((cfg->max_throttle_wait < 0 || r->throttle_waited + d <= cfg->max_throttle_wait) &&
        (!r->deadline || now + d < r->deadline)) {
      r->throttles++;
      r->throttle_waited += d;
      schedule(r, d);
      return;
    }
  }
  if (modal_rpc_transient(code)) {
    int max = router ? ROUTER_RETRIES : CONTROL_RETRIES;
    double d;
    if (r->flags & MODAL_RPC_LONGPOLL) d = 1.0;
    else if (router) d = 0.01 * pow(2, r->attempt);
    else d = fmin(0.1 * pow(2, r->attempt), 1.0);
    if (((r->flags & MODAL_RPC_LONGPOLL) || r->attempt < max) &&
        (!r->deadline || now + d < r->deadline)) {
      r->attempt++;
      schedule(r, d);
      return;
    }
  }
  finish(r, code, msg, transport);
}

/* The server's retry hint: Modal's own modal.client.RPCRetryPolicy, or the
** standard google.rpc.RetryInfo; the last one in the details wins. */
double modal_rpc_retry_after(const grpc_status *st) {
  double ra = -1, secs;
  for (size_t i = 0; i < st->ndetails; i++) {
    const grpc_any *d = &st->details[i];
    if (grpc_any_is(d, "modal.client.RPCRetryPolicy")) {
      modal_RPCRetryPolicy pol;
      pb_err e;
      pb_arena *a = pb_arena_new();
      if (a && pb_decode(&modal_RPCRetryPolicy_desc, &pol, (const uint8_t *)d->value.p,
                         d->value.n, a, &e) == 0 &&
          isfinite(pol.retry_after_secs) && pol.retry_after_secs >= 0)
        ra = pol.retry_after_secs;
      pb_arena_free(a);
    } else if (grpc_retry_info(d, &secs) == 0) {
      ra = secs;
    }
  }
  return ra;
}

static void on_done(void *ud, const grpc_status *st) {
  modal_rpc *r = ud;
  r->call = NULL;
  if (st->code == GRPC_OK) {
    if (!r->resp) {
      fail(r, GRPC_INTERNAL, r->message[0] ? r->message : "no response message",
           -1, 0);
      return;
    }
    finish(r, GRPC_OK, "", 0);
    return;
  }
  if (r->arena) { pb_arena_free(r->arena); r->arena = NULL; }
  r->resp = NULL;
  fail(r, st->code, st->message, modal_rpc_retry_after(st), st->transport);
}

static void attempt(modal_rpc *r) {
  modal_client *cl = r->cl;
  const char *tok = NULL;
  char err[256], path[160], extra[3][80];
  hdrs h;
  r->state = RPC_RUNNING;
  r->resp = NULL;
  if (r->arena) { pb_arena_free(r->arena); r->arena = NULL; }
  if (r->flags & MODAL_RPC_V2) {
    tok = token_get(cl, r);
    if (!tok) { r->state = RPC_WAIT_TOKEN; return; }
  } else if (!(r->flags & MODAL_RPC_ROUTER) && strcmp(r->method, "AuthTokenGet")) {
    /* send the token along when there is a valid one, as the SDKs do */
    tok = modal_token_valid(&cl->token, modal_now());
  }
  grpc_channel *ch = prepare(cl, r->flags, r->sbx, tok, &h, err, sizeof err);
  if (!ch) {
    hdrs_free(&h);
    finish(r, -1, err, 1);
    return;
  }
  if (!(r->flags & MODAL_RPC_ROUTER)) {
    double now = modal_now();
    snprintf(extra[0], sizeof extra[0], "x-idempotency-key: %s", r->idem);
    snprintf(extra[1], sizeof extra[1], "x-retry-attempt: %d", r->attempt);
    hdr_add(&h, "%s%s", extra[0], NULL);
    hdr_add(&h, "%s%s", extra[1], NULL);
    if (r->attempt > 0 || r->throttles > 0) {
      snprintf(extra[2], sizeof extra[2], "x-retry-delay: %.3f", now - r->t0);
      hdr_add(&h, "%s%s", extra[2], NULL);
    }
    if (r->throttles > 0) {
      snprintf(extra[2], sizeof extra[2], "x-throttle-retry-attempt: %d", r->throttles);
      hdr_add(&h, "%s%s", extra[2], NULL);
    }
  }
  double timeout = r->timeout > 0 ? r->timeout : DEFAULT_ATTEMPT_TIMEOUT;
  if (r->deadline) {
    double left = r->deadline - modal_now();
    if (left <= 0.001) {
      hdrs_free(&h);
      finish(r, GRPC_DEADLINE_EXCEEDED, "deadline exceeded before the call", 0);
      return;
    }
    if (left < timeout) timeout = left;
  }
  path_of(r->flags, r->method, path, sizeof path);
  grpc_call_opts o = { (const char *const *)h.v, timeout };
  r->message[0] = 0;
  cl->rpcs++;
  r->call = grpc_call_start(ch, path, r->req.p, r->req.n, &o, on_msg, on_done, r,
                            err, sizeof err);
  hdrs_free(&h);
  if (!r->call) {
    /* report from the loop, never from inside the caller */
    r->code = GRPC_UNAVAILABLE;
    snprintf(r->message, sizeof r->message, "%s", err);
    lash_timer_start(cl->loop, &r->timer, 0, on_timer, r);
  }
}

void modal_rpc_init(modal_rpc *r, modal_client *cl) {
  memset(r, 0, sizeof *r);
  lash_timer_init(&r->timer);
  r->cl = cl;
}

int modal_rpc_start(modal_rpc *r, const pb_msgdesc *req_desc, const void *req) {
  pb_err e;
  modal_rpc_cancel(r);
  pb_buf_init(&r->req);
  if (pb_encode(req_desc, req, &r->req, &e) < 0) {
    r->code = -1;
    snprintf(r->message, sizeof r->message, "%s: %s", r->method, e.msg);
    pb_buf_free(&r->req);
    return -1;
  }
  r->attempt = r->throttles = r->auth_retried = 0;
  r->throttle_waited = 0;
  r->t0 = modal_now();
  r->code = 0;
  r->transport = 0;
  r->message[0] = 0;
  modal_rpc_uuid4(r->idem);
  attempt(r);
  return 0;
}

static void unlink_waiter(modal_rpc **list, modal_rpc *r) {
  for (modal_rpc **p = list; *p; p = &(*p)->next_waiter)
    if (*p == r) {
      *p = r->next_waiter;
      r->next_waiter = NULL;
      return;
    }
}

void modal_rpc_clear(modal_rpc *r) {
  if (r->arena) pb_arena_free(r->arena);
  r->arena = NULL;
  r->resp = NULL;
  pb_buf_free(&r->req);
  r->state = RPC_IDLE;
}

void modal_rpc_cancel(modal_rpc *r) {
  if (r->call) grpc_call_cancel(r->call);
  r->call = NULL;
  if (r->cl) {
    lash_timer_stop(r->cl->loop, &r->timer);
    if (r->state == RPC_WAIT_TOKEN) unlink_waiter(&r->cl->token_waiters, r);
  }
  if (r->sub) {
    modal_rpc_cancel(r->sub);
    free(r->sub);
    r->sub = NULL;
  }
  modal_rpc_clear(r);
}

/* ---- the auth token ------------------------------------------------------------ */

/* The token fetch ended: go on with (or fail) every call queued on it. */
static void resume(modal_rpc *r, int code, const char *message) {
  if (code == GRPC_OK) attempt(r);
  else if (code == GRPC_UNAUTHENTICATED || code == GRPC_PERMISSION_DENIED)
    finish(r, code, message, 0);   /* AuthTokenGet refused the credentials */
  else fail(r, code, message, -1, 0);
}

static void token_fetched(modal_rpc *r) {
  modal_client *cl = r->ud;
  double now = modal_now();
  int code = r->code;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", r->message);
  cl->token_fetching = 0;
  if (code == GRPC_OK) {
    const modal_AuthTokenGetResponse *resp = r->resp;
    if (!resp || resp->token.n == 0) {
      code = GRPC_INTERNAL;
      snprintf(msg, sizeof msg, "AuthTokenGet returned no token");
    } else if (modal_token_store(&cl->token, resp->token.p, resp->token.n, now) != 0) {
      code = GRPC_RESOURCE_EXHAUSTED;
      snprintf(msg, sizeof msg, "out of memory keeping the auth token");
    }
  }
  if (code != GRPC_OK) modal_token_failed(&cl->token, now);
  modal_rpc_clear(r);
  /* resume everyone queued, in order */
  modal_rpc *w = cl->token_waiters;
  cl->token_waiters = NULL;
  while (w) {
    modal_rpc *next = w->next_waiter;
    w->next_waiter = NULL;
    resume(w, code, code == GRPC_OK ? NULL : msg);
    w = next;
  }
}

static void token_fetch(modal_client *cl) {
  modal_AuthTokenGetRequest req = { 0 };
  modal_rpc *r = &cl->token_fetch;
  modal_rpc_cancel(r);
  r->cl = cl;
  r->method = "AuthTokenGet";
  /* retried only when there is no token to fall back on */
  r->flags = cl->token.jwt ? MODAL_RPC_NORETRY : 0;
  r->resp_desc = &modal_AuthTokenGetResponse_desc;
  r->timeout = TOKEN_ATTEMPT_TIMEOUT;
  r->deadline = modal_now() + TOKEN_TOTAL_TIMEOUT;
  r->done = token_fetched;
  r->ud = cl;
  cl->token_fetching = 1;
  if (modal_rpc_start(r, &modal_AuthTokenGetRequest_desc, &req) < 0) {
    cl->token_fetching = 0;
    /* only an encoding failure gets here, impossible for an empty message */
  }
}

/* The current token if usable now (and kick a background refresh when
** due), else NULL: then r is queued and resumed when a token arrives or
** the fetch fails. */
static const char *token_get(modal_client *cl, modal_rpc *r) {
  double now = modal_now();
  const char *jwt = modal_token_valid(&cl->token, now);
  if (jwt) {
    if (!cl->token_fetching && modal_token_refresh_due(&cl->token, now))
      token_fetch(cl);
    return jwt;
  }
  r->next_waiter = NULL;
  modal_rpc **tail = &cl->token_waiters;
  while (*tail) tail = &(*tail)->next_waiter;
  *tail = r;
  if (!cl->token_fetching) token_fetch(cl);
  return NULL;
}

/* ---- helpers -------------------------------------------------------------------- */

void modal_rpc_uuid4(char out[37]) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = getrandom(b + got, sizeof b - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      /* no entropy source: fall back to time and address bits (an
      ** idempotency key only needs to be unique, not secret) */
      uint64_t x = lash_now_ns() ^ (uint64_t)(uintptr_t)out;
      for (size_t i = got; i < sizeof b; i++) { x = x * 6364136223846793005ULL + 1; b[i] = (unsigned char)(x >> 56); }
      break;
    }
    got += (size_t)r;
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
           b[12], b[13], b[14], b[15]);
}

/* ---- streams -------------------------------------------------------------------- */

grpc_call *modal_rpc_stream_start(modal_client *cl, const char *method,
                                  unsigned flags, modal_sbx *sbx,
                                  const pb_msgdesc *req_desc, const void *req,
                                  double timeout, grpc_msg_cb on_msg_cb,
                                  grpc_done_cb on_done_cb, void *ud, char *err,
                                  size_t errlen) {
  pb_buf b;
  pb_err e;
  hdrs h;
  char path[160], idem[37], idh[64];
  const char *tok = NULL;
  if (!(flags & MODAL_RPC_ROUTER)) tok = modal_token_valid(&cl->token, modal_now());
  grpc_channel *ch = prepare(cl, flags, sbx, tok, &h, err, errlen);
  if (!ch) { hdrs_free(&h); return NULL; }
  if (!(flags & MODAL_RPC_ROUTER)) {
    modal_rpc_uuid4(idem);
    snprintf(idh, sizeof idh, "x-idempotency-key: %s", idem);
    hdr_add(&h, "%s%s", idh, NULL);
    hdr_add(&h, "%s%s", "x-retry-attempt: 0", NULL);
  }
  pb_buf_init(&b);
  if (pb_encode(req_desc, req, &b, &e) < 0) {
    snprintf(err, errlen, "%s: %s", method, e.msg);
    hdrs_free(&h);
    pb_buf_free(&b);
    return NULL;
  }
  path_of(flags, method, path, sizeof path);
  grpc_call_opts o = { (const char *const *)h.v, timeout };
  cl->rpcs++;
  grpc_call *c = grpc_call_start(ch, path, b.p, b.n, &o, on_msg_cb, on_done_cb, ud, err, errlen);
  hdrs_free(&h);
  pb_buf_free(&b);
  return c;
}
