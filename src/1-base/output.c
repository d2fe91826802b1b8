/*
** output.c: output shaping (see output.h): the tail ring, line/byte
** truncation with the harness's exact markers, the size format, and UTF-8
** validation and repair. Pure C; the Lua binding is loutput.c.
** Prefixes lash_ring_, lash_trunc_/lash_truncate, lash_utf8_,
** lash_format_size (output.h).
*/
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_MIN_ALLOC 256

static int is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* ---- tail ring ------------------------------------------------------ */

void lash_ring_init(lash_ring *r, size_t max) {
  memset(r, 0, sizeof *r);
  r->max = max;
}

/* Grow the (still linear, head == 0) buffer to hold at least `need` bytes. */
static int ring_grow(lash_ring *r, size_t need) {
  size_t ncap;
  unsigned char *nb;
  if (need <= r->cap) return 0;
  ncap = r->cap ? r->cap : RING_MIN_ALLOC;
  while (ncap < need && ncap < r->max / 2) ncap *= 2;
  if (ncap < need) ncap = r->max;       /* doubling would pass the cap */
  if (ncap > r->max) ncap = r->max;
  nb = realloc(r->buf, ncap);
  if (nb == NULL) return -1;
  r->buf = nb;
  r->cap = ncap;
  return 0;
}

int lash_ring_feed(lash_ring *r, const void *p, size_t n) {
  const unsigned char *s = p;
  size_t pos, first, over;
  if (n == 0) return 0;
  if (r->max == 0) { r->total += n; return 0; }
  if (n >= r->max) {
    /* The chunk alone covers the whole window: keep its tail only. */
    if (ring_grow(r, r->max) < 0) return -1;
    memcpy(r->buf, s + (n - r->max), r->max);
    r->head = 0;
    r->len = r->max;
    r->total += n;
    return 0;
  }
  if (r->len + n <= r->max) {
    /* Not full yet, so head == 0 and the buffer is linear. */
    if (ring_grow(r, r->len + n) < 0) return -1;
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    r->total += n;
    return 0;
  }
  /* Overflow: the buffer becomes (or is) the fixed circular window. */
  if (ring_grow(r, r->max) < 0) return -1;
  pos = (r->head + r->len) % r->max;
  first = r->max - pos;
  if (first > n) first = n;
  memcpy(r->buf + pos, s, first);
  memcpy(r->buf, s + first, n - first);
  over = r->len + n - r->max;
  r->head = (r->head + over) % r->max;
  r->len = r->max;
  r->total += n;
  return 0;
}

int lash_ring_dropped(const lash_ring *r) { return r->total > r->len; }

uint64_t lash_ring_total(const lash_ring *r) { return r->total; }

static unsigned char ring_at(const lash_ring *r, size_t i) {
  return r->buf[(r->head + i) % r->cap];
}

/* Bytes to skip at the start so the result does not begin inside a
** character: only after a cut, and at most 3 (the longest tail a UTF-8
** sequence can have; more than that is not text, and repair will mark it). */
static size_t ring_skip(const lash_ring *r) {
  size_t k = 0;
  if (!lash_ring_dropped(r)) return 0;
  while (k < 3 && k < r->len && is_cont(ring_at(r, k))) k++;
  return k;
}

size_t lash_ring_size(const lash_ring *r) { return r->len - ring_skip(r); }

static void reverse(unsigned char *a, size_t n) {
  size_t i, j;
  for (i = 0, j = n; i + 1 < j; i++) {
    unsigned char c = a[i];
    a[i] = a[--j];
    a[j] = c;
  }
}

const char *lash_ring_view(lash_ring *r, size_t *len) {
  size_t skip;
  if (r->len == 0) { *len = 0; return NULL; }
  if (r->head != 0) {
    /* Rotate left by head in place: three reversals, no allocation. The
    ** ring is full here (head moves only once len == max == cap). */
    reverse(r->buf, r->head);
    reverse(r->buf + r->head, r->len - r->head);
    reverse(r->buf, r->len);
    r->head = 0;
  }
  skip = ring_skip(r);
  *len = r->len - skip;
  return *len ? (const char *)r->buf + skip : NULL;
}

size_t lash_ring_copy(const lash_ring *r, void *dst) {
  size_t skip = ring_skip(r), start, n, first;
  unsigned char *d = dst;
  if (r->len == 0) return 0;
  start = (r->head + skip) % r->cap;
  n = r->len - skip;
  first = r->cap - start;
  if (first > n) first = n;
  memcpy(d, r->buf + start, first);
  memcpy(d + first, r->buf, n - first);
  return n;
}

void lash_ring_reset(lash_ring *r) {
  r->head = r->len = 0;
  r->total = 0;
}

void lash_ring_free(lash_ring *r) {
  free(r->buf);
  r->buf = NULL;
  r->cap = r->head = r->len = 0;
  r->total = 0;
}

/* ---- size format ---------------------------------------------------- */

size_t lash_format_size(uint64_t n, char *buf, size_t bufsize) {
  uint64_t d, q, r, tenths, rem;
  const char *unit;
  int len;
  if (n < 1024) {
    len = snprintf(buf, bufsize, "%lluB", (unsigned long long)n);
    return len < 0 ? 0 : (size_t)len;
  }
  if (n < 1048576) { d = 1024; unit = "KB"; }
  else { d = 1048576; unit = "MB"; }
  /* n/d rounded to tenths, half to even, in integers: no float, no locale. */
  q = n / d;
  r = n % d;
  tenths = q * 10 + (r * 10) / d;
  rem = (r * 10) % d;
  if (rem * 2 > d || (rem * 2 == d && (tenths & 1))) tenths++;
  len = snprintf(buf, bufsize, "%llu.%llu%s", (unsigned long long)(tenths / 10),
                 (unsigned long long)(tenths % 10), unit);
  return len < 0 ? 0 : (size_t)len;
}

/* ---- line/byte truncation ------------------------------------------- */

/* Start of the line that ends at `end` (exclusive) within text[0, end).
** (memrchr is a GNU extension; this stays portable.) */
static size_t line_start(const char *text, size_t end) {
  while (end > 0 && text[end - 1] != '\n') end--;
  return end;
}

/* End of the line that starts at `start` within text[start, end). */
static size_t line_end(const char *text, size_t start, size_t end) {
  const char *nl = memchr(text + start, '\n', end - start);
  return nl ? (size_t)(nl - text) : end;
}

static void trunc_tail(const char *text, size_t end, const lash_trunc_opts *o,
                       lash_trunc *t) {
  size_t ls = line_start(text, end), le, kept_start, total, kept = 0;
  if (end - ls > o->max_bytes) {
    /* The newest line alone is too wide: keep its last max_bytes bytes,
    ** starting at a character boundary. */
    size_t off = end - o->max_bytes, k = 0;
    while (k < 3 && off < end && is_cont((unsigned char)text[off])) off++, k++;
    t->body_off = off;
    t->body_len = end - off;
    t->by = LASH_TRUNC_BYTES;
    t->lines = 1;
    return;
  }
  kept_start = end;
  total = 0;
  le = end;                                   /* the line considered is [ls, le) */
  for (;;) {
    size_t cost;
    if (kept >= o->max_lines) { t->by = LASH_TRUNC_LINES; break; }
    cost = (le - ls) + (kept > 0);
    if (total + cost > o->max_bytes) { t->by = LASH_TRUNC_BYTES; break; }
    total += cost;
    kept++;
    kept_start = ls;
    if (ls == 0) break;                       /* that was the oldest line */
    le = ls - 1;
    ls = line_start(text, le);
  }
  t->body_off = kept_start;
  t->body_len = end - kept_start;
  t->lines = kept;
}

static void trunc_head(const char *text, size_t end, const lash_trunc_opts *o,
                       lash_trunc *t) {
  size_t le = line_end(text, 0, end), kept_end = 0, total = 0, kept = 0;
  size_t ls = 0;
  if (le > o->max_bytes) {
    t->first_line_exceeded = 1;
    t->by = LASH_TRUNC_BYTES;
    return;
  }
  for (;;) {
    size_t cost;
    if (kept >= o->max_lines) { t->by = LASH_TRUNC_LINES; break; }
    cost = (le - ls) + (kept > 0);
    if (total + cost > o->max_bytes) { t->by = LASH_TRUNC_BYTES; break; }
    total += cost;
    kept++;
    kept_end = le;
    if (le == end) break;                     /* that was the last line */
    ls = le + 1;
    le = line_end(text, ls, end);
  }
  t->body_off = 0;
  t->body_len = kept_end;
  t->lines = kept;
}

void lash_truncate(const char *text, size_t len, const lash_trunc_opts *o,
                   lash_trunc *t) {
  size_t end = len;
  char size[32];
  const char *where = o->direction == LASH_TRUNC_HEAD ? "first" : "last";
  memset(t, 0, sizeof *t);
  t->direction = o->direction == LASH_TRUNC_HEAD ? LASH_TRUNC_HEAD : LASH_TRUNC_TAIL;
  if (end > 0 && text[end - 1] == '\n') end--;  /* a trailing "\n" ends, not starts, a line */
  if (o->direction == LASH_TRUNC_HEAD) trunc_head(text, end, o, t);
  else trunc_tail(text, end, o, t);
  if (o->max_bytes != LASH_NOLIMIT) lash_format_size(o->max_bytes, size, sizeof size);
  if (t->first_line_exceeded) {
    snprintf(t->marker, sizeof t->marker,
             "[... first line exceeds the %s limit, output omitted ...]", size);
  } else if (t->by == LASH_TRUNC_LINES) {
    snprintf(t->marker, sizeof t->marker,
             "[... output truncated to the %s %zu lines ...]", where, o->max_lines);
  } else if (t->by == LASH_TRUNC_BYTES ||
             (o->already_truncated && o->max_bytes != LASH_NOLIMIT)) {
    snprintf(t->marker, sizeof t->marker,
             "[... output truncated to the %s %s ...]", where, size);
  } else if (o->already_truncated) {
    snprintf(t->marker, sizeof t->marker, "[... output truncated ...]");
  } else {
    return;
  }
  t->marked = 1;
  t->marker_len = strlen(t->marker);
}

size_t lash_trunc_size(const lash_trunc *t) {
  if (!t->marked) return t->body_len;
  if (t->first_line_exceeded) return t->marker_len;
  return t->marker_len + 1 + t->body_len;
}

size_t lash_trunc_render(const char *text, const lash_trunc *t, char *dst) {
  char *d = dst;
  if (!t->marked || t->direction == LASH_TRUNC_HEAD) {
    if (t->body_len) memcpy(d, text + t->body_off, t->body_len);
    d += t->body_len;
  }
  if (t->marked) {
    if (t->direction == LASH_TRUNC_HEAD && !t->first_line_exceeded) *d++ = '\n';
    memcpy(d, t->marker, t->marker_len);
    d += t->marker_len;
    if (t->direction == LASH_TRUNC_TAIL) {
      *d++ = '\n';
      if (t->body_len) memcpy(d, text + t->body_off, t->body_len);
      d += t->body_len;
    }
  }
  return (size_t)(d - dst);
}

/* ---- UTF-8 ---------------------------------------------------------- */

/* Classify the sequence at s[0, n) (n >= 1). Returns its length and sets
** *ok: a valid character (1-4 bytes), or the maximal subpart of an
** ill-formed one (1-3 bytes: the lead and the continuation bytes that still
** fit a valid sequence; Unicode 3.9 table 3-7). */
static size_t utf8_seq(const unsigned char *s, size_t n, int *ok) {
  unsigned char c = s[0], lo = 0x80, hi = 0xBF;
  size_t need, i;
  if (c < 0x80) { *ok = 1; return 1; }
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;                 /* no overlongs */
    else if (c == 0xED) hi = 0x9F;            /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;                 /* no overlongs */
    else if (c == 0xF4) hi = 0x8F;            /* nothing above U+10FFFF */
  } else { *ok = 0; return 1; }               /* 80-C1, F5-FF */
  for (i = 1; i <= need; i++) {
    if (i >= n || s[i] < lo || s[i] > hi) { *ok = 0; return i; }
    lo = 0x80;
    hi = 0xBF;
  }
  *ok = 1;
  return need + 1;
}

/* Length of the leading ASCII run, eight bytes at a time. */
static size_t ascii_prefix(const unsigned char *s, size_t n) {
  size_t i = 0;
  uint64_t w;
  while (i + 8 <= n) {
    memcpy(&w, s + i, 8);
    if (w & UINT64_C(0x8080808080808080)) break;
    i += 8;
  }
  while (i < n && s[i] < 0x80) i++;
  return i;
}

size_t lash_utf8_valid_prefix(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    int ok;
    size_t k;
    i += ascii_prefix(u + i, len - i);
    if (i >= len) break;
    k = utf8_seq(u + i, len - i, &ok);
    if (!ok) break;
    i += k;
  }
  return i;
}

int lash_utf8_valid(const char *s, size_t len) {
  return lash_utf8_valid_prefix(s, len) == len;
}

size_t lash_utf8_repaired_size(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, out = 0;
  while (i < len) {
    int ok;
    size_t a = ascii_prefix(u + i, len - i), k;
    i += a;
    out += a;
    if (i >= len) break;
    k = utf8_seq(u + i, len - i, &ok);
    out += ok ? k : 3;
    i += k;
  }
  return out;
}

size_t lash_utf8_repair(const char *s, size_t len, char *dst) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, o = 0;
  while (i < len) {
    int ok;
    size_t a = ascii_prefix(u + i, len - i), k;
    memcpy(dst + o, s + i, a);
    i += a;
    o += a;
    if (i >= len) break;
    k = utf8_seq(u + i, len - i, &ok);
    if (ok) {
      memcpy(dst + o, s + i, k);
      o += k;
    } else {
      memcpy(dst + o, "\xEF\xBF\xBD", 3);
      o += 3;
    }
    i += k;
  }
  return o;
}

/* ---- text for a terminal ----------------------------------------------- */

/* One step of lash_term_visible: what s[0..] becomes (into dst when not
** NULL) and how many bytes of s it took (*took). */
static size_t term_step(const unsigned char *s, size_t n, char *dst, size_t *took) {
  static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
  int ok;
  size_t k;
  if (s[0] < 0x80) {
    *took = 1;
    if (s[0] == '\t' || s[0] == '\n' || (s[0] >= 0x20 && s[0] < 0x7F)) {
      if (dst) dst[0] = (char)s[0];
      return 1;
    }
    if (dst) {
      dst[0] = '^';
      dst[1] = (char)((s[0] + 64) & 0x7F);
    }
    return 2;
  }
  k = utf8_seq(s, n, &ok);
  *took = k;
  /* ill-formed (a lone 0x9B is 8-bit CSI), or a C1 control as UTF-8 */
  if (!ok || (k == 2 && s[0] == 0xC2 && s[1] <= 0x9F)) {
    if (dst) memcpy(dst, fffd, 3);
    return 3;
  }
  if (dst) memcpy(dst, s, k);
  return k;
}

size_t lash_term_visible_size(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, out = 0, took;
  while (i < len) {
    out += term_step(u + i, len - i, NULL, &took);
    i += took;
  }
  return out;
}

size_t lash_term_visible(const char *s, size_t len, char *dst) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, o = 0, took;
  while (i < len) {
    o += term_step(u + i, len - i, dst + o, &took);
    i += took;
  }
  return o;
}
