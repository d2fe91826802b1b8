/*
** fuzz_grpc_frame.c: libFuzzer target for gRPC's message framing and
** status parsing (src/3-transport/grpc.c). Checks, beyond no crash:
**   - the reassembler fed the body in fuzzer-chosen chunks delivers exactly
**     the messages (and the same error, and the same leftover) as a naive
**     parse of the whole body written here from the framing rule
**     (1 flag byte, 4-byte big-endian length, payload);
**   - grpc-status-details-bin parsing (google.rpc.Status) never reports a
**     negative or non-finite RetryInfo delay, its message is valid UTF-8;
**     percent-decoding stays within its buffer.
** Input: byte 0 = limit selector, byte 1 = chunking seed, then the body.
*/
// fuzz-sources: src/3-transport/grpc.c src/1-base/pb.c src/1-base/loop.c
// fuzz-flags: -I/usr/include/x86_64-linux-gnu -lcurl
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct got {
  size_t n;
  uint64_t hash;      /* order-sensitive hash of all messages */
  size_t bytes;
} got;

static int on_msg(void *ud, const uint8_t *m, size_t n) {
  got *g = ud;
  g->n++;
  g->bytes += n;
  g->hash = g->hash * 1099511628211ULL ^ n;
  for (size_t i = 0; i < n; i++) g->hash = (g->hash ^ m[i]) * 1099511628211ULL;
  return 0;
}

#define CHECK(c, what) do { if (!(c)) { \
    fprintf(stderr, "invariant failed: %s\n", what); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t limit = (size_t)(data[0] % 64) * 8;
  uint32_t seed = data[1] * 2654435761u + 1;
  const uint8_t *body = data + 2;
  size_t n = size - 2;

  /* naive reference */
  got want = { 0, 1469598103934665603ULL, 0 };
  int want_rc = 0;
  size_t off = 0;
  while (n - off >= 5) {
    uint8_t flag = body[off];
    uint32_t len = (uint32_t)body[off + 1] << 24 | (uint32_t)body[off + 2] << 16 |
                   (uint32_t)body[off + 3] << 8 | body[off + 4];
    if (flag == 1) { want_rc = -GRPC_INTERNAL; break; }
    if (flag != 0) { want_rc = -GRPC_INTERNAL; break; }
    if (len > limit) { want_rc = -GRPC_RESOURCE_EXHAUSTED; break; }
    if (n - off - 5 < len) break;
    on_msg(&want, body + off + 5, len);
    off += 5 + len;
  }
  size_t want_left = want_rc ? 0 : n - off;

  /* chunked */
  grpc_reader r;
  char err[256];
  got have = { 0, 1469598103934665603ULL, 0 };
  int rc = 0;
  grpc_reader_init(&r, limit ? limit : 1);
  if (!limit) r.max = 0;
  size_t pos = 0;
  while (pos < n && rc == 0) {
    seed = seed * 1103515245u + 12345u;
    size_t chunk = 1 + (seed >> 16) % 17;
    if (chunk > n - pos) chunk = n - pos;
    rc = grpc_reader_feed(&r, body + pos, chunk, on_msg, &have, err, sizeof err);
    pos += chunk;
  }
  CHECK(rc == want_rc, "chunked and whole parses end the same way");
  if (rc == 0) {
    CHECK(have.n == want.n && have.hash == want.hash && have.bytes == want.bytes,
          "chunked delivery gives the same messages");
    CHECK(grpc_reader_pending(&r) == want_left, "the same bytes are left over");
  } else {
    CHECK(err[0] != 0, "a framing error says why");
  }
  grpc_reader_free(&r);

  /* status details and grpc-message on the same bytes */
  pb_arena *a = pb_arena_new();
  grpc_details det;
  if (!a) return 0;
  if (grpc_parse_details((const char *)body, n, a, &det) == 0) {
    CHECK(pb_utf8_valid(det.message.p, det.message.n), "status message is UTF-8");
    for (size_t i = 0; i < det.details_n; i++) {
      double ra = -1;
      if (grpc_retry_info(&det.details[i], &ra) == 0)
        CHECK(isfinite(ra) && ra >= 0, "retry delay is sane");
      else
        CHECK(ra == -1, "no delay without a RetryInfo");
    }
  } else {
    CHECK(det.details_n == 0 && det.details == NULL, "a refused input leaves nothing");
  }
  pb_arena_free(a);
  char out[32];
  grpc_percent_decode((const char *)body, n, out, sizeof out);
  CHECK(strlen(out) < sizeof out, "percent-decoding fits");
  return 0;
}
