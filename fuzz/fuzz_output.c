/*
** fuzz_output.c: libFuzzer target for output shaping (src/1-base/output.c). It
** checks invariants rather than crashes only:
**   - the ring keeps a suffix of the input, within its cap, cut forward
**     over at most 3 continuation bytes and only after a drop, whatever the
**     chunk size; view and copy agree;
**   - UTF-8 repair gives valid UTF-8, leaves valid input untouched, is
**     idempotent, and its size function is exact;
**   - truncation keeps a suffix (tail) or prefix (head) of the text, within
**     max_bytes and max_lines, with a marker exactly when something was cut,
**     and valid UTF-8 in gives valid UTF-8 out.
*/
// fuzz-sources: src/1-base/output.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static void check_ring(const char *s, size_t n, size_t max, size_t chunk) {
  lash_ring r;
  size_t i, len, clen, skip;
  const char *v;
  char *copy;
  lash_ring_init(&r, max);
  for (i = 0; i < n; i += chunk) {
    size_t k = n - i < chunk ? n - i : chunk;
    CHECK(lash_ring_feed(&r, s + i, k) == 0);
    CHECK(r.cap <= max);
  }
  CHECK(lash_ring_total(&r) == n);
  CHECK(lash_ring_dropped(&r) == (n > max));
  copy = malloc(lash_ring_size(&r) + 1);
  clen = lash_ring_copy(&r, copy);
  CHECK(clen == lash_ring_size(&r));
  v = lash_ring_view(&r, &len);
  CHECK(len == clen);
  CHECK(len == 0 || memcmp(v, copy, len) == 0);
  /* a suffix of the input, at most max long, losing at most 3 bytes */
  CHECK(len <= max && len <= n);
  CHECK(len == 0 || memcmp(v, s + n - len, len) == 0);
  skip = (n < max ? n : max) - len;
  CHECK(skip <= 3);
  CHECK(skip == 0 || n > max);
  for (i = 0; i < skip; i++) CHECK(((unsigned char)s[n - len - skip + i] & 0xC0) == 0x80);
  free(copy);
  lash_ring_free(&r);
}

static char *repair(const char *s, size_t n, size_t *out) {
  size_t need = lash_utf8_repaired_size(s, n);
  char *d = malloc(need + 1);
  *out = lash_utf8_repair(s, n, d);
  CHECK(*out == need);
  CHECK(lash_utf8_valid(d, *out));
  CHECK(lash_utf8_valid_prefix(s, n) <= n);
  if (lash_utf8_valid(s, n)) CHECK(*out == n && memcmp(d, s, n) == 0);
  else CHECK(*out > lash_utf8_valid_prefix(s, n));
  return d;
}

static void check_trunc(const char *s, size_t n, size_t max_lines, size_t max_bytes,
                        int dir, int already, int valid) {
  lash_trunc_opts o;
  lash_trunc t;
  char *out;
  size_t len, end = n, nl = 0, i;
  o.max_lines = max_lines;
  o.max_bytes = max_bytes;
  o.direction = dir;
  o.already_truncated = already;
  lash_truncate(s, n, &o, &t);
  if (end && s[end - 1] == '\n') end--;
  CHECK(t.body_off + t.body_len <= end);
  out = malloc(lash_trunc_size(&t) + 1);
  len = lash_trunc_render(s, &t, out);
  CHECK(len == lash_trunc_size(&t));
  CHECK(t.marked == (t.by != LASH_TRUNC_NONE || already));
  CHECK(t.marked || (t.body_off == 0 && t.body_len == end));
  if (t.first_line_exceeded) {
    CHECK(dir == LASH_TRUNC_HEAD && t.body_len == 0 && len == t.marker_len);
  } else if (t.marked) {
    CHECK(len == t.marker_len + 1 + t.body_len);
  }
  if (dir == LASH_TRUNC_HEAD) CHECK(t.body_off == 0);
  else CHECK(t.body_off + t.body_len == end);
  for (i = 0; i < t.body_len; i++) nl += s[t.body_off + i] == '\n';
  {
    /* the line kept first: the last one (tail) or the first one (head) */
    const char *nlp = memchr(s, '\n', end);
    size_t ls = end, first_len;
    while (ls > 0 && s[ls - 1] != '\n') ls--;
    first_len = dir == LASH_TRUNC_HEAD ? (nlp ? (size_t)(nlp - s) : end) : end - ls;
    if (first_len > max_bytes) {
      CHECK(t.by == LASH_TRUNC_BYTES);
      if (dir == LASH_TRUNC_HEAD) CHECK(t.first_line_exceeded);
      else CHECK(nl == 0 && t.lines == 1 && t.body_len <= max_bytes &&
                 max_bytes - t.body_len <= 3);
    } else {
      CHECK(!t.first_line_exceeded);
      CHECK(t.body_len <= max_bytes);
      CHECK(t.lines <= max_lines);
      CHECK(t.lines == (t.lines ? nl + 1 : 0));
      /* whole lines: a non-empty cut starts and ends at line boundaries */
      if (t.lines) {
        CHECK(t.body_off == 0 || s[t.body_off - 1] == '\n');
        CHECK(t.body_off + t.body_len == end || s[t.body_off + t.body_len] == '\n');
      } else {
        CHECK(t.body_len == 0 && t.by != LASH_TRUNC_NONE);
      }
    }
  }
  CHECK(memchr(t.marker, '\0', sizeof t.marker) != NULL);
  if (valid) CHECK(lash_utf8_valid(out, len));
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s;
  size_t n, max, chunk, max_lines, max_bytes, rlen;
  char *fixed;
  if (size < 6) return 0;
  max = (size_t)data[0] * 3;            /* 0..765: often under the input size */
  chunk = (size_t)data[1] % 64 + 1;
  max_lines = data[2] == 255 ? LASH_NOLIMIT : data[2] % 32;
  max_bytes = data[3] == 255 ? LASH_NOLIMIT : (size_t)data[3] * 2;
  s = (const char *)data + 6;
  n = size - 6;

  check_ring(s, n, max, chunk);
  check_ring(s, n, max, n ? n : 1);

  fixed = repair(s, n, &rlen);
  {
    size_t again;
    char *twice = repair(fixed, rlen, &again);
    CHECK(again == rlen && memcmp(twice, fixed, rlen) == 0);
    free(twice);
  }
  check_trunc(fixed, rlen, max_lines, max_bytes, data[4] & 1, (data[5] & 1), 1);
  check_trunc(s, n, max_lines, max_bytes, (data[4] >> 1) & 1, (data[5] >> 1) & 1, 0);
  free(fixed);
  {
    char buf[32];
    uint64_t v = 0;
    size_t i, k;
    for (i = 0; i < 8 && i < n; i++) v = v << 8 | (uint8_t)s[i];
    k = lash_format_size(v, buf, sizeof buf);
    CHECK(k > 0 && k < sizeof buf && buf[k - 1] == 'B');
  }
  return 0;
}
