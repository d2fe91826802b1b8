/*
** fuzz_sse.c: libFuzzer target for the SSE parser (src/1-base/sse.c). Checks:
**   - fed whole, it gives the same events as a deliberately naive parser
**     written from the spec here (the whole stream in memory, line by line);
**   - split into chunks at fuzzer-chosen points, it gives the same events
**     and the same result code as fed whole, also under small limits;
**   - no event carries more data than max_event.
*/
// fuzz-sources: src/1-base/sse.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

typedef struct { char *p; size_t len, cap; size_t max_event; } out_t;

static void put(out_t *o, const void *s, size_t n) {
  if (o->len + n > o->cap) {
    o->cap = (o->len + n) * 2 + 64;
    o->p = realloc(o->p, o->cap);
    CHECK(o->p != NULL);
  }
  if (n) memcpy(o->p + o->len, s, n);
  o->len += n;
}

static void put_field(out_t *o, const char *s, size_t n) {
  put(o, &n, sizeof n);
  put(o, s, n);
}

static void log_event(out_t *o, const char *type, size_t tn, const char *d, size_t dn,
                      const char *id, size_t idn, int64_t retry) {
  put_field(o, type, tn);
  put_field(o, d, dn);
  put_field(o, id, idn);
  put(o, &retry, sizeof retry);
}

static int on_event(void *ud, const lash_sse_event *ev) {
  out_t *o = ud;
  CHECK(ev->data_len <= o->max_event);
  CHECK(ev->type_len > 0);
  log_event(o, ev->type, ev->type_len, ev->data, ev->data_len, ev->id, ev->id_len, ev->retry);
  return 0;
}

/* ---- the naive reference -------------------------------------------- */

typedef struct { char *p; size_t n; } str;

static void str_set(str *s, const char *p, size_t n) {
  free(s->p);
  s->p = malloc(n + 1);
  if (n) memcpy(s->p, p, n);
  s->n = n;
}

static void str_add(str *s, const char *p, size_t n) {
  s->p = realloc(s->p, s->n + n + 1);
  if (n) memcpy(s->p + s->n, p, n);
  s->n += n;
}

static void naive(const char *in, size_t n, out_t *o) {
  str line = {0}, dat = {0}, type = {0}, id = {0};
  int64_t retry = -1;
  size_t i = 0;
  if (n >= 3 && memcmp(in, "\xef\xbb\xbf", 3) == 0) i = 3;
  str_set(&line, "", 0);
  str_set(&dat, "", 0);
  str_set(&type, "", 0);
  str_set(&id, "", 0);
  for (; i < n; i++) {
    char c = in[i];
    size_t colon, k;
    const char *v;
    size_t vn;
    if (c != '\r' && c != '\n') {
      str_add(&line, &c, 1);
      continue;
    }
    if (c == '\r' && i + 1 < n && in[i + 1] == '\n') i++;
    /* process the line */
    if (line.n == 0) {
      if (dat.n) {
        log_event(o, type.n ? type.p : "message", type.n ? type.n : 7, dat.p, dat.n - 1,
                  id.p, id.n, retry);
      }
      str_set(&dat, "", 0);
      str_set(&type, "", 0);
      retry = -1;
    } else if (line.p[0] != ':') {
      for (colon = 0; colon < line.n && line.p[colon] != ':'; colon++) {}
      v = line.p + colon + (colon < line.n);
      vn = line.n - colon - (colon < line.n);
      if (vn && v[0] == ' ') v++, vn--;
      if (colon == 4 && memcmp(line.p, "data", 4) == 0) {
        str_add(&dat, v, vn);
        str_add(&dat, "\n", 1);
      } else if (colon == 5 && memcmp(line.p, "event", 5) == 0) {
        str_set(&type, v, vn);
      } else if (colon == 2 && memcmp(line.p, "id", 2) == 0) {
        if (!memchr(v, 0, vn)) str_set(&id, v, vn);
      } else if (colon == 5 && memcmp(line.p, "retry", 5) == 0) {
        int digits = vn > 0;
        int64_t r = 0;
        for (k = 0; k < vn; k++) digits &= v[k] >= '0' && v[k] <= '9';
        if (digits) {
          for (k = 0; k < vn; k++) {
            if (r > (INT64_MAX - (v[k] - '0')) / 10) { r = INT64_MAX; break; }
            r = r * 10 + (v[k] - '0');
          }
          retry = r;
        }
      }
    }
    str_set(&line, "", 0);
  }
  free(line.p);
  free(dat.p);
  free(type.p);
  free(id.p);
}

/* ---- the target ----------------------------------------------------- */

static int run(const char *in, size_t n, const size_t *cuts, int ncuts, size_t max_line,
               size_t max_event, out_t *o) {
  lash_sse p;
  size_t at = 0;
  int i, rc = 0;
  o->len = 0;
  o->max_event = max_event ? max_event : LASH_SSE_DEFAULT_MAX_EVENT;
  lash_sse_init(&p, on_event, o);
  lash_sse_set_limits(&p, max_line, max_event);
  for (i = 0; i <= ncuts && rc == 0; i++) {
    size_t to = i < ncuts ? cuts[i] : n;
    rc = lash_sse_feed(&p, in + at, to - at);
    at = to;
  }
  lash_sse_free(&p);
  CHECK(lash_sse_feed(&p, "x", 1) == LASH_SSE_ECLOSED);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  out_t whole = {0}, split = {0}, ref = {0};
  size_t cuts[16], n, max_line, max_event;
  const char *in;
  int ncuts, i, rc_whole, rc_split;
  if (size < 3) return 0;
  ncuts = data[0] % 16;
  max_line = (size_t)data[1] + 1;
  max_event = (size_t)data[2] * 2 + 1;
  in = (const char *)data + 3;
  n = size - 3;
  /* cut points from the input's own bytes, sorted */
  for (i = 0; i < ncuts; i++) cuts[i] = n ? ((size_t)(unsigned char)in[(i * 7) % n] * 131 + (size_t)i * 17) % (n + 1) : 0;
  for (i = 1; i < ncuts; i++) {
    size_t c = cuts[i];
    int j = i - 1;
    while (j >= 0 && cuts[j] > c) { cuts[j + 1] = cuts[j]; j--; }
    cuts[j + 1] = c;
  }

  /* default limits: no error possible on fuzz-sized input */
  rc_whole = run(in, n, NULL, 0, 0, 0, &whole);
  CHECK(rc_whole == 0);
  naive(in, n, &ref);
  CHECK(whole.len == ref.len && (whole.len == 0 || memcmp(whole.p, ref.p, whole.len) == 0));
  rc_split = run(in, n, cuts, ncuts, 0, 0, &split);
  CHECK(rc_split == 0);
  CHECK(split.len == whole.len && (whole.len == 0 || memcmp(split.p, whole.p, whole.len) == 0));

  /* small limits: same events before the failure, same failure */
  rc_whole = run(in, n, NULL, 0, max_line, max_event, &whole);
  rc_split = run(in, n, cuts, ncuts, max_line, max_event, &split);
  CHECK(rc_whole == rc_split);
  CHECK(split.len == whole.len && (whole.len == 0 || memcmp(split.p, whole.p, whole.len) == 0));
  if (rc_whole == 0)
    CHECK(whole.len == ref.len && (whole.len == 0 || memcmp(whole.p, ref.p, whole.len) == 0));

  free(whole.p);
  free(split.p);
  free(ref.p);
  return 0;
}
