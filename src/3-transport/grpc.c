/*
** grpc.c: gRPC over libcurl HTTP/2 on lash's loop (see grpc.h; prefix
** grpc_). This file owns channels (a target URL, TLS settings, a pool of
** easy handles and a TLS-session share), calls (request framing,
** header/trailer parsing, message reassembly, status mapping) and the
** parsing of grpc-status-details-bin (google.rpc.Status, its
** google.rpc.RetryInfo retry hint). Nothing here knows a service: a
** server's own details reach the caller as type URL and bytes (Modal's
** retry policy: modal_rpc.c).
*/
#include "grpc.h"
#include "base64.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#ifndef LASH_VERSION
#define LASH_VERSION "0.0.0"
#endif

#define POOL_MAX 32
#define MAX_HEADER_BYTES (64 * 1024)
#define MAX_DETAILS_B64 (64 * 1024)
#define DEFAULT_MAX_RECV ((size_t)100 << 20)
static const char *const code_names[] = {
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
  "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
  "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"
};

const char *grpc_code_name(int code) {
  if (code == GRPC_LOCAL_TLS) return "TLS_VERIFY";
  if (code < 0 || code > GRPC_UNAUTHENTICATED) return "UNKNOWN";
  return code_names[code];
}

/* ---- message reassembly ------------------------------------------------ */

void grpc_reader_init(grpc_reader *r, size_t max) {
  memset(r, 0, sizeof *r);
  pb_buf_init(&r->buf);
  r->max = max ? max : DEFAULT_MAX_RECV;
}

void grpc_reader_free(grpc_reader *r) {
  pb_buf_free(&r->buf);
  r->off = 0;
}

size_t grpc_reader_pending(const grpc_reader *r) { return r->buf.n - r->off; }

/* Check a 5-byte prefix; returns 0 and the length, or -code. */
static int frame_header(const grpc_reader *r, const uint8_t *h, size_t *len,
                        char *err, size_t errlen) {
  uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 |
               (uint32_t)h[3] << 8 | h[4];
  if (h[0] == 1) {
    snprintf(err, errlen, "server sent a compressed message, but lash "
             "accepts only identity encoding");
    return -GRPC_INTERNAL;
  }
  if (h[0] != 0) {
    snprintf(err, errlen, "invalid gRPC frame flags 0x%02x", h[0]);
    return -GRPC_INTERNAL;
  }
  if (n > r->max) {
    snprintf(err, errlen, "received message of %lu bytes, larger than the "
             "limit of %zu", (unsigned long)n, r->max);
    return -GRPC_RESOURCE_EXHAUSTED;
  }
  *len = n;
  return 0;
}

int grpc_reader_feed(grpc_reader *r, const uint8_t *p, size_t n,
                     grpc_msg_cb cb, void *ud, char *err, size_t errlen) {
  size_t len;
  int rc;
  /* Fast path: nothing buffered, deliver whole frames straight from p. */
  while (grpc_reader_pending(r) == 0 && n >= 5) {
    if ((rc = frame_header(r, p, &len, err, errlen)) < 0) return rc;
    if (n - 5 < len) break;
    r->nmsgs++;
    if (cb && cb(ud, p + 5, len)) return 1;
    p += 5 + len;
    n -= 5 + len;
  }
  if (n == 0) return 0;
  if (r->off > 0 && r->off == r->buf.n) r->off = r->buf.n = 0;
  pb_buf_append(&r->buf, p, n);
  if (r->buf.oom) {
    snprintf(err, errlen, "out of memory buffering a response message");
    return -GRPC_RESOURCE_EXHAUSTED;
  }
  for (;;) {
    size_t have = r->buf.n - r->off;
    const uint8_t *q = r->buf.p + r->off;
    if (have < 5) break;
    if ((rc = frame_header(r, q, &len, err, errlen)) < 0) return rc;
    if (have - 5 < len) break;
    r->off += 5 + len;
    r->nmsgs++;
    if (cb && cb(ud, q + 5, len)) return 1;
  }
  /* compact once the consumed prefix dominates */
  if (r->off > 0 && r->off >= r->buf.n / 2) {
    memmove(r->buf.p, r->buf.p + r->off, r->buf.n - r->off);
    r->buf.n -= r->off;
    r->off = 0;
  }
  return 0;
}

/* ---- grpc-message and grpc-status-details-bin --------------------------- */

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

void grpc_percent_decode(const char *in, size_t n, char *out, size_t outlen) {
  size_t o = 0;
  if (outlen == 0) return;
  for (size_t i = 0; i < n && o + 1 < outlen; i++) {
    int h, l;
    if (in[i] == '%' && i + 2 < n && (h = hexval((unsigned char)in[i + 1])) >= 0 &&
        (l = hexval((unsigned char)in[i + 2])) >= 0) {
      out[o++] = (char)(h << 4 | l);
      i += 2;
    } else {
      out[o++] = in[i];
    }
  }
  out[o] = 0;
}

/* google.rpc.RetryInfo { google.protobuf.Duration retry_delay = 1; } */
typedef struct duration { int64_t seconds; int32_t nanos; } duration;
typedef struct retry_info { const duration *retry_delay; } retry_info;
static const pb_field duration_f[] = {
  PB_F(duration, 1, seconds, PB_INT64),
  PB_F(duration, 2, nanos, PB_INT32),
};
static const pb_msgdesc duration_desc =
  PB_DESC(duration, "google.protobuf.Duration", duration_f, 0);
static const pb_field retry_info_f[] = {
  PB_MSGF(retry_info, 1, retry_delay, &duration_desc),
};
static const pb_msgdesc retry_info_desc =
  PB_DESC(retry_info, "google.rpc.RetryInfo", retry_info_f, 0);

/* google.protobuf.Any { string type_url = 1; bytes value = 2; } and
** google.rpc.Status { int32 code = 1; string message = 2;
**                     repeated google.protobuf.Any details = 3; } */
static const pb_field any_f[] = {
  PB_F(grpc_any, 1, type_url, PB_STRING),
  PB_F(grpc_any, 2, value, PB_BYTES),
};
static const pb_msgdesc any_desc = PB_DESC(grpc_any, "google.protobuf.Any", any_f, 0);
static const pb_field details_f[] = {
  PB_F(grpc_details, 1, code, PB_INT32),
  PB_F(grpc_details, 2, message, PB_STRING),
  PB_REPMSG(grpc_details, 3, details, &any_desc),
};
static const pb_msgdesc details_desc =
  PB_DESC(grpc_details, "google.rpc.Status", details_f, 0);

int grpc_any_is(const grpc_any *d, const char *type) {
  size_t k = strlen(type);
  const pb_str *s = &d->type_url;
  return s->n > k && s->p[s->n - k - 1] == '/' &&
         memcmp(s->p + s->n - k, type, k) == 0;
}

int grpc_retry_info(const grpc_any *d, double *secs) {
  retry_info ri;
  pb_err err;
  int rc = -1;
  pb_arena *a;
  if (!grpc_any_is(d, "google.rpc.RetryInfo") || !(a = pb_arena_new())) return -1;
  if (pb_decode(&retry_info_desc, &ri, (const uint8_t *)d->value.p, d->value.n,
                a, &err) == 0 && ri.retry_delay &&
      ri.retry_delay->seconds >= 0 && ri.retry_delay->seconds < 86400 * 365 &&
      ri.retry_delay->nanos >= 0 && ri.retry_delay->nanos < 1000000000) {
    *secs = (double)ri.retry_delay->seconds + ri.retry_delay->nanos / 1e9;
    rc = 0;
  }
  pb_arena_free(a);
  return rc;
}

int grpc_parse_details(const char *b64, size_t n, pb_arena *a,
                       grpc_details *out) {
  pb_err err;
  uint8_t *raw;
  long len;
  int rc = -1;
  memset(out, 0, sizeof *out);
  if (n > MAX_DETAILS_B64 || !(raw = malloc(n / 4 * 3 + 4))) return -1;
  len = lash_base64_decode(b64, n, raw, n / 4 * 3 + 4, 0);
  /* strings are copied into the arena: raw can go at once */
  if (len >= 0 && pb_decode(&details_desc, out, raw, (size_t)len, a, &err) == 0)
    rc = 0;
  else
    memset(out, 0, sizeof *out);
  free(raw);
  return rc;
}

/* ---- channels ------------------------------------------------------------ */

struct grpc_channel {
  lash_loop *loop;
  char *url;               /* without a trailing slash */
  int plaintext, insecure;
  char *ca_file;
  long connect_ms;
  size_t max_recv;
  CURLSH *share;
  CURL *pool[POOL_MAX];
  int npool;
  long connects;
  grpc_call *calls;        /* live calls */
};

struct grpc_call {
  grpc_channel *ch;
  grpc_call *prev, *next;
  CURL *easy;
  struct curl_slist *hdrs;
  pb_buf req;              /* framed request */
  grpc_reader rd;
  grpc_msg_cb on_msg;
  grpc_done_cb on_done;
  void *ud;
  int running;
  int in_cb;               /* inside a libcurl callback of this call */
  int cancelled;           /* cancelled from inside on_msg */
  int stopped;             /* on_msg asked to stop */
  /* header state */
  size_t head_bytes;
  int have_status;
  int status;
  char *message;
  char *details;
  size_t details_n;
  int ctype_ok, saw_ctype;
  /* local failure that aborted the transfer */
  int local_code;
  char local_msg[256];
  double timeout;
  char errbuf[CURL_ERROR_SIZE];
};

grpc_channel *grpc_channel_new(lash_loop *loop, const char *url,
                               const grpc_channel_opts *opts, char *err,
                               size_t errlen) {
  grpc_channel_opts none = { 0 };
  if (!opts) opts = &none;
  int https = strncasecmp(url, "https://", 8) == 0;
  if (!https && strncasecmp(url, "http://", 7) != 0) {
    snprintf(err, errlen, "gRPC target must be an http:// or https:// URL");
    return NULL;
  }
  const char *hostpart = url + (https ? 8 : 7);
  if (!*hostpart || strchr(hostpart, '/') || strchr(hostpart, '?') ||
      strchr(hostpart, '@')) {
    snprintf(err, errlen, "gRPC target must be scheme://host[:port] with no "
             "path, query or user info");
    return NULL;
  }
  grpc_channel *ch = calloc(1, sizeof *ch);
  if (!ch) goto oom;
  ch->loop = loop;
  if (https && opts->plaintext) {
    /* plaintext to an https:// URL: the scheme must say so too, or
    ** libcurl would still start TLS */
    size_t n = strlen(hostpart) + 8;
    ch->url = malloc(n);
    if (ch->url) snprintf(ch->url, n, "http://%s", hostpart);
  } else {
    ch->url = strdup(url);
  }
  ch->ca_file = opts->ca_file ? strdup(opts->ca_file) : NULL;
  if (!ch->url || (opts->ca_file && !ch->ca_file)) goto oom;
  ch->plaintext = !https || opts->plaintext;
  ch->insecure = opts->insecure;
  ch->connect_ms = (long)ceil((opts->connect_timeout > 0 ? opts->connect_timeout : 10) * 1000);
  ch->max_recv = opts->max_recv ? opts->max_recv : DEFAULT_MAX_RECV;
  if (lash_curl_ready(loop, err, errlen) != 0) {
    free(ch->url);
    free(ch->ca_file);
    free(ch);
    return NULL;
  }
  ch->share = curl_share_init();
  if (!ch->share) goto oom;
  curl_share_setopt(ch->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return ch;
oom:
  if (ch) {
    free(ch->url);
    free(ch->ca_file);
    free(ch);
  }
  snprintf(err, errlen, "out of memory creating a gRPC channel");
  return NULL;
}

const char *grpc_channel_url(const grpc_channel *ch) { return ch->url; }
long grpc_channel_connects(const grpc_channel *ch) { return ch->connects; }

static void call_free(grpc_call *c);

void grpc_channel_free(grpc_channel *ch) {
  if (!ch) return;
  while (ch->calls) grpc_call_cancel(ch->calls);
  while (ch->npool > 0) curl_easy_cleanup(ch->pool[--ch->npool]);
  if (ch->share) curl_share_cleanup(ch->share);
  free(ch->url);
  free(ch->ca_file);
  free(ch);
}

/* libcurl before 8.0 breaks a reused h2c prior-knowledge connection
** ("Error in the HTTP2 framing layer", curl issue #10634, fixed by curl PR
** #10643 in 8.0.0; Debian 12 ships 7.88.1). There every plaintext call gets
** a fresh connection; TLS connections are reused and multiplexed. */
static int h2c_reuse_broken(void) {
  const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
  return v->version_num < 0x080000;
}

static CURL *easy_get(grpc_channel *ch) {
  if (ch->npool > 0) return ch->pool[--ch->npool];
  return curl_easy_init();
}

static void easy_put(grpc_channel *ch, CURL *e) {
  if (ch->npool < POOL_MAX) {
    curl_easy_reset(e);
    ch->pool[ch->npool++] = e;
  } else {
    curl_easy_cleanup(e);
  }
}

/* ---- calls ------------------------------------------------------------------ */

static void call_free(grpc_call *c) {
  grpc_channel *ch = c->ch;
  if (c->easy) {
    if (c->running) lash_curl_remove(ch->loop, c->easy);
    easy_put(ch, c->easy);
  }
  if (c->prev) c->prev->next = c->next;
  else ch->calls = c->next;
  if (c->next) c->next->prev = c->prev;
  curl_slist_free_all(c->hdrs);
  pb_buf_free(&c->req);
  grpc_reader_free(&c->rd);
  free(c->message);
  free(c->details);
  free(c);
}

void grpc_call_cancel(grpc_call *c) {
  if (!c) return;
  if (c->in_cb) {          /* libcurl forbids removing the handle here */
    c->cancelled = 1;
    return;
  }
  call_free(c);
}

static int deliver(void *ud, const uint8_t *msg, size_t n) {
  grpc_call *c = ud;
  if (c->cancelled) return 1;
  if (!c->on_msg) return 0;
  if (c->on_msg(c->ud, msg, n)) c->stopped = 1;
  return c->cancelled || c->stopped;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud) {
  grpc_call *c = ud;
  size_t n = size * nmemb;
  if (c->cancelled || c->stopped) return 0;
  long code = 0;
  curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return n;   /* an HTTP error body: status comes from it */
  c->in_cb = 1;
  int rc = grpc_reader_feed(&c->rd, (const uint8_t *)p, n, deliver, c,
                            c->local_msg, sizeof c->local_msg);
  c->in_cb = 0;
  if (rc < 0) {
    c->local_code = -rc;
    return 0;
  }
  return rc == 1 ? 0 : n;
}

static char *dup_trim(const char *p, size_t n) {
  while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  while (n && (*p == ' ' || *p == '\t')) { p++; n--; }
  char *s = malloc(n + 1);
  if (s) { memcpy(s, p, n); s[n] = 0; }
  return s;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  grpc_call *c = ud;
  size_t n = size * nmemb;
  if (n > MAX_HEADER_BYTES - c->head_bytes) {
    c->local_code = GRPC_RESOURCE_EXHAUSTED;
    snprintf(c->local_msg, sizeof c->local_msg, "response headers exceed %d bytes",
             MAX_HEADER_BYTES);
    return 0;
  }
  c->head_bytes += n;
  const char *colon = memchr(p, ':', n);
  if (!colon || colon == p) return n;   /* status line or blank line */
  size_t kl = (size_t)(colon - p);
  const char *v = colon + 1;
  size_t vl = n - kl - 1;
#define IS(name) (kl == sizeof(name) - 1 && strncasecmp(p, name, kl) == 0)
  if (IS("grpc-status")) {
    char *s = dup_trim(v, vl);
    char *end = NULL;
    long st = s ? strtol(s, &end, 10) : -1;
    c->have_status = 1;
    c->status = (s && *s && end && !*end && st >= 0 && st <= 16) ? (int)st : GRPC_UNKNOWN;
    free(s);
  } else if (IS("grpc-message")) {
    free(c->message);
    c->message = dup_trim(v, vl);
  } else if (IS("grpc-status-details-bin")) {
    free(c->details);
    c->details = dup_trim(v, vl);
    c->details_n = c->details ? strlen(c->details) : 0;
  } else if (IS("content-type")) {
    char *s = dup_trim(v, vl);
    c->saw_ctype = 1;
    c->ctype_ok = s && strncasecmp(s, "application/grpc", 16) == 0 &&
                  (s[16] == 0 || s[16] == '+' || s[16] == ';');
    free(s);
  }
#undef IS
  return n;
}

static int http_to_grpc(long http) {
  switch (http) {
    case 400: return GRPC_INTERNAL;
    case 401: return GRPC_UNAUTHENTICATED;
    case 403: return GRPC_PERMISSION_DENIED;
    case 404: return GRPC_UNIMPLEMENTED;
    case 429: case 502: case 503: case 504: return GRPC_UNAVAILABLE;
    default: return GRPC_UNKNOWN;
  }
}

static int curl_to_grpc(CURLcode rc) {
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: return GRPC_DEADLINE_EXCEEDED;
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT: case CURLE_SEND_ERROR: case CURLE_RECV_ERROR:
    case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING: case CURLE_SSL_CONNECT_ERROR: case CURLE_WRITE_ERROR:
      return GRPC_UNAVAILABLE;
    case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM: case CURLE_SSL_ISSUER_ERROR: case CURLE_SSL_CRL_BADFILE:
      return GRPC_LOCAL_TLS;
    default: return GRPC_UNKNOWN;
  }
}

static void on_curl_done(lash_loop *loop, CURL *easy, CURLcode rc, void *data) {
  grpc_call *c = data;
  grpc_status st = { 0 };
  grpc_details det = { 0 };
  pb_arena *arena = NULL;
  char msgbuf[1024], detmsg[512];
  long http = 0, connects = 0, httpver = 0;
  (void)loop;
  c->running = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &httpver);
  c->ch->connects += connects;
  if (c->cancelled) {      /* cancelled from on_msg: nobody to tell */
    call_free(c);
    return;
  }
  st.http_status = http;
  st.retry_after = -1;
  st.nmsgs = c->rd.nmsgs;
  msgbuf[0] = detmsg[0] = 0;
  if (c->details && (arena = pb_arena_new()) &&
      grpc_parse_details(c->details, c->details_n, arena, &det) == 0) {
    double secs;
    snprintf(detmsg, sizeof detmsg, "%.*s", (int)det.message.n, det.message.p);
    for (size_t i = 0; i < det.details_n; i++)
      if (grpc_retry_info(&det.details[i], &secs) == 0) st.retry_after = secs;
    st.details = det.details;
    st.ndetails = det.details_n;
  }
  if (c->stopped) {
    st.code = GRPC_CANCELLED;
    snprintf(msgbuf, sizeof msgbuf, "call stopped by the client");
  } else if (c->local_code) {
    st.code = c->local_code;
    snprintf(msgbuf, sizeof msgbuf, "%s", c->local_msg);
  } else if (c->have_status && (rc == CURLE_OK || c->status != GRPC_OK)) {
    st.code = c->status;
    if (c->message) grpc_percent_decode(c->message, strlen(c->message), msgbuf, sizeof msgbuf);
    if (!msgbuf[0] && detmsg[0]) snprintf(msgbuf, sizeof msgbuf, "%s", detmsg);
    if (st.code == GRPC_OK && grpc_reader_pending(&c->rd)) {
      st.code = GRPC_INTERNAL;
      snprintf(msgbuf, sizeof msgbuf, "stream ended inside a message (%zu bytes left over)",
               grpc_reader_pending(&c->rd));
    }
  } else if (rc != CURLE_OK) {
    st.transport = 1;
    st.code = curl_to_grpc(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT)
      snprintf(msgbuf, sizeof msgbuf, "deadline of %.3gs exceeded (%s)", c->timeout,
               c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
    else
      snprintf(msgbuf, sizeof msgbuf, "transport: %s",
               c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
  } else {
    st.transport = 1;
    if (http != 200) {
      st.code = http_to_grpc(http);
      snprintf(msgbuf, sizeof msgbuf, "HTTP status %ld from a gRPC server", http);
    } else if (httpver != CURL_HTTP_VERSION_2_0) {
      st.code = GRPC_UNAVAILABLE;
      snprintf(msgbuf, sizeof msgbuf, "server did not speak HTTP/2");
    } else if (c->saw_ctype && !c->ctype_ok) {
      st.code = GRPC_UNKNOWN;
      snprintf(msgbuf, sizeof msgbuf, "response is not application/grpc");
    } else {
      st.code = GRPC_UNKNOWN;
      snprintf(msgbuf, sizeof msgbuf, "stream ended without a grpc-status");
    }
  }
  st.message = msgbuf;
  grpc_done_cb done = c->on_done;
  void *ud = c->ud;
  /* Free first (the easy handle returns to the pool), so on_done can start
  ** a retry that reuses it. */
  call_free(c);
  if (done) done(ud, &st);
  pb_arena_free(arena);   /* after done: st.details live in it */
}

/* grpc-timeout: at most 8 digits and a unit. */
static void timeout_header(double secs, char *out, size_t n) {
  double ms = ceil(secs * 1000.0);
  if (ms < 1) ms = 1;
  if (ms < 1e8) snprintf(out, n, "grpc-timeout: %.0fm", ms);
  else snprintf(out, n, "grpc-timeout: %.0fS", fmin(ceil(secs), 99999999.0));
}

static int add_header(grpc_call *c, const char *h) {
  struct curl_slist *l = curl_slist_append(c->hdrs, h);
  if (!l) return -1;
  c->hdrs = l;
  return 0;
}

static int valid_header(const char *h) {
  const char *colon = strchr(h, ':');
  if (!colon || colon == h) return 0;
  for (const char *p = h; *p; p++)
    if (*p == '\r' || *p == '\n') return 0;
  return 1;
}

grpc_call *grpc_call_start(grpc_channel *ch, const char *path,
                           const uint8_t *req, size_t n,
                           const grpc_call_opts *opts, grpc_msg_cb on_msg,
                           grpc_done_cb on_done, void *ud, char *err,
                           size_t errlen) {
  grpc_call_opts none = { 0 };
  if (!opts) opts = &none;
  if (!path || path[0] != '/' || strchr(path, ' ') || strchr(path, '?')) {
    snprintf(err, errlen, "gRPC method path must look like /package.Service/Method");
    return NULL;
  }
  if (n > 0x7fffffff) {
    snprintf(err, errlen, "request message too large (%zu bytes)", n);
    return NULL;
  }
  grpc_call *c = calloc(1, sizeof *c);
  if (!c) goto oom;
  c->ch = ch;
  c->on_msg = on_msg;
  c->on_done = on_done;
  c->ud = ud;
  c->timeout = opts->timeout;
  grpc_reader_init(&c->rd, ch->max_recv);
  pb_buf_init(&c->req);
  uint8_t pre[5] = { 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
  pb_buf_append(&c->req, pre, 5);
  pb_buf_append(&c->req, req, n);
  if (c->req.oom) goto oom;
  /* link first so call_free can unlink on any failure below */
  c->next = ch->calls;
  if (ch->calls) ch->calls->prev = c;
  ch->calls = c;
  c->easy = easy_get(ch);
  if (!c->easy) goto oom_linked;

  char url[2048], th[64];
  if ((size_t)snprintf(url, sizeof url, "%s%s", ch->url, path) >= sizeof url) {
    snprintf(err, errlen, "gRPC URL too long");
    call_free(c);
    return NULL;
  }
  if (add_header(c, "content-type: application/grpc") ||
      add_header(c, "te: trailers") ||
      add_header(c, "grpc-accept-encoding: identity") ||
      add_header(c, "user-agent: grpc-lash/" LASH_VERSION " libcurl") ||
      add_header(c, "Expect:") || add_header(c, "Accept:"))
    goto oom_linked;
  if (opts->timeout > 0) {
    timeout_header(opts->timeout, th, sizeof th);
    if (add_header(c, th)) goto oom_linked;
  }
  for (const char *const *h = opts->headers; h && *h; h++) {
    if (!valid_header(*h)) {
      snprintf(err, errlen, "invalid gRPC metadata line (want \"name: value\", no CR/LF)");
      call_free(c);
      return NULL;
    }
    if (add_header(c, *h)) goto oom_linked;
  }

  CURL *e = c->easy;
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_SHARE, ch->share);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)c->req.p);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->req.n);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, ch->plaintext
                   ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                   : (long)CURL_HTTP_VERSION_2TLS);
  if (ch->plaintext && h2c_reuse_broken()) {
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  }
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ch->connect_ms);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   opts->timeout > 0 ? (long)ceil(opts->timeout * 1000.0) : 0L);
  if (ch->insecure) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (ch->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, ch->ca_file);
  if (getenv("LASH_GRPC_VERBOSE")) curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
  if (lash_curl_add(ch->loop, e, on_curl_done, c) != 0) {
    snprintf(err, errlen, "cannot add the gRPC call to the event loop");
    call_free(c);
    return NULL;
  }
  c->running = 1;
  return c;
oom_linked:
  call_free(c);
  c = NULL;
oom:
  if (c) {
    pb_buf_free(&c->req);
    grpc_reader_free(&c->rd);
    free(c);
  }
  snprintf(err, errlen, "out of memory starting a gRPC call");
  return NULL;
}
