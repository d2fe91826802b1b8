/*
** http.h: the HTTP transport (internal API; prefix lash_http_). Requests
** are libcurl easy handles on the runtime's loop (its multi handle pools
** connections and DNS); a lash_http context per runtime holds a curl share
** for TLS sessions, a small pool of idle easy handles and the last URL it
** checked. Pure C: lhttp.c is the Lua binding (lash.http) on top of it.
**
** A request is a struct its owner embeds and keeps alive until
** lash_http_req_release. The transport calls notify(ud) from the loop when
** body bytes are waiting (streaming) and when the transfer is done; the
** owner then reads the fields marked "results" below.
*/
#ifndef lash_http_h
#define lash_http_h

#include <stddef.h>

#include <curl/curl.h>

#include "loop.h"

#define LASH_HTTP_DEFAULT_MAX_BODY ((size_t)64 << 20)
#define LASH_HTTP_DEFAULT_CONNECT_TIMEOUT 30.0
#define LASH_HTTP_DEFAULT_MAX_REDIRECTS 10
#define LASH_HTTP_MAX_HEADER_BYTES ((size_t)1 << 20)

/* ---- the per-runtime context --------------------------------------- */

#define LASH_HTTP_POOL_MAX 16

/* Treat the fields as private. */
typedef struct lash_http {
  lash_loop *loop;
  CURLSH *share;
  CURL *pool[LASH_HTTP_POOL_MAX];
  int npool;
  int closed;
  int h2c_no_reuse;   /* libcurl < 8.0.0: see lash_http_start */
  /* The last URL that passed lash_http_check_url and its shown form: an
  ** agent calls one endpoint over and over, and parsing it is a fifth of
  ** the cost of a loopback request. */
  char *url, *shown;
  size_t url_len, shown_len;
} lash_http;

/* Set up h for loop (nothing of libcurl yet). Returns 0. */
int  lash_http_init(lash_http *h, lash_loop *loop);
/* libcurl loaded and h's share made (idempotent; lash_http_req_init does
** it): 0, or -1 with why in err. */
int  lash_http_ready(lash_http *h, char *err, size_t errsz);
/* Free the pool and the share. Idempotent; requests released later clean
** up their own handles. */
void lash_http_close(lash_http *h);

/* Check that url (len bytes, no NUL) is an absolute http:// or https://
** URL and give the form messages show: no user info, query and fragment
** elided (API keys travel there sometimes). *shown stays valid until the
** next call on h. Returns 0; -1 when the URL is not one (*why: libcurl's
** reason, or NULL for another scheme); -2 out of memory. */
int lash_http_check_url(lash_http *h, const char *url, size_t len,
                        const char **shown, size_t *shown_len,
                        const char **why);

/* An HTTP token (RFC 9110: method and header names). */
int lash_http_is_token(const char *s, size_t n);

/* ---- requests ---------------------------------------------------------- */

enum { LASH_HTTP_V_DEFAULT, LASH_HTTP_V_2, LASH_HTTP_V_1_1 };

typedef struct lash_http_opts {
  const char *url;            /* checked with lash_http_check_url */
  const char *method;         /* a token; NULL: POST with a body, else GET */
  const char *body;           /* NULL: none; must outlive the transfer */
  size_t body_len;
  double timeout;             /* whole transfer, seconds; 0: none */
  double connect_timeout;     /* seconds */
  double idle_timeout;        /* seconds without a byte; 0: none */
  long max_redirects;
  size_t max_body;            /* response body cap, streamed or not */
  const char *ca_file;
  int version;                /* LASH_HTTP_V_*; V_1_1 never with h2c */
  int verify, follow, h2c, check_status, streaming;
} lash_http_opts;

/* Fill o with the defaults (verify on, 30 s to connect, 10 redirects,
** 64 MiB of body). */
void lash_http_opts_init(lash_http_opts *o);

typedef struct lash_http_buf { char *p; size_t n, cap; } lash_http_buf;

enum { LASH_HTTP_IDLE, LASH_HTTP_RUNNING, LASH_HTTP_DONE, LASH_HTTP_CLOSED };
enum { LASH_HTTP_ABORT_NONE, LASH_HTTP_ABORT_TOO_LARGE,
       LASH_HTTP_ABORT_HEADERS_TOO_LARGE, LASH_HTTP_ABORT_NOMEM };

typedef struct lash_http_req {
  /* results */
  int state;                   /* LASH_HTTP_* */
  CURLcode rc;                 /* valid once DONE */
  int abort;                   /* LASH_HTTP_ABORT_*: a cap cut the transfer */
  int streaming;               /* body is handed over as it arrives; cleared
                                  when check_status collects an error body */
  int check_status;
  size_t max_body;
  lash_http_buf body;          /* the whole body, or what is not yet taken */
  lash_http_buf head;          /* header lines of the latest response */
  char errbuf[CURL_ERROR_SIZE];
  /* private */
  lash_http *http;
  CURL *easy;
  struct curl_slist *hdrs;
  int decided, paused;
  size_t total;
  void (*notify)(void *ud);
  void *ud;
} lash_http_req;

/* Bind r to h with its notify callback; takes an easy handle from the
** pool. Returns 0, or -1 (no handle: r holds nothing). */
int  lash_http_req_init(lash_http_req *r, lash_http *h,
                        void (*notify)(void *ud), void *ud);
/* Add a request header line ("Name: value", or "Name;" for an empty one;
** the caller has checked it). Returns 0, or -1 out of memory. */
int  lash_http_req_header(lash_http_req *r, const char *line);
/* Set the transfer up from o and start it on the loop. Returns 0, or -1
** (out of memory, or the loop refused it). */
int  lash_http_start(lash_http_req *r, const lash_http_opts *o);
/* The streaming owner has taken body.p[0..body.n): empty the buffer and
** let a paused transfer go on (it may refill the buffer at once). */
void lash_http_req_taken(lash_http_req *r);
/* The final response's status code (0 when none arrived). */
long lash_http_req_status(lash_http_req *r);
/* Give everything back: the easy handle leaves the loop and returns to
** the pool, buffers are freed. Idempotent; state becomes CLOSED. */
void lash_http_req_release(lash_http_req *r);

/* The error kind ("connect", "timeout", "tls", "http") and whether a
** retry may succeed, for a transfer that failed with rc. */
void lash_http_classify(CURLcode rc, const char **kind, int *retryable);
/* Whether a response with this status is worth retrying. */
int  lash_http_status_retryable(long status);

#endif
