/*
** sse.c: the Server-Sent Events parser (see sse.h for the rules it
** implements). Lines that arrive whole inside one chunk are parsed in place;
** only a line cut by a chunk boundary is copied, into p->line. Prefix
** lash_sse_; no Lua (lsse.c is the binding).
*/
#include "sse.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char BOM[3] = {0xEF, 0xBB, 0xBF};

/* ---- buffers -------------------------------------------------------- */

static int buf_reserve(lash_sse_buf *b, size_t need) {
  size_t ncap;
  char *np;
  if (need <= b->cap) return 0;
  ncap = b->cap ? b->cap : 64;
  while (ncap < need) {
    if (ncap > ((size_t)-1) / 2) { ncap = need; break; }
    ncap *= 2;
  }
  np = realloc(b->p, ncap);
  if (np == NULL) return -1;
  b->p = np;
  b->cap = ncap;
  return 0;
}

static int buf_append(lash_sse_buf *b, const char *s, size_t n) {
  if (n == 0) return 0;
  if (buf_reserve(b, b->len + n) < 0) return -1;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  return 0;
}

static int buf_set(lash_sse_buf *b, const char *s, size_t n) {
  b->len = 0;
  return buf_append(b, s, n);
}

static void buf_free(lash_sse_buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ---- parser --------------------------------------------------------- */

void lash_sse_init(lash_sse *p, lash_sse_callback cb, void *ud) {
  memset(p, 0, sizeof *p);
  p->retry = -1;
  p->event_retry = -1;
  p->max_line = LASH_SSE_DEFAULT_MAX_LINE;
  p->max_event = LASH_SSE_DEFAULT_MAX_EVENT;
  p->cb = cb;
  p->ud = ud;
}

void lash_sse_set_limits(lash_sse *p, size_t max_line, size_t max_event) {
  if (max_line) p->max_line = max_line;
  if (max_event) p->max_event = max_event;
}

int64_t lash_sse_retry(const lash_sse *p) { return p->retry; }

const char *lash_sse_last_id(const lash_sse *p, size_t *len) {
  *len = p->id.len;
  return p->id.len ? p->id.p : "";
}

const char *lash_sse_strerror(int code) {
  switch (code) {
  case LASH_SSE_OK: return "no error";
  case LASH_SSE_ELINE: return "event stream line over the line limit";
  case LASH_SSE_EEVENT: return "event stream event data over the event limit";
  case LASH_SSE_ENOMEM: return "out of memory";
  case LASH_SSE_ECLOSED: return "event stream parser is closed";
  default: return "stopped by the event callback";
  }
}

static int dispatch(lash_sse *p) {
  lash_sse_event ev;
  int rc;
  if (p->data.len == 0) {                     /* nothing to dispatch */
    p->type.len = 0;
    p->event_retry = -1;
    return 0;
  }
  ev.type = p->type.len ? p->type.p : "message";
  ev.type_len = p->type.len ? p->type.len : 7;
  ev.data = p->data.p;
  ev.data_len = p->data.len - 1;              /* drop the last "\n" */
  ev.id = p->id.len ? p->id.p : "";
  ev.id_len = p->id.len;
  ev.retry = p->event_retry;
  /* Reset first: a callback that longjmps (a Lua error) leaves a clean
  ** parser behind, not a half-dispatched event. */
  p->data.len = 0;
  p->type.len = 0;
  p->event_retry = -1;
  rc = p->cb ? p->cb(p->ud, &ev) : 0;
  return rc;
}

static int field_is(const char *f, size_t n, const char *name) {
  return strlen(name) == n && memcmp(f, name, n) == 0;
}

static void set_retry(lash_sse *p, const char *v, size_t n) {
  int64_t r = 0;
  size_t i;
  if (n == 0) return;
  for (i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return;     /* not all digits: ignored */
  }
  for (i = 0; i < n; i++) {
    int d = v[i] - '0';
    if (r > (INT64_MAX - d) / 10) { r = INT64_MAX; break; }  /* saturate */
    r = r * 10 + d;
  }
  p->retry = r;
  p->event_retry = r;
}

static int process_line(lash_sse *p, const char *l, size_t n) {
  const char *colon, *v;
  size_t fn, vn;
  if (n == 0) return dispatch(p);
  if (l[0] == ':') return 0;                  /* comment */
  colon = memchr(l, ':', n);
  if (colon) {
    fn = (size_t)(colon - l);
    v = colon + 1;
    vn = n - fn - 1;
    if (vn && *v == ' ') v++, vn--;
  } else {
    fn = n;
    v = l + n;
    vn = 0;
  }
  if (field_is(l, fn, "data")) {
    if (p->data.len + vn + 1 > p->max_event + 1) return LASH_SSE_EEVENT;
    if (buf_append(&p->data, v, vn) < 0 || buf_append(&p->data, "\n", 1) < 0)
      return LASH_SSE_ENOMEM;
  } else if (field_is(l, fn, "event")) {
    if (buf_set(&p->type, v, vn) < 0) return LASH_SSE_ENOMEM;
  } else if (field_is(l, fn, "id")) {
    if (!memchr(v, '\0', vn) && buf_set(&p->id, v, vn) < 0) return LASH_SSE_ENOMEM;
  } else if (field_is(l, fn, "retry")) {
    set_retry(p, v, vn);
  }                                           /* other fields are ignored */
  return 0;
}

/* Parse bytes that come after the BOM check. */
static int parse(lash_sse *p, const char *s, size_t n) {
  size_t i = 0, j, ll;
  int rc;
  if (p->after_cr && n > 0) {
    p->after_cr = 0;
    if (s[0] == '\n') i = 1;                  /* the LF of a split CRLF */
  }
  while (i < n) {
    for (j = i; j < n && s[j] != '\n' && s[j] != '\r'; j++) {}
    if (j == n) {                             /* unfinished line: keep it */
      if (p->line.len + (n - i) > p->max_line) return LASH_SSE_ELINE;
      if (buf_append(&p->line, s + i, n - i) < 0) return LASH_SSE_ENOMEM;
      break;
    }
    if (p->line.len) {
      if (p->line.len + (j - i) > p->max_line) return LASH_SSE_ELINE;
      if (buf_append(&p->line, s + i, j - i) < 0) return LASH_SSE_ENOMEM;
      /* Clear before processing, so an error thrown through the callback
      ** does not leave the line to be parsed twice. */
      ll = p->line.len;
      p->line.len = 0;
      rc = process_line(p, p->line.p, ll);
    } else {
      if (j - i > p->max_line) return LASH_SSE_ELINE;
      rc = process_line(p, s + i, j - i);
    }
    if (rc) return rc;
    if (s[j] == '\r') {
      if (j + 1 < n) { if (s[j + 1] == '\n') j++; }
      else p->after_cr = 1;
    }
    i = j + 1;
  }
  return 0;
}

int lash_sse_feed(lash_sse *p, const void *chunk, size_t n) {
  const unsigned char *s = chunk;
  int rc;
  if (p->error) return p->error;
  while (p->bom < 3 && n > 0) {
    if (s[0] == BOM[p->bom]) {
      p->bom++;
      s++, n--;
    } else {
      /* Not a BOM after all: the bytes matched so far are text. */
      int k = p->bom;
      p->bom = 3;
      if (k && (rc = parse(p, (const char *)BOM, (size_t)k)) != 0) return p->error = rc;
    }
  }
  rc = parse(p, (const char *)s, n);
  if (rc) p->error = rc;
  return rc;
}

void lash_sse_free(lash_sse *p) {
  buf_free(&p->line);
  buf_free(&p->data);
  buf_free(&p->type);
  buf_free(&p->id);
  p->error = LASH_SSE_ECLOSED;
}
