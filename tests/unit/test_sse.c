/*
** test_sse.c: the Server-Sent Events parser (src/1-base/sse.c): fields, comments,
** every line ending, the BOM, multi-line data, limits, and a multi-event
** stream split at every byte boundary.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"
#include "t.h"

#define FEED(p, lit) lash_sse_feed((p), (lit), sizeof(lit) - 1)

/* Events are logged as "type|data|id|retry;" so a whole stream compares as
** one string. */
typedef struct { char s[65536]; size_t n; int stop_after; int seen; } log_t;

static int on_event(void *ud, const lash_sse_event *ev) {
  log_t *lg = ud;
  lg->n += (size_t)snprintf(lg->s + lg->n, sizeof lg->s - lg->n, "%.*s|%.*s|%.*s|%lld;",
                            (int)ev->type_len, ev->type, (int)ev->data_len, ev->data,
                            (int)ev->id_len, ev->id, (long long)ev->retry);
  lg->seen++;
  if (lg->stop_after && lg->seen >= lg->stop_after) return 42;
  return 0;
}

/* Parse `in` in chunks cut at the offsets in cuts[0..ncuts) (ascending). */
static int parse_cuts(const char *in, size_t len, const size_t *cuts, int ncuts,
                      log_t *lg) {
  lash_sse p;
  size_t at = 0;
  int i, rc = 0;
  lash_sse_init(&p, on_event, lg);
  lg->n = 0;
  lg->s[0] = '\0';
  for (i = 0; i <= ncuts && rc == 0; i++) {
    size_t to = i < ncuts ? cuts[i] : len;
    rc = lash_sse_feed(&p, in + at, to - at);
    at = to;
  }
  lash_sse_free(&p);
  return rc;
}

static void check(const char *in, const char *want, const char *what) {
  log_t *lg = calloc(1, sizeof *lg);
  int rc = parse_cuts(in, strlen(in), NULL, 0, lg);
  T_EQ_INT(rc, 0, "feed succeeds");
  T_EQ_STR(lg->s, want, what);
  free(lg);
}

static void test_fields(void) {
  check("data: hello\n\n", "message|hello||-1;", "a simple event");
  check("data: a\ndata: b\n\n", "message|a\nb||-1;", "multi-line data is joined with \\n");
  check("data: a\n\ndata: b\n\n", "message|a||-1;message|b||-1;", "two events");
  check("event: add\ndata: 1\n\ndata: 2\n\n", "add|1||-1;message|2||-1;",
        "the event type resets after a dispatch");
  check("id: 7\ndata: a\n\ndata: b\n\n", "message|a|7|-1;message|b|7|-1;",
        "the last event id persists across events");
  check("id: 7\ndata: a\n\nid\ndata: b\n\n", "message|a|7|-1;message|b||-1;",
        "an empty id resets it");
  check("retry: 1500\ndata: a\n\ndata: b\n\n", "message|a||1500;message|b||-1;",
        "retry belongs to the event that carried it");
  check("retry: 15x\ndata: a\n\n", "message|a||-1;", "a retry with a non-digit is ignored");
  check("retry:\ndata: a\n\n", "message|a||-1;", "an empty retry is ignored");
  check("data:  two spaces\n\n", "message| two spaces||-1;", "only one space after the colon goes");
  check("data:nospace\n\n", "message|nospace||-1;", "no space after the colon");
  check("data\n\n", "message|||-1;", "a field without a colon has an empty value");
  check("data:\n\n", "message|||-1;", "empty data still dispatches");
  check("data\ndata\n\n", "message|\n||-1;", "two empty data lines give one newline");
  check("data: a:b:c\n\n", "message|a:b:c||-1;", "only the first colon splits");
  check(": a comment\ndata: x\n: another\n\n", "message|x||-1;", "comments are ignored");
  check(":\n\n", "", "a bare comment dispatches nothing");
  check("event: ping\n\n", "", "an event without data is not dispatched");
  check("event: ping\n\ndata: x\n\n", "message|x||-1;", "and its type does not leak forward");
  check("foo: bar\ndata: x\n\n", "message|x||-1;", "unknown fields are ignored");
  check("Data: x\n\n", "", "field names are case-sensitive");
  check("data: x\n", "", "an unterminated event is not dispatched at the end");
  check("data: x", "", "nor is an unterminated line");
  check("\n\n\ndata: x\n\n\n\n", "message|x||-1;", "extra blank lines dispatch nothing");
  check("data: a\r\n\r\n", "message|a||-1;", "CRLF");
  check("data: a\r\r", "message|a||-1;", "CR");
  check("data: a\rdata: b\ndata: c\r\n\n", "message|a\nb\nc||-1;", "mixed line endings");
  check("data: \xc3\xa9\xe2\x82\xac\n\n", "message|\xc3\xa9\xe2\x82\xac||-1;", "UTF-8 passes");
  check("\xef\xbb\xbf" "data: bom\n\n", "message|bom||-1;", "a leading BOM is skipped");
  check("\xef\xbb\xbf\xef\xbb\xbf" "data: x\n\ndata: y\n\n", "message|y||-1;",
        "only one BOM is skipped (the second makes an unknown field)");
  check("data: \xef\xbb\xbfx\n\n", "message|\xef\xbb\xbfx||-1;", "a BOM later on is data");
  {
    log_t *lg = calloc(1, sizeof *lg);
    lash_sse p;
    size_t n;
    const char *id;
    lash_sse_init(&p, on_event, lg);
    T_EQ_INT(FEED(&p, "retry: 3000\n\nid: a\0b\nid: ok\n\n"), 0, "feed");
    T_EQ_INT(lash_sse_retry(&p), 3000, "a retry-only block sets the reconnection time");
    id = lash_sse_last_id(&p, &n);
    T_EQ_MEM(id, n, "ok", 2, "an id with NUL is ignored, the next one taken");
    T_EQ_STR(lg->s, "", "and no event was dispatched");
    T_EQ_INT(FEED(&p, "retry: 99999999999999999999999\n"), 0, "feed");
    T_EQ_INT(lash_sse_retry(&p) == INT64_MAX, 1, "a huge retry saturates");
    lash_sse_free(&p);
    lash_sse_free(&p);
    free(lg);
  }
}

static void test_chunk_boundaries(void) {
  static const char stream[] =
    "\xef\xbb\xbf: hello\r\n"
    "event: add\r\nid: 1\r\ndata: first\r\ndata: line\r\n\r\n"
    "data: second\rretry: 250\r\r"
    "id: 2\ndata:x\n\n"
    ":comment\n"
    "event: end\ndata: \xe2\x82\xac done\r\n\n";
  const char *want =
    "add|first\nline|1|-1;message|second|1|250;message|x|2|-1;end|\xe2\x82\xac done|2|-1;";
  size_t len = sizeof stream - 1, a, b, cuts[2];
  int bad = 0, rc;
  log_t *lg = calloc(1, sizeof *lg);
  rc = parse_cuts(stream, len, NULL, 0, lg);
  T_EQ_INT(rc, 0, "whole stream parses");
  T_EQ_STR(lg->s, want, "whole stream gives four events");
  for (a = 0; a <= len; a++) {
    cuts[0] = a;
    rc = parse_cuts(stream, len, cuts, 1, lg);
    if (rc != 0 || strcmp(lg->s, want) != 0) {
      if (!bad) printf("# split at %zu: [%s]\n", a, lg->s);
      bad++;
    }
  }
  T_EQ_INT(bad, 0, "split in two at every byte boundary");
  bad = 0;
  for (a = 0; a <= len; a++) {
    for (b = a; b <= len; b++) {
      cuts[0] = a;
      cuts[1] = b;
      rc = parse_cuts(stream, len, cuts, 2, lg);
      if (rc != 0 || strcmp(lg->s, want) != 0) {
        if (!bad) printf("# split at %zu,%zu: [%s]\n", a, b, lg->s);
        bad++;
      }
    }
  }
  T_EQ_INT(bad, 0, "split in three at every pair of byte boundaries");
  {
    size_t *every = malloc(len * sizeof *every), i;
    for (i = 0; i < len; i++) every[i] = i + 1;
    rc = parse_cuts(stream, len, every, (int)len - 1, lg);
    T_EQ_INT(rc, 0, "1-byte chunks parse");
    T_EQ_STR(lg->s, want, "1-byte chunks give the same events");
    free(every);
  }
  /* the CR/LF split: a CR ending one chunk and a LF starting the next are
  ** one line end, not a line end and a blank line */
  {
    size_t c1[] = {8};
    rc = parse_cuts("data: a\r\ndata: b\r\n\r\n", 20, c1, 1, lg);
    T_EQ_STR(lg->s, "message|a\nb||-1;", "CR|LF across chunks is one line end");
    rc = parse_cuts("data: a\r\rdata: b\r\r", 18, c1, 1, lg);
    T_EQ_STR(lg->s, "message|a||-1;message|b||-1;", "CR|CR across chunks is a blank line");
  }
  /* a BOM split across chunks is still skipped, a partial one is text */
  {
    size_t c1[] = {1}, c2[] = {2};
    rc = parse_cuts("\xef\xbb\xbf" "data: x\n\n", 12, c1, 1, lg);
    T_EQ_STR(lg->s, "message|x||-1;", "BOM split after 1 byte");
    rc = parse_cuts("\xef\xbb\xbf" "data: x\n\n", 12, c2, 1, lg);
    T_EQ_STR(lg->s, "message|x||-1;", "BOM split after 2 bytes");
    rc = parse_cuts("\xef\xbb" "data: x\n\ndata: y\n\n", 20, c1, 1, lg);
    T_EQ_STR(lg->s, "message|y||-1;", "a partial BOM stays part of the first line");
  }
  free(lg);
}

static void test_limits(void) {
  log_t *lg = calloc(1, sizeof *lg);
  lash_sse p;
  char big[64];
  lash_sse_init(&p, on_event, lg);
  lash_sse_set_limits(&p, 16, 20);
  T_EQ_INT(FEED(&p, "data: 0123456789\n\n"), 0, "a 16-byte line fits a 16-byte limit");
  T_EQ_INT(FEED(&p, "data: 01234"), 0, "a partial line under the limit");
  T_EQ_INT(FEED(&p, "567890"), LASH_SSE_ELINE, "a line over the limit across chunks fails");
  T_EQ_INT(FEED(&p, "\n\n"), LASH_SSE_ELINE, "and the parser stays failed");
  T_OK(strstr(lash_sse_strerror(LASH_SSE_ELINE), "line") != NULL, "the message names the line limit");
  lash_sse_free(&p);
  T_EQ_INT(FEED(&p, "x"), LASH_SSE_ECLOSED, "a freed parser refuses input");

  lash_sse_init(&p, on_event, lg);
  lash_sse_set_limits(&p, 16, 0);
  memset(big, 'x', sizeof big);
  T_EQ_INT(lash_sse_feed(&p, big, sizeof big), LASH_SSE_ELINE, "a long line inside one chunk fails");
  lash_sse_free(&p);

  lash_sse_init(&p, on_event, lg);
  lash_sse_set_limits(&p, 100, 20);
  lg->n = 0; lg->s[0] = '\0';
  T_EQ_INT(FEED(&p, "data: 0123456789\ndata: 012345678\n\n"), 0,
           "20 bytes of event data fit a 20-byte event limit");
  T_EQ_STR(lg->s, "message|0123456789\n012345678||-1;", "that event");
  T_EQ_INT(FEED(&p, "data: 0123456789\ndata: 0123456789\n\n"), LASH_SSE_EEVENT,
           "21 bytes of event data fail");
  lash_sse_free(&p);

  /* a callback that stops the parse */
  lash_sse_init(&p, on_event, lg);
  lg->seen = 0; lg->stop_after = 1;
  T_EQ_INT(FEED(&p, "data: a\n\ndata: b\n\n"), 42, "a callback's non-zero stops the feed");
  T_EQ_INT(lg->seen, 1, "after the first event");
  T_EQ_INT(FEED(&p, "data: c\n\n"), 42, "and the parser stays stopped");
  lash_sse_free(&p);
  free(lg);
}

int main(void) {
  test_fields();
  test_chunk_boundaries();
  test_limits();
  return T_DONE();
}
