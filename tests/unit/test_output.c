/*
** test_output.c: the tail ring, line/byte truncation, the size format and
** UTF-8 repair (src/1-base/output.c), against every example of issue 2 section 5
** and harness-reference sections 4.1-4.2.
*/
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "t.h"

static char *rep(const char *s, int n) {
  size_t l = strlen(s), i;
  char *r = malloc(l * (size_t)n + 1);
  for (i = 0; i < (size_t)n; i++) memcpy(r + i * l, s, l);
  r[l * (size_t)n] = '\0';
  return r;
}

static char *cat(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *r = malloc(la + lb + 1);
  memcpy(r, a, la);
  memcpy(r + la, b, lb + 1);
  return r;
}

/* Shape text with the given caps; returns a NUL-terminated malloc'd copy. */
static char *shape_n(const char *text, size_t len, size_t lines, size_t bytes,
                     int dir, int already, lash_trunc *out) {
  lash_trunc_opts o;
  lash_trunc t;
  char *r;
  size_t n;
  o.max_lines = lines;
  o.max_bytes = bytes;
  o.direction = dir;
  o.already_truncated = already;
  lash_truncate(text, len, &o, &t);
  r = malloc(lash_trunc_size(&t) + 1);
  n = lash_trunc_render(text, &t, r);
  T_OK(n == lash_trunc_size(&t), "render length matches size (%zu)", n);
  r[n] = '\0';
  if (out) *out = t;
  return r;
}

static char *shape(const char *text, size_t lines, size_t bytes, int dir,
                   int already) {
  return shape_n(text, strlen(text), lines, bytes, dir, already, NULL);
}

#define NL LASH_NOLIMIT
#define TAIL LASH_TRUNC_TAIL
#define HEAD LASH_TRUNC_HEAD

static void check_shape(const char *text, size_t lines, size_t bytes, int dir,
                        int already, const char *want, const char *what) {
  char *got = shape(text, lines, bytes, dir, already);
  T_EQ_STR(got, want, what);
  free(got);
}

static void test_format_size(void) {
  static const struct { uint64_t n; const char *s; } cases[] = {
    {0, "0B"}, {1, "1B"}, {10, "10B"}, {50, "50B"}, {1023, "1023B"},
    {1024, "1.0KB"}, {1075, "1.0KB"}, {1076, "1.1KB"}, {5000, "4.9KB"},
    {51200, "50.0KB"}, {1048575, "1024.0KB"}, {1048576, "1.0MB"},
    {5242880, "5.0MB"}, {3145728, "3.0MB"},
    /* ties at exactly .x5 round half to even, like Python's format */
    {1024 + 51 * 2 + 1, "1.1KB"},     /* 1.1006 */
    {1024 * 5 / 4 + 0, "1.2KB"},      /* 1.25 exactly -> 1.2 */
    {1024 * 7 / 4 + 0, "1.8KB"},      /* 1.75 exactly -> 1.8 */
    {UINT64_C(1) << 40, "1048576.0MB"},
  };
  size_t i;
  char buf[32];
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = lash_format_size(cases[i].n, buf, sizeof buf);
    T_EQ_STR(buf, cases[i].s, "format_size");
    T_EQ_INT(n, strlen(cases[i].s), "format_size length");
  }
  lash_format_size(UINT64_MAX, buf, sizeof buf);
  T_EQ_STR(buf, "17592186044416.0MB", "format_size of the largest size");
}

static void test_issue_examples(void) {
  char *a500 = rep("A", 500), *in, *want, *a47, *x100;
  /* "A"*500.."END" at 50 B -> marker, newline, 47 A and END */
  in = cat(a500, "END");
  a47 = rep("A", 47);
  want = cat("[... output truncated to the last 50B ...]\n", a47);
  {
    char *w2 = cat(want, "END");
    check_shape(in, NL, 50, TAIL, 0, w2, "A*500..END at 50 B keeps 47 A and END");
    free(w2);
  }
  free(in); free(want); free(a47);
  check_shape("first\nsecond\nthird", 1, NL, TAIL, 0,
              "[... output truncated to the last 1 lines ...]\nthird",
              "first/second/third at 1 line keeps third");
  in = rep("\xc3\xa9", 20);
  check_shape(in, NL, 5, TAIL, 0,
              "[... output truncated to the last 5B ...]\n\xc3\xa9\xc3\xa9",
              "e-acute*20 at 5 B keeps two whole characters");
  free(in);
  x100 = rep("X", 100);
  in = cat(x100, "\nEND");
  check_shape(in, NL, 50, TAIL, 0,
              "[... output truncated to the last 50B ...]\nEND",
              "X*100..\\nEND at 50 B drops the wide line whole");
  free(in); free(x100); free(a500);
  /* the markers of the issue, verbatim */
  in = rep("y\n", 60000);
  {
    char *got = shape(in, NL, 51200, TAIL, 0);
    T_OK(strncmp(got, "[... output truncated to the last 50.0KB ...]\n", 46) == 0,
         "default byte cap marker reads 50.0KB");
    free(got);
  }
  free(in);
  check_shape("a\nb\nc\nd", 2, NL, HEAD, 0,
              "a\nb\n[... output truncated to the first 2 lines ...]",
              "head marker follows the body");
  in = rep("x", 200);
  check_shape(in, NL, 10, HEAD, 0,
              "[... first line exceeds the 10B limit, output omitted ...]",
              "head with a first line over the cap keeps nothing");
  free(in);
}

static void test_truncate_rules(void) {
  lash_trunc t;
  char *got, *in, *e500;
  check_shape("hello\n", NL, NL, TAIL, 0, "hello", "one trailing newline is dropped");
  check_shape("hello\n\n", NL, NL, TAIL, 0, "hello\n", "only one trailing newline is dropped");
  check_shape("", 2000, 51200, TAIL, 0, "", "empty text stays empty");
  check_shape("\n", 2000, 51200, TAIL, 0, "", "a lone newline is one empty line");
  check_shape("a\nb\n", 2, NL, TAIL, 0, "a\nb", "exactly max_lines is not truncated");
  check_shape("a\nb\nc\n", 2, NL, TAIL, 0,
              "[... output truncated to the last 2 lines ...]\nb\nc",
              "a trailing newline does not count as a line");
  /* a joining newline counts one byte: "ab\ncd" is 5 bytes */
  check_shape("ab\ncd", NL, 5, TAIL, 0, "ab\ncd", "5 bytes fit a 5 B cap");
  check_shape("ab\ncd", NL, 4, TAIL, 0,
              "[... output truncated to the last 4B ...]\ncd",
              "the joining newline pushes 5 bytes over a 4 B cap");
  check_shape("ab\ncd", NL, 4, HEAD, 0,
              "ab\n[... output truncated to the first 4B ...]",
              "head keeps the first whole line");
  check_shape("ab\ncd\n", NL, 5, HEAD, 0, "ab\ncd",
              "the dropped trailing newline costs nothing");
  /* both caps: whichever fires first names the marker */
  check_shape("1\n2\n3\n4\n5", 3, 100, TAIL, 0,
              "[... output truncated to the last 3 lines ...]\n3\n4\n5",
              "line cap keeps the last lines");
  check_shape("1\n2\n3\n4\n5", 3, 3, TAIL, 0,
              "[... output truncated to the last 3B ...]\n4\n5",
              "byte cap fires before the line cap");
  check_shape("1\n2\n3\n4\n5", 3, 100, HEAD, 0,
              "1\n2\n3\n[... output truncated to the first 3 lines ...]",
              "head line cap keeps the first lines");
  /* a ring cut is marked even when the rest fits */
  check_shape("tail end", 2000, 51200, TAIL, 1,
              "[... output truncated to the last 50.0KB ...]\ntail end",
              "already_truncated marks text that fits");
  check_shape("tail end", 2000, NL, TAIL, 1,
              "[... output truncated ...]\ntail end",
              "already_truncated without a byte cap has no size to name");
  check_shape("a\nb\nc", 2, 100, TAIL, 1,
              "[... output truncated to the last 2 lines ...]\nb\nc",
              "already_truncated plus a line cut names the line cap");
  /* the harness-reference run_command example: stderr E*500, cap 50 */
  in = rep("E", 500);
  {
    char *e50 = rep("E", 50), *want = cat("[... output truncated to the last 50B ...]\n", e50);
    check_shape(in, 2000, 50, TAIL, 0, want, "E*500 at 50 B keeps 50 E");
    free(e50); free(want);
  }
  free(in);
  /* 1000 B of output at a 100 B cap: lines of 9 bytes + newline */
  in = rep("123456789\n", 100);           /* 1000 bytes, 100 lines */
  got = shape_n(in, strlen(in), 2000, 100, TAIL, 0, &t);
  {
    char *nine = rep("123456789\n", 10);
    char *want;
    nine[strlen(nine) - 1] = '\0';        /* 10 lines joined: 99 bytes */
    want = cat("[... output truncated to the last 100B ...]\n", nine);
    T_EQ_STR(got, want, "1000 B at a 100 B cap keeps the last 10 whole lines (99 B)");
    T_OK(t.body_len <= 100, "body within the byte cap (%zu)", t.body_len);
    T_EQ_INT(t.by, LASH_TRUNC_BYTES, "cut by bytes");
    free(nine); free(want);
  }
  free(got); free(in);
  /* tail single-line cut lands on a character boundary */
  e500 = rep("\xe2\x82\xac", 10);         /* euro sign, 3 bytes each */
  check_shape(e500, NL, 7, TAIL, 0,
              "[... output truncated to the last 7B ...]\n\xe2\x82\xac\xe2\x82\xac",
              "a 7 B cut into 3-byte characters keeps 6 bytes");
  check_shape(e500, NL, 2, TAIL, 0,
              "[... output truncated to the last 2B ...]\n",
              "a cut smaller than one character keeps nothing of it");
  free(e500);
  /* the multibyte line is whole when it fits */
  check_shape("x\n\xc3\xa9\xc3\xa9", NL, 4, TAIL, 0,
              "[... output truncated to the last 4B ...]\n\xc3\xa9\xc3\xa9",
              "multibyte lines are measured in bytes");
  /* head: an empty first line fits, and the cap counts from there */
  check_shape("\nabc", NL, 3, HEAD, 0,
              "\n[... output truncated to the first 3B ...]",
              "head keeps an empty first line");
  check_shape("abc\n", NL, 3, HEAD, 0, "abc", "head: exactly max_bytes fits");
  check_shape("abcd\n", NL, 3, HEAD, 0,
              "[... first line exceeds the 3B limit, output omitted ...]",
              "head: one byte over omits the line");
  /* the marker after a head body even when only the ring cut */
  check_shape("a\nb", 10, 100, HEAD, 1,
              "a\nb\n[... output truncated to the first 100B ...]",
              "head already_truncated puts the marker after the body");
  /* zero caps follow the algorithm literally */
  check_shape("a\nb", 0, NL, TAIL, 0,
              "[... output truncated to the last 0 lines ...]\n",
              "max_lines 0 keeps no line");
  check_shape("", NL, 0, TAIL, 0, "", "an empty line fits a 0 B cap");
  /* the kept line count, for read_file's notes */
  got = shape_n("L0\nL1\nL2\nL3", 11, 3, NL, HEAD, 0, &t);
  T_EQ_INT(t.lines, 3, "head keeps 3 lines under a 3-line cap");
  free(got);
  got = shape_n("line00\nline01\nline02", 20, NL, 12, HEAD, 0, &t);
  T_EQ_INT(t.lines, 1, "a 12 B cap keeps one 6-byte line (two need 13)");
  T_EQ_INT(t.by, LASH_TRUNC_BYTES, "by bytes");
  free(got);
  got = shape_n("xxxx", 4, NL, 2, TAIL, 0, &t);
  T_EQ_INT(t.lines, 1, "a tail cut of one line counts as one line");
  free(got);
  got = shape_n("xxxx", 4, NL, 2, HEAD, 0, &t);
  T_EQ_INT(t.lines, 0, "head keeps no line when the first is too wide");
  T_EQ_INT(t.first_line_exceeded, 1, "and says so");
  free(got);
  got = shape_n("a\nb\n", 4, NL, NL, TAIL, 0, &t);
  T_EQ_INT(t.lines, 2, "uncut text counts its lines");
  T_EQ_INT(t.by, LASH_TRUNC_NONE, "not cut");
  free(got);
  /* interior CR and NUL bytes are kept as they are */
  got = shape_n("a\r\0b\n", 5, NL, NL, TAIL, 0, &t);
  T_EQ_MEM(got, t.body_len, "a\r\0b", 4, "CR and NUL pass through");
  free(got);
}

/* Feed `s` into a ring of `max` in chunks of `chunk` bytes. */
static void ring_feed_chunks(lash_ring *r, const char *s, size_t len, size_t chunk) {
  size_t i;
  for (i = 0; i < len; i += chunk) {
    size_t n = len - i < chunk ? len - i : chunk;
    if (lash_ring_feed(r, s + i, n) != 0) T_OK(0, "feed failed");
  }
}

static void check_ring(const char *s, size_t len, size_t max, size_t chunk,
                       const char *want, size_t wlen, int dropped, const char *what) {
  lash_ring r;
  size_t n, cn;
  const char *v;
  char *copy;
  lash_ring_init(&r, max);
  ring_feed_chunks(&r, s, len, chunk);
  T_OK(r.cap <= max, "%s: memory %zu within the cap %zu", what, r.cap, max);
  T_EQ_INT(lash_ring_dropped(&r), dropped, what);
  T_EQ_INT(lash_ring_total(&r), len, "total counts every byte fed");
  n = lash_ring_size(&r);
  copy = malloc(n + 1);
  cn = lash_ring_copy(&r, copy);
  T_EQ_MEM(copy, cn, want, wlen, what);
  v = lash_ring_view(&r, &n);
  T_EQ_MEM(v ? v : "", n, want, wlen, what);
  T_EQ_INT(n, cn, "view and copy agree");
  free(copy);
  lash_ring_free(&r);
  lash_ring_free(&r);                      /* idempotent */
}

static void test_ring(void) {
  char *big, *want;
  size_t i, chunks[] = {1, 2, 3, 4, 7, 10, 11, 100};
  check_ring("0123456789", 10, 4, 10, "6789", 4, 1, "0123456789 at 4 keeps 6789");
  check_ring("0123456789AB", 12, 4, 10, "89AB", 4, 1, "chunks 0123456789|AB keep 89AB");
  check_ring("abcd", 4, 4, 1, "abcd", 4, 0, "exactly N bytes is not a drop");
  check_ring("abcde", 5, 4, 1, "bcde", 4, 1, "N+1 bytes drop one");
  check_ring("", 0, 4, 1, "", 0, 0, "nothing fed");
  check_ring("abc", 3, 0, 1, "", 0, 1, "a 0 cap keeps nothing and says so");
  /* every chunk size gives the same suffix */
  big = malloc(1000);
  for (i = 0; i < 1000; i++) big[i] = (char)('a' + i % 26);
  for (i = 0; i < sizeof chunks / sizeof chunks[0]; i++)
    check_ring(big, 1000, 100, chunks[i], big + 900, 100, 1, "last 100 of 1000 by chunk size");
  free(big);
  /* output ending in END through 1-byte chunks */
  big = malloc(600);
  memset(big, 'A', 597);
  memcpy(big + 597, "END", 3);
  check_ring(big, 600, 50, 1, big + 550, 50, 1, "A*597..END by 1-byte chunks keeps the last 50");
  free(big);
  /* a cut inside a character moves forward to the next boundary */
  want = rep("\xc3\xa9", 20);
  check_ring(want, 40, 5, 1, "\xc3\xa9\xc3\xa9", 4, 1, "e-acute*20 at 5 starts on a character");
  check_ring(want, 40, 5, 40, "\xc3\xa9\xc3\xa9", 4, 1, "same in one chunk");
  free(want);
  check_ring("\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 8, 7, 3, "\xf0\x9f\x98\x80", 4, 1,
             "a 4-byte character cut after its lead is skipped whole");
  /* more than 3 continuation bytes is not text: skip at most 3 */
  check_ring("a\x80\x80\x80\x80\x80z", 7, 6, 1, "\x80\x80z", 3, 1,
             "at most 3 continuation bytes are skipped");
  /* no cut, no skip: the stream itself starts with a continuation byte */
  check_ring("\x80ok", 3, 4, 1, "\x80ok", 3, 0, "an uncut stream is returned as fed");
  /* the ring stays correct across many wraps and a reset */
  {
    lash_ring r;
    size_t n;
    const char *v;
    lash_ring_init(&r, 5);
    for (i = 0; i < 1000; i++) lash_ring_feed(&r, "abc", 3);
    v = lash_ring_view(&r, &n);
    T_EQ_MEM(v, n, "bcabc", 5, "many wraps keep the last 5");
    lash_ring_feed(&r, "XY", 2);
    v = lash_ring_view(&r, &n);
    T_EQ_MEM(v, n, "abcXY", 5, "feeding after a view continues the stream");
    lash_ring_reset(&r);
    T_EQ_INT(lash_ring_dropped(&r), 0, "reset clears dropped");
    lash_ring_feed(&r, "hi", 2);
    v = lash_ring_view(&r, &n);
    T_EQ_MEM(v, n, "hi", 2, "a reset ring starts over");
    lash_ring_free(&r);
    lash_ring_feed(&r, "again", 5);
    v = lash_ring_view(&r, &n);
    T_EQ_MEM(v, n, "again", 5, "a freed ring can be fed again");
    lash_ring_free(&r);
  }
  /* memory grows with the stream, never past the cap */
  {
    lash_ring r;
    lash_ring_init(&r, 51200);
    lash_ring_feed(&r, "small", 5);
    T_OK(r.cap < 51200, "a short stream does not allocate the whole cap (%zu)", r.cap);
    for (i = 0; i < 20000; i++) lash_ring_feed(&r, "0123456789", 10);
    T_EQ_INT(r.cap, 51200, "a long stream uses exactly the cap");
    lash_ring_free(&r);
  }
}

/* The whole pipeline the sandbox capability runs: ring, repair, truncate. */
static void test_pipeline(void) {
  char *x100 = rep("X", 100), *in = cat(x100, "\nEND"), *x46 = rep("X", 46);
  char *want0 = cat("[... output truncated to the last 50B ...]\n", x46);
  char *want = cat(want0, "\nEND"), *got;
  lash_ring r;
  const char *v;
  size_t n;
  lash_ring_init(&r, 50);
  ring_feed_chunks(&r, in, strlen(in), 1);
  v = lash_ring_view(&r, &n);
  got = shape_n(v, n, 2000, 50, TAIL, lash_ring_dropped(&r), NULL);
  T_EQ_STR(got, want, "X*100..\\nEND through the ring keeps 46 X and END, marked");
  free(got);
  lash_ring_free(&r);
  free(x100); free(in); free(x46); free(want0); free(want);
  /* ring-only cut, small output: still marked */
  lash_ring_init(&r, 8);
  lash_ring_feed(&r, "0123456789", 10);
  v = lash_ring_view(&r, &n);
  got = shape_n(v, n, 2000, 51200, TAIL, lash_ring_dropped(&r), NULL);
  T_EQ_STR(got, "[... output truncated to the last 50.0KB ...]\n23456789",
           "a ring-only cut is marked");
  free(got);
  lash_ring_free(&r);
}

static char *repaired(const char *s, size_t len, size_t *outlen) {
  size_t need = lash_utf8_repaired_size(s, len);
  char *d = malloc(need + 1);
  *outlen = lash_utf8_repair(s, len, d);
  T_EQ_INT(*outlen, need, "repaired size is exact");
  d[*outlen] = '\0';
  return d;
}

static void check_repair(const char *s, size_t len, const char *want, const char *what) {
  size_t n;
  char *d = repaired(s, len, &n);
  T_EQ_MEM(d, n, want, strlen(want), what);
  T_OK(lash_utf8_valid(d, n), "%s: result is valid UTF-8", what);
  T_EQ_INT(lash_utf8_valid(s, len), strcmp(want, s) == 0 && strlen(s) == len, "validity agrees");
  free(d);
}

#define R "\xef\xbf\xbd"

static void test_utf8(void) {
  check_repair("\xff\xfeok", 4, R R "ok", "bytes ff fe ok");
  check_repair("ok\xe2\x82", 4, "ok" R, "an incomplete tail is one replacement");
  check_repair("plain ascii", 11, "plain ascii", "ASCII passes");
  check_repair("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12,
               "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "valid multibyte passes");
  check_repair("\xc0\xaf", 2, R R, "overlong 2-byte: two replacements");
  check_repair("\xe0\x80\xaf", 3, R R R, "overlong 3-byte: E0 80 is not a prefix");
  check_repair("\xe0\xa0", 2, R, "E0 A0 is a truncated prefix: one replacement");
  check_repair("\xed\xa0\x80", 3, R R R, "a surrogate is three replacements");
  check_repair("\xed\x9f\xbf", 3, "\xed\x9f\xbf", "U+D7FF is valid");
  check_repair("\xf4\x90\x80\x80", 4, R R R R, "above U+10FFFF");
  check_repair("\xf4\x8f\xbf\xbf", 4, "\xf4\x8f\xbf\xbf", "U+10FFFF is valid");
  check_repair("\xf0\x9f\x98", 3, R, "3 of 4 bytes: one replacement");
  check_repair("\xf0\x9f\x98" "A", 4, R "A", "a break before ASCII keeps the ASCII");
  check_repair("\xf0\x9f" "\xf0\x9f\x98\x80", 6, R "\xf0\x9f\x98\x80",
               "a break at a new lead restarts there");
  check_repair("\x80\xbf", 2, R R, "lone continuation bytes are one each");
  check_repair("\xf5\xf8\xfc\xfe", 4, R R R R, "bytes that never start a sequence");
  {
    size_t n;
    char *d = repaired("a\0b", 3, &n);
    T_EQ_MEM(d, n, "a\0b", 3, "NUL passes through repair");
    free(d);
  }
  T_EQ_INT(lash_utf8_valid_prefix("abc\xc3", 4), 3, "valid prefix stops before a cut character");
  T_EQ_INT(lash_utf8_valid_prefix("0123456789\xff", 11), 10, "valid prefix after the fast path");
  T_EQ_INT(lash_utf8_valid("", 0), 1, "empty is valid");
  /* long valid text goes through the word-at-a-time path */
  {
    char *s = rep("abcdefg\xc3\xa9", 1000);
    T_OK(lash_utf8_valid(s, strlen(s)), "long mixed text is valid");
    s[4001] = '\xff';
    T_OK(!lash_utf8_valid(s, strlen(s)), "one bad byte deep inside is found");
    free(s);
  }
}

static void check_visible(const char *s, size_t len, const char *want, const char *what) {
  size_t need = lash_term_visible_size(s, len), n;
  char *d = malloc(need + 1);
  n = lash_term_visible(s, len, d);
  T_EQ_INT(n, need, "visible size is exact");
  T_EQ_MEM(d, n, want, strlen(want), what);
  T_OK(lash_utf8_valid(d, n), "%s: the result is valid UTF-8", what);
  free(d);
}

#define CHECK_VISIBLE(s, want, what) check_visible(s, sizeof(s) - 1, want, what)

static void test_term_visible(void) {
  CHECK_VISIBLE("plain\ttext\n", "plain\ttext\n", "tab and newline pass");
  CHECK_VISIBLE("\x1b]52;c;aGk=\x07", "^[]52;c;aGk=^G", "OSC 52: ESC and BEL as caret notation");
  CHECK_VISIBLE("\x1b[2J\r\x7f", "^[[2J^M^?", "a screen clear, CR and DEL");
  CHECK_VISIBLE("a\0b", "a^@b", "NUL");
  CHECK_VISIBLE("\xc2\x9b" "6n", R "6n", "C1 CSI as UTF-8 becomes U+FFFD");
  CHECK_VISIBLE("\x9b" "6n", R "6n", "a lone 8-bit CSI becomes U+FFFD");
  CHECK_VISIBLE("\xc2\xa0\xc3\xa9\xe2\x80\xa6", "\xc2\xa0\xc3\xa9\xe2\x80\xa6",
                "U+00A0 and other text pass");
  CHECK_VISIBLE("\xed\xa0\x80", R R R, "ill-formed UTF-8 as in repair");
}

int main(void) {
  test_format_size();
  test_issue_examples();
  test_truncate_rules();
  test_ring();
  test_pipeline();
  test_utf8();
  test_term_visible();
  return T_DONE();
}
