/*
** http.c: the HTTP transport (see http.h; prefix lash_http_). One libcurl
** easy handle per request, driven by the runtime's loop; this file owns
** the per-runtime context (TLS-session share, easy-handle pool, the last
** checked URL), the libcurl options of a request, response collection
** (buffered, or handed over as it arrives with back-pressure) and the
** mapping of libcurl failures to error kinds. No Lua: lhttp.c is the
** binding.
*/
#include "http.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef LASH_VERSION
#define LASH_VERSION "0.0.0"
#endif

/* A streamed body pauses the transfer when this much is waiting for its
** owner, so a slow consumer bounds memory instead of the server. */
#define STREAM_PAUSE_AT ((size_t)1 << 20)

/* ---- the per-runtime context ------------------------------------------ */

int lash_http_init(lash_http *h, lash_loop *loop) {
  memset(h, 0, sizeof *h);
  h->loop = loop;
  return 0;
}

/* libcurl and the share are made at the first request, not with the
** context (which every runtime opens): see lash_curl_ready. */
int lash_http_ready(lash_http *h, char *err, size_t errsz) {
  if (h->share) return 0;
  if (h->closed) {
    if (err && errsz) snprintf(err, errsz, "the lash runtime is closed");
    return -1;
  }
  if (lash_curl_ready(h->loop, err, errsz) != 0) return -1;
  h->share = curl_share_init();
  if (!h->share) {
    if (err && errsz) snprintf(err, errsz, "cannot create a curl share");
    return -1;
  }
  /* Connections and DNS are already pooled by the loop's multi handle;
  ** TLS sessions are per easy handle unless shared. */
  curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  h->h2c_no_reuse = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
  return 0;
}

void lash_http_close(lash_http *h) {
  if (h->closed) return;
  h->closed = 1;
  while (h->npool > 0) curl_easy_cleanup(h->pool[--h->npool]);
  if (h->share) {
    curl_share_cleanup(h->share);
    h->share = NULL;
  }
  free(h->url);
  free(h->shown);
  h->url = h->shown = NULL;
}

static CURL *pool_get(lash_http *h) {
  if (h->npool > 0) return h->pool[--h->npool];
  return curl_easy_init();
}

static void pool_put(lash_http *h, CURL *easy) {
  if (h && !h->closed && h->npool < LASH_HTTP_POOL_MAX) {
    curl_easy_reset(easy);
    h->pool[h->npool++] = easy;
  } else {
    curl_easy_cleanup(easy);
  }
}

/* ---- URLs and tokens ------------------------------------------------------ */

static int is_tchar(int c) {
  return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int lash_http_is_token(const char *s, size_t n) {
  size_t i;
  if (n == 0) return 0;
  for (i = 0; i < n; i++)
    if (!is_tchar((unsigned char)s[i])) return 0;
  return 1;
}

/* Remember url and its shown form. Returns 0 or -1 (out of memory: the
** cache is then empty). */
static int cache_url(lash_http *h, const char *url, size_t len,
                     const char *shown, size_t shown_len) {
  free(h->url);
  free(h->shown);
  h->url = malloc(len + 1);
  h->shown = malloc(shown_len + 1);
  if (!h->url || !h->shown) {
    free(h->url);
    free(h->shown);
    h->url = h->shown = NULL;
    return -1;
  }
  memcpy(h->url, url, len + 1);
  memcpy(h->shown, shown, shown_len);
  h->shown[shown_len] = 0;
  h->url_len = len;
  h->shown_len = shown_len;
  return 0;
}

int lash_http_check_url(lash_http *h, const char *url, size_t len,
                        const char **shown, size_t *shown_len,
                        const char **why) {
  CURLU *u;
  char *scheme = NULL, *base = NULL, *query = NULL, *s;
  CURLUcode uc;
  size_t bn;
  int rc;
  *why = NULL;
  if (h->url && h->url_len == len && memcmp(h->url, url, len) == 0) {
    *shown = h->shown;
    *shown_len = h->shown_len;
    return 0;
  }
  u = curl_url();
  if (!u) return -2;
  uc = curl_url_set(u, CURLUPART_URL, url, 0);
  if (uc == CURLUE_OK) uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  if (uc != CURLUE_OK || (strcmp(scheme, "http") != 0 &&
                          strcmp(scheme, "https") != 0)) {
    if (uc != CURLUE_OK) *why = curl_url_strerror(uc);
    curl_free(scheme);
    curl_url_cleanup(u);
    return -1;
  }
  curl_free(scheme);
  curl_url_get(u, CURLUPART_QUERY, &query, 0);
  curl_url_set(u, CURLUPART_USER, NULL, 0);
  curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
  curl_url_set(u, CURLUPART_QUERY, NULL, 0);
  curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
  if (curl_url_get(u, CURLUPART_URL, &base, 0) != CURLUE_OK) base = NULL;
  bn = strlen(base ? base : "(url)");
  s = malloc(bn + 5);
  if (s) {
    memcpy(s, base ? base : "(url)", bn);
    memcpy(s + bn, query ? "?..." : "", query ? 5 : 1);
  }
  curl_free(base);
  curl_free(query);
  curl_url_cleanup(u);
  if (!s) return -2;
  rc = cache_url(h, url, len, s, strlen(s));
  free(s);
  if (rc != 0) return -2;
  *shown = h->shown;
  *shown_len = h->shown_len;
  return 0;
}

/* ---- byte buffers ---------------------------------------------------------- */

static int buf_reserve(lash_http_buf *b, size_t extra) {
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

static int buf_add(lash_http_buf *b, const char *s, size_t n) {
  if (buf_reserve(b, n) != 0) return -1;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  return 0;
}

static void buf_free(lash_http_buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* ---- a request ------------------------------------------------------------- */

int lash_http_req_init(lash_http_req *r, lash_http *h,
                       void (*notify)(void *ud), void *ud) {
  memset(r, 0, sizeof *r);
  r->state = LASH_HTTP_IDLE;
  r->http = h;
  r->notify = notify;
  r->ud = ud;
  if (h->closed || lash_http_ready(h, NULL, 0) != 0) return -1;
  r->easy = pool_get(h);
  return r->easy ? 0 : -1;
}

void lash_http_req_release(lash_http_req *r) {
  if (r->easy) {
    if (r->state == LASH_HTTP_RUNNING) lash_curl_remove(r->http->loop, r->easy);
    pool_put(r->http, r->easy);
    r->easy = NULL;
  }
  if (r->hdrs) curl_slist_free_all(r->hdrs);  /* none: libcurl maybe never loaded */
  r->hdrs = NULL;
  buf_free(&r->body);
  buf_free(&r->head);
  r->state = LASH_HTTP_CLOSED;
}

int lash_http_req_header(lash_http_req *r, const char *line) {
  struct curl_slist *l = curl_slist_append(r->hdrs, line);
  if (!l) return -1;
  r->hdrs = l;
  return 0;
}

static void on_done(lash_loop *loop, CURL *easy, CURLcode rc, void *data) {
  lash_http_req *r = data;
  (void)loop;
  (void)easy;
  r->rc = rc;
  r->state = LASH_HTTP_DONE;
  r->notify(r->ud);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  lash_http_req *r = ud;
  size_t len = size * n;
  if (!r->decided) {
    /* An error status with check_status is collected whole for the error
    ** object instead of being streamed. */
    long code = 0;
    r->decided = 1;
    if (r->streaming && r->check_status &&
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code) ==
            CURLE_OK && code >= 400)
      r->streaming = 0;
    if (!r->streaming) {
      curl_off_t cl = -1;
      if (curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                            &cl) == CURLE_OK && cl > 0 &&
          (curl_off_t)r->max_body >= cl)
        (void)buf_reserve(&r->body, (size_t)cl);
    }
  }
  if (r->streaming && r->body.n >= STREAM_PAUSE_AT) {
    r->paused = 1;
    return CURL_WRITEFUNC_PAUSE;
  }
  if (len > r->max_body - r->total) {
    r->abort = LASH_HTTP_ABORT_TOO_LARGE;
    return 0;
  }
  if (buf_add(&r->body, p, len) != 0) {
    r->abort = LASH_HTTP_ABORT_NOMEM;
    return 0;
  }
  r->total += len;
  if (r->streaming) r->notify(r->ud);
  return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  lash_http_req *r = ud;
  size_t len = size * n;
  /* A status line starts a new response (1xx, redirects): keep only the
  ** headers of the last one. */
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) r->head.n = 0;
  if (len > LASH_HTTP_MAX_HEADER_BYTES - r->head.n) {
    r->abort = LASH_HTTP_ABORT_HEADERS_TOO_LARGE;
    return 0;
  }
  if (buf_add(&r->head, p, len) != 0) {
    r->abort = LASH_HTTP_ABORT_NOMEM;
    return 0;
  }
  return len;
}

void lash_http_opts_init(lash_http_opts *o) {
  memset(o, 0, sizeof *o);
  o->connect_timeout = LASH_HTTP_DEFAULT_CONNECT_TIMEOUT;
  o->max_redirects = LASH_HTTP_DEFAULT_MAX_REDIRECTS;
  o->max_body = LASH_HTTP_DEFAULT_MAX_BODY;
  o->verify = 1;
}

/* Whether the caller set header `name` (case-insensitive). */
static int has_header(const struct curl_slist *l, const char *name) {
  size_t n = strlen(name);
  for (; l; l = l->next)
    if (strncasecmp(l->data, name, n) == 0 &&
        (l->data[n] == ':' || l->data[n] == ';'))
      return 1;
  return 0;
}

int lash_http_start(lash_http_req *r, const lash_http_opts *o) {
  CURL *e = r->easy;
  const char *method = o->method;
  long httpv;
  int https = strncasecmp(o->url, "https:", 6) == 0;
  if (!method) method = o->body ? "POST" : "GET";

  curl_easy_setopt(e, CURLOPT_URL, o->url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_SHARE, r->http->share);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "lash/" LASH_VERSION);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);

  if (strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(method, "GET") != 0 || o->body) {
    if (strcmp(method, "POST") != 0)
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (o->body || strcmp(method, "POST") == 0) {
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, o->body ? o->body : "");
    }
  }
  /* No "Expect: 100-continue" round trip, and no invented form content
  ** type for a body the caller did not label. */
  if ((!has_header(r->hdrs, "expect") &&
       lash_http_req_header(r, "Expect:") != 0) ||
      (o->body && !has_header(r->hdrs, "content-type") &&
       lash_http_req_header(r, "Content-Type:") != 0))
    return -1;
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);

  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(o->timeout * 1000));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)ceil(o->connect_timeout * 1000));
  if (o->idle_timeout > 0) {
    /* libcurl counts whole seconds below 1 byte/s as stalled. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(o->idle_timeout));
  }

  if (!o->verify) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (o->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);

  if (o->follow) {
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, o->max_redirects);
  }

  /* Cleartext without prior knowledge is HTTP/1.1 either way; saying so
  ** keeps libcurl < 8 from treating an in-use HTTP/1.1 connection as one
  ** it may multiplex on, once the origin has had an HTTP/2 connection. */
  httpv = o->h2c ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
      : https ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1;
  if (o->version == LASH_HTTP_V_1_1 && !o->h2c) httpv = CURL_HTTP_VERSION_1_1;
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, httpv);
  if (o->h2c && r->http->h2c_no_reuse) {
    /* libcurl before 8.0.0 breaks a prior-knowledge HTTP/2 connection
    ** when it reuses it ("Error in the HTTP2 framing layer", curl issue
    ** 10634): give each such request a connection of its own. */
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  } else if (o->h2c || (https && httpv != CURL_HTTP_VERSION_1_1)) {
    /* Let concurrent requests to one host wait to multiplex on a single
    ** HTTP/2 connection instead of opening one each. */
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  }

  r->check_status = o->check_status;
  r->max_body = o->max_body;
  r->streaming = o->streaming;
  if (lash_curl_add(r->http->loop, e, on_done, r) != 0) return -2;
  r->state = LASH_HTTP_RUNNING;
  return 0;
}

void lash_http_req_taken(lash_http_req *r) {
  r->body.n = 0;
  if (r->paused && r->state == LASH_HTTP_RUNNING) {
    /* May deliver the held data at once (into r->body). */
    r->paused = 0;
    curl_easy_pause(r->easy, CURLPAUSE_CONT);
  }
}

long lash_http_req_status(lash_http_req *r) {
  long status = 0;
  if (r->easy) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

/* ---- failures ------------------------------------------------------------- */

int lash_http_status_retryable(long s) {
  return s == 408 || s == 425 || s == 429 || s == 500 || s == 502 ||
         s == 503 || s == 504 || s == 529;
}

void lash_http_classify(CURLcode rc, const char **kind, int *retryable) {
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
